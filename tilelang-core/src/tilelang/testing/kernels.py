"""Kernels used by several tests, written as upstream TileLang spells them."""

from __future__ import annotations

import tilelang.language as T


def elementwise_add(M, N, block_M=32, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                if bx * block_M + i < M:
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] + B[bx * block_M + i, j]

    return main


def row_softmax_sum(N, M=None, block=16):
    """S[i] = scale * sum_j exp(A[i, j] - max_j A[i, :]) with a loop reduction per row."""
    M = M if M is not None else T.symbolic("M")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), scale: T.float32, S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block)) as bx:
            for i in T.Parallel(block):
                if bx * block + i < M:
                    row_max = T.alloc_local((1,), "float32")
                    acc = T.alloc_local((1,), "float32")
                    row_max[0] = A[bx * block + i, 0]
                    for j in T.serial(1, N):
                        row_max[0] = T.max(row_max[0], A[bx * block + i, j])
                    acc[0] = 0.0
                    for j in T.serial(N):
                        acc[0] += T.exp(A[bx * block + i, j] - row_max[0])
                    S[bx * block + i] = acc[0] * scale

    return main


def tiled_matmul(M, N, K, bM=32, bN=32, bK=16, dtype="float32"):
    """C = A @ B with shared tiles and a local accumulator; edges handled by guards."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_local((bM, bN), dtype)
            for i, j in T.Parallel(bM, bN):
                Cl[i, j] = 0.0
            for ko in T.serial(T.ceildiv(K, bK)):
                for i, k in T.Parallel(bM, bK):
                    As[i, k] = T.if_then_else(
                        by * bM + i < M and ko * bK + k < K, A[by * bM + i, ko * bK + k], T.cast(0, dtype)
                    )
                for k, j in T.Parallel(bK, bN):
                    Bs[k, j] = T.if_then_else(
                        ko * bK + k < K and bx * bN + j < N, B[ko * bK + k, bx * bN + j], T.cast(0, dtype)
                    )
                for i, j in T.Parallel(bM, bN):
                    for k in T.unroll(bK):
                        Cl[i, j] += As[i, k] * Bs[k, j]
            for i, j in T.Parallel(bM, bN):
                if by * bM + i < M and bx * bN + j < N:
                    C[by * bM + i, bx * bN + j] = Cl[i, j]

    return main


def saxpy(n, block=64):
    """y = a * x + y in place, with a scalar parameter and vectorized inner loop."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), a: T.float32):
        with T.Kernel(T.ceildiv(n, block), threads=1) as bx:
            for i in T.vectorized(block):
                if bx * block + i < n:
                    Y[bx * block + i] = a * X[bx * block + i] + Y[bx * block + i]

    return main


def split_k_gemm(M, N, K, splits, bM=64, bN=64, bK=32, dtype="float16"):
    """C += A @ B with K split over the grid's z axis: each block adds its partial C tile
    with one tile-level T.atomic_add (edge tiles included; K a multiple of splits * bK)."""
    chunk = K // splits

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), splits, threads=128) as (bx, by, bz):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            T.clear(Cl)
            for k in T.Pipelined(chunk // bK, num_stages=2):
                T.copy(A[by * bM, bz * chunk + k * bK], As)
                T.copy(B[bz * chunk + k * bK, bx * bN], Bs)
                T.gemm(As, Bs, Cl)
            T.atomic_add(C[by * bM, bx * bN], Cl)

    return main


def tile_gemm(M, N, K, bM=32, bN=32, bK=16, trans_a=False, trans_b=False, dtype="float16", stages=2,
              relu=False, threads=128, panel=0, accum_dtype="float32"):
    """C = op(A) @ op(B) with tile ops, upstream style: transposes, pipeline stages, threads,
    rasterization, and optionally a relu T.Parallel epilogue on the fragment. (The examples'
    GEMM is the same kernel; tests use this one, which an installed wheel has too.) M, N
    and K may be run-time sizes (``T.dynamic``); C is ``accum_dtype`` (int32 for int8)."""
    a_shape, b_shape = ((K, M) if trans_a else (M, K)), ((N, K) if trans_b else (K, N))
    a_tile, b_tile = ((bK, bM) if trans_a else (bM, bK)), ((bN, bK) if trans_b else (bK, bN))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            As = T.alloc_shared(a_tile, dtype)
            Bs = T.alloc_shared(b_tile, dtype)
            Cl = T.alloc_fragment((bM, bN), accum_dtype)
            T.use_swizzle(max(panel, 1), enable=panel > 0)
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                if trans_a:
                    T.copy(A[k * bK, by * bM], As)
                else:
                    T.copy(A[by * bM, k * bK], As)
                if trans_b:
                    T.copy(B[bx * bN, k * bK], Bs)
                else:
                    T.copy(B[k * bK, bx * bN], Bs)
                T.gemm(As, Bs, Cl, transpose_A=trans_a, transpose_B=trans_b)
            if relu:
                for i, j in T.Parallel(bM, bN):
                    Cl[i, j] = T.max(Cl[i, j], T.float32(0))
            T.copy(Cl, C[by * bM, bx * bN])

    return main


def pointer_gemm(m, n, k, block=64, block_k=32, stages=2):
    """Upstream's pointer GEMM (test_tilelang_language_ptr.py's matmul_test): A [m][k] and B
    [n][k] (float16) and C (float32) reach the kernel as addresses (``T.ptr``), the sizes as
    scalars; C = A B^T."""

    @T.prim_func
    def main(a_ptr: T.ptr, b_ptr: T.ptr, c_ptr: T.ptr, m_: T.int32, n_: T.int32, k_: T.int32):
        A = T.make_tensor(a_ptr, (m_, k_), "float16")
        B = T.make_tensor(b_ptr, (n_, k_), "float16")
        C = T.make_tensor(c_ptr, (m_, n_), "float32")
        with T.Kernel(T.ceildiv(n, block), T.ceildiv(m, block), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block, block_k), "float16")
            B_shared = T.alloc_shared((block, block_k), "float16")
            C_local = T.alloc_fragment((block, block), "float32")
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(k_, block_k), num_stages=stages):
                T.copy(A[by * block, ko * block_k], A_shared)
                T.copy(B[bx * block, ko * block_k], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block, bx * block])

    return main


def persistent_gemm(M, N, K, bM, bN, bK, threads, stages, sm_num, spelling="persistent", group_size=8,
                    dtype="float16", accum_dtype="float32"):
    """Upstream's examples/gemm/example_gemm_persistent.py kernel as a classic builder:
    ``sm_num`` blocks walk the tiles (``spelling`` "persistent": T.Persistent; "wave_loop":
    upstream's hand-written loop over waves; "scheduler": T.PersistentTileScheduler's while
    loop, panels of ``group_size``; "scheduler_coord": its stateless ``coord`` in a wave
    loop), C through a shared tile. "tile": its non-persistent twin, a block per tile
    (rasterized in panels of 10; ``sm_num`` unused)."""
    m_blocks, n_blocks = -(-M // bM), -(-N // bN)

    @T.macro
    def tile(A, B, C, A_shared, B_shared, C_local, C_shared, bx, by):
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
            T.copy(A[bx * bM, k * bK], A_shared)
            T.copy(B[k * bK, by * bN], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C_shared)
        T.copy(C_shared, C[bx * bM, by * bN])

    if spelling == "tile":
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(m_blocks, n_blocks, threads=threads) as (bx, by):
                A_shared = T.alloc_shared((bM, bK), dtype)
                B_shared = T.alloc_shared((bK, bN), dtype)
                C_local = T.alloc_fragment((bM, bN), accum_dtype)
                C_shared = T.alloc_shared((bM, bN), dtype)
                T.use_swizzle(10)
                tile(A, B, C, A_shared, B_shared, C_local, C_shared, bx, by)

        return main

    waves = -(-(m_blocks * n_blocks) // sm_num)

    if spelling == "scheduler":  # upstream's T.PersistentTileScheduler, its while loop
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(sm_num, threads=threads) as block_id:
                A_shared = T.alloc_shared((bM, bK), dtype)
                B_shared = T.alloc_shared((bK, bN), dtype)
                C_local = T.alloc_fragment((bM, bN), accum_dtype)
                C_shared = T.alloc_shared((bM, bN), dtype)
                sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers=sm_num, swizzle_size=group_size)
                sched.init(block_id)
                while sched.valid():
                    bx, by = sched.m_idx, sched.n_idx
                    tile(A, B, C, A_shared, B_shared, C_local, C_shared, bx, by)
                    sched.next_tile()

        return main

    if spelling == "scheduler_coord":  # the scheduler without state: coordinates of a number
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(sm_num, threads=threads) as block_id:
                A_shared = T.alloc_shared((bM, bK), dtype)
                B_shared = T.alloc_shared((bK, bN), dtype)
                C_local = T.alloc_fragment((bM, bN), accum_dtype)
                C_shared = T.alloc_shared((bM, bN), dtype)
                sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers=sm_num, swizzle_size=group_size,
                                                  stateful=False)
                for w in T.serial(waves):
                    bx, by = sched.coord(sm_num * w + block_id)
                    if bx < m_blocks and by < n_blocks:
                        tile(A, B, C, A_shared, B_shared, C_local, C_shared, bx, by)

        return main

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(sm_num, threads=threads) as block_id:
            A_shared = T.alloc_shared((bM, bK), dtype)
            B_shared = T.alloc_shared((bK, bN), dtype)
            C_local = T.alloc_fragment((bM, bN), accum_dtype)
            C_shared = T.alloc_shared((bM, bN), dtype)
            if spelling == "persistent":
                for bx, by in T.Persistent([T.ceildiv(M, bM), T.ceildiv(N, bN)], sm_num, block_id, group_size):
                    tile(A, B, C, A_shared, B_shared, C_local, C_shared, bx, by)
            else:
                for w in T.serial(waves):
                    tile_id = sm_num * w + block_id
                    bx = (tile_id // group_size) % m_blocks
                    by = (tile_id % group_size) + (tile_id // group_size) // m_blocks * group_size
                    if bx * bM < M and by * bN < N:
                        tile(A, B, C, A_shared, B_shared, C_local, C_shared, bx, by)

    return main


def _attention_tile(seq_len, dim, block_M, block_N, num_stages, causal=False):
    """The examples' flash-attention tile as a T.macro: query block ``bx`` of head ``by`` of
    batch ``bz``, online softmax over the key blocks, into the given buffers. ``causal``:
    the key loop stops at the diagonal, and the mask is the first GEMM's starting value,
    as upstream's causal examples write it."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): exp(x) = exp2(x * log2(e))

    @T.macro
    def tile(Q, K, V, Output, Q_shared, K_shared, V_shared, acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev,
             scores_scale, scores_sum, logsum, bz, by, bx):
        T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
        T.fill(acc_o, 0)
        T.fill(logsum, 0)
        T.fill(scores_max, -T.infinity("float32"))
        for k in T.Pipelined(T.ceildiv((bx + 1) * block_M, block_N) if causal else T.ceildiv(seq_len, block_N),
                             num_stages=num_stages):
            T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
            if causal:
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity("float32"))
            else:
                T.clear(acc_s)
            T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
            # the last key block runs past the keys: its extra scores are -inf (the outer if is
            # Python, decided when the kernel is built; the inner one runs)
            if seq_len % block_N != 0:  # noqa: SIM102
                if (k + 1) * block_N > seq_len:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, acc_s[i, j], -T.infinity("float32"))
            T.copy(scores_max, scores_max_prev)
            T.reduce_max(acc_s, scores_max, dim=1, clear=False)
            for i in T.Parallel(block_M):
                scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] *= scores_scale[i]
            for i, j in T.Parallel(block_M, block_N):
                acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
            T.copy(acc_s, acc_s_cast)
            T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
            T.gemm(acc_s_cast, V_shared, acc_o)
            T.reduce_sum(acc_s, scores_sum, dim=1)
            for i in T.Parallel(block_M):
                logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
        for i, j in T.Parallel(block_M, dim):
            acc_o[i, j] /= logsum[i]
        T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return tile


def flash_attention(batch, heads, seq_len, dim, block_M=64, block_N=64, threads=128, num_stages=2, causal=False):
    """Flash-attention forward over [batch, seq, heads, dim] fp16 tensors (online softmax
    over key blocks; the examples' kernel, here for tests that run from an installed wheel),
    ``causal`` as upstream's causal examples mask."""
    shape = [batch, seq_len, heads, dim]
    tile = _attention_tile(seq_len, dim, block_M, block_N, num_stages, causal)

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
             Output: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], "float16")
            K_shared = T.alloc_shared([block_N, dim], "float16")
            V_shared = T.alloc_shared([block_N, dim], "float16")
            acc_s = T.alloc_fragment([block_M, block_N], "float32")
            acc_s_cast = T.alloc_fragment([block_M, block_N], "float16")
            acc_o = T.alloc_fragment([block_M, dim], "float32")
            scores_max = T.alloc_fragment([block_M], "float32")
            scores_max_prev = T.alloc_fragment([block_M], "float32")
            scores_scale = T.alloc_fragment([block_M], "float32")
            scores_sum = T.alloc_fragment([block_M], "float32")
            logsum = T.alloc_fragment([block_M], "float32")
            tile(Q, K, V, Output, Q_shared, K_shared, V_shared, acc_s, acc_s_cast, acc_o, scores_max, scores_max_prev,
                 scores_scale, scores_sum, logsum, bz, by, bx)

    return main


def flash_attention_persistent(batch, heads, seq_len, dim, block_M=128, block_N=128, threads=256, num_stages=2,
                               sm_num=132):
    """``flash_attention`` with ``sm_num`` blocks walking the (batch, head, query block)
    tiles with T.Persistent (query blocks of one head consecutive: they share K and V in
    L2). On sm_90 the K/V ring runs on across tiles, so the next tile's first stages load
    during this tile's epilogue and Q load."""
    shape = [batch, seq_len, heads, dim]
    m_blocks = -(-seq_len // block_M)
    tile = _attention_tile(seq_len, dim, block_M, block_N, num_stages)

    @T.prim_func
    def main(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"), V: T.Tensor(shape, "float16"),
             Output: T.Tensor(shape, "float16")):
        with T.Kernel(sm_num, threads=threads) as block_id:
            Q_shared = T.alloc_shared([block_M, dim], "float16")
            K_shared = T.alloc_shared([block_N, dim], "float16")
            V_shared = T.alloc_shared([block_N, dim], "float16")
            acc_s = T.alloc_fragment([block_M, block_N], "float32")
            acc_s_cast = T.alloc_fragment([block_M, block_N], "float16")
            acc_o = T.alloc_fragment([block_M, dim], "float32")
            scores_max = T.alloc_fragment([block_M], "float32")
            scores_max_prev = T.alloc_fragment([block_M], "float32")
            scores_scale = T.alloc_fragment([block_M], "float32")
            scores_sum = T.alloc_fragment([block_M], "float32")
            logsum = T.alloc_fragment([block_M], "float32")
            for bz, by, bx in T.Persistent([batch, heads, m_blocks], sm_num, block_id, m_blocks):
                tile(Q, K, V, Output, Q_shared, K_shared, V_shared, acc_s, acc_s_cast, acc_o, scores_max,
                     scores_max_prev, scores_scale, scores_sum, logsum, bz, by, bx)

    return main


def mla_decode(batch, heads, seq_len, dim, pe_dim, block_H=64, block_N=64, threads=256, num_stages=2,
               p_via_shared=True):
    """Upstream's MLA decode (examples/deepseek_mla/example_mla_decode.py, without the split
    over keys): one shared KV head, scores from the latent (dim) and rope (pe_dim) parts,
    P handed to the second GEMM through a shared tile and a fragment copy of it (or, with
    ``p_via_shared=False``, copied from the scores' fragment as flash attention does),
    every GEMM with the FullCol warp policy. With 8 warps over 64 heads the warps also
    split columns, so the row max and sum meet across warps."""
    scale = float((dim + pe_dim) ** -0.5 * 1.44269504)  # log2(e)
    dtype, accum = "float16", "float32"
    full_col = T.GemmWarpPolicy.FullCol

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype), Q_pe: T.Tensor([batch, heads, pe_dim], dtype),
             KV: T.Tensor([batch, seq_len, 1, dim], dtype), K_pe: T.Tensor([batch, seq_len, 1, pe_dim], dtype),
             Output: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(heads // block_H, batch, threads=threads) as (hid, bid):
            Q_shared = T.alloc_shared([block_H, dim], dtype)
            S_shared = T.alloc_shared([block_H, block_N], dtype)
            Q_pe_shared = T.alloc_shared([block_H, pe_dim], dtype)
            KV_shared = T.alloc_shared([block_N, dim], dtype)
            K_pe_shared = T.alloc_shared([block_N, pe_dim], dtype)
            O_shared = T.alloc_shared([block_H, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum)
            scores_max = T.alloc_fragment([block_H], accum)
            scores_max_prev = T.alloc_fragment([block_H], accum)
            scores_scale = T.alloc_fragment([block_H], accum)
            scores_sum = T.alloc_fragment([block_H], accum)
            logsum = T.alloc_fragment([block_H], accum)
            T.copy(Q[bid, hid * block_H:(hid + 1) * block_H, :], Q_shared)
            T.copy(Q_pe[bid, hid * block_H:(hid + 1) * block_H, :], Q_pe_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            for k in T.Pipelined(T.ceildiv(seq_len, block_N), num_stages=num_stages):
                T.copy(KV[bid, k * block_N:(k + 1) * block_N, 0, :], KV_shared)
                T.copy(K_pe[bid, k * block_N:(k + 1) * block_N, 0, :], K_pe_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True, policy=full_col)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True, policy=full_col)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_H):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                if p_via_shared:
                    T.copy(acc_s, S_shared)
                    T.copy(S_shared, acc_s_cast)
                else:
                    T.copy(acc_s, acc_s_cast)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.gemm(acc_s_cast, KV_shared, acc_o, policy=full_col)
            for i, j in T.Parallel(block_H, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bid, hid * block_H:(hid + 1) * block_H, :])

    return main


def rms_norm_rows(M, N, blk_m=1, dtype="float32"):
    """Upstream's rms_norm example in classic style: ``blk_m`` rows per block, the whole row
    in fragments, ``blk_m=1`` gives one-element row fragments (a 4-byte shared buffer on
    the GPU)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            A_local = T.alloc_fragment((blk_m, N), dtype)
            A_pow_local = T.alloc_fragment((blk_m, N), dtype)
            A_powsum = T.alloc_fragment((blk_m,), dtype)
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_local)
            for i, j in T.Parallel(blk_m, N):
                A_pow_local[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow_local, A_powsum, dim=1)
            for i in T.Parallel(blk_m):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N + 1e-12)
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= A_powsum[i]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    return main


# -- lowering patterns of upstream's examples (tests on the CPU and for CUDA use them) --
def masked_block_sum(n_blocks: int = 4, block: int = 64, cols: int = 32, threads: int = 128):
    """Block-sparse attention's skeleton: a mask copied into a fragment, tested with
    ``if mask[k] != 0`` around a loop body that refills a shared tile every iteration."""

    @T.prim_func
    def kernel(Mask: T.Tensor((n_blocks,), T.bool), A: T.Tensor((n_blocks * block, cols), T.float32),
               Out: T.Tensor((block, cols), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            mask = T.alloc_fragment([n_blocks], T.bool)
            tile = T.alloc_shared([block, cols], T.float32)
            acc = T.alloc_fragment([block, cols], T.float32)
            T.copy(Mask, mask)
            T.clear(acc)
            for k in T.Pipelined(n_blocks, num_stages=1):
                if mask[k] != 0:
                    T.copy(A[k * block:(k + 1) * block, :], tile)
                    for i, j in T.Parallel(block, cols):
                        acc[i, j] += tile[block - 1 - i, j]  # rows other threads loaded
            T.copy(acc, Out)

    return kernel


def split_row_sum(rows: int = 4, cols: int = 64, splits: int = 2):
    """Split-KV decoding's skeleton: a T.alloc_global workspace the first kernel writes
    and the second reduces."""
    part = cols // splits

    @T.prim_func
    def kernel(A: T.Tensor((rows, cols), T.float32), Out: T.Tensor((rows,), T.float32)):
        partial = T.alloc_global((rows, splits), T.float32)
        with T.Kernel(rows, splits, threads=32) as (bx, by):
            tile = T.alloc_fragment((part,), T.float32)
            total = T.alloc_fragment((1,), T.float32)
            T.copy(A[bx, by * part:(by + 1) * part], tile)
            T.reduce_sum(tile, total, dim=0)
            partial[bx, by] = total[0]
        with T.Kernel(rows, threads=32) as bx:
            acc = T.alloc_local((1,), T.float32)
            acc[0] = 0
            for s in T.serial(splits):
                acc[0] += partial[bx, s]
            Out[bx] = acc[0]

    return kernel


def flat_views():
    """Upstream's convolution sees its 4-D weight and output as matrices with
    ``T.Tensor(shape, dtype, X.data)`` inside the kernel."""

    @T.prim_func
    def scale_flat(W: T.Tensor((2, 4, 8), "float32"), Out: T.Tensor((2, 4, 8), "float32")):
        with T.Kernel(2, threads=32) as bx:
            w_flat = T.Tensor((8, 8), "float32", W.data)
            out_flat = T.Tensor((8, 8), "float32", Out.data)
            tile = T.alloc_shared((4, 8), "float32")
            T.copy(w_flat[bx * 4, 0], tile)
            for i, j in T.Parallel(4, 8):
                out_flat[bx * 4 + i, j] = tile[i, j] * 2.0 + i

    return scale_flat


def blocked_layout(buffer):
    """Element (i, j) of an (M, N) tensor stored in 8x8 blocks, block-row-major (the shape
    of upstream's dQ layout in flash-attention backward)."""
    from ..layout import Layout

    return Layout(buffer.shape, lambda i, j: [i // 8, j // 8, i % 8, j % 8])


def global_layout_pair(M=16, N=32):
    """Two kernels agreeing on a global tensor's layout: ``accumulate`` adds A into Q
    atomically, tile by tile; ``unpack`` reads Q back in logical order into O."""

    @T.prim_func
    def accumulate(A: T.Tensor((M, N), "float32"), Q: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 8, threads=32) as bx:
            T.annotate_layout({Q: blocked_layout(Q)})
            tile = T.alloc_fragment((8, N), "float32")
            T.copy(A[bx * 8, 0], tile)
            T.atomic_add(Q[bx * 8, 0], tile)

    @T.prim_func
    def unpack(Q: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(M // 8, threads=32) as bx:
            T.annotate_layout({Q: blocked_layout(Q)})
            T.copy(Q[bx * 8:(bx + 1) * 8, :], O[bx * 8:(bx + 1) * 8, :])

    return accumulate, unpack


def row_sums(M=1024, N=256, blocks=8, rows=32, loop="while"):
    """B = A.sum(1), ``blocks`` blocks each summing the row tiles ``b, b + blocks, ...``
    through a shared tile, in a ``while`` loop over a block-uniform counter (as upstream's AMD
    flash attention walks its tiles) or, ``loop="for"``, a counted loop: the barriers inside
    a while loop (transform/gpu/while_sync.py)."""

    if loop == "while":
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32")):
            with T.Kernel(blocks, threads=128) as (b,):
                tile = T.alloc_shared((rows, N), "float32")
                acc = T.alloc_fragment((rows,), "float32")
                bx = T.alloc_var(T.int32)
                bx = b
                while bx < M // rows:
                    T.copy(A[bx * rows, 0], tile)
                    T.reduce_sum(tile, acc, dim=1)
                    T.copy(acc, B[bx * rows])
                    bx = bx + blocks
    else:
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M,), "float32")):
            with T.Kernel(blocks, threads=128) as (b,):
                tile = T.alloc_shared((rows, N), "float32")
                acc = T.alloc_fragment((rows,), "float32")
                for w in T.serial(M // rows // blocks):
                    bx = b + w * blocks
                    T.copy(A[bx * rows, 0], tile)
                    T.reduce_sum(tile, acc, dim=1)
                    T.copy(acc, B[bx * rows])

    return main

"""fmha: flash-attention forward in fp16 on [batch, seq, heads, dim] tensors, head dims 64 and
128, causal or not, against F.scaled_dot_product_attention. The non-causal kernel and its
tile configs are benchmarks/flash_attention.py's (tilelang.testing.kernels.flash_attention);
the causal kernel below is the same online softmax with the key loop cut at the diagonal.

The causal kernel's "/diag-mask" variants mask only the key blocks that cross the diagonal,
after a GEMM that starts from zero, as FlashAttention-2/3 do, instead of giving every key
block the mask as its GEMM's starting value."""

from __future__ import annotations

import tilelang.language as T

from .common import Case, KernelSpec, Variant, load_benchmark

SHAPES = ((8, 16, 4096, 64), (8, 16, 4096, 128))  # batch, heads, seq_len, dim
SMALL_SHAPE = (1, 2, 128, 64)
# (block_M, block_N, threads, stages), pass configs: the non-causal kernel's best tiles last
# (128x128, two consumer warpgroups, which get the intra-warpgroup overlap by default; the
# loop as written beside them)
NO_OVERLAP = {"tl.intra_warpgroup_overlap": False}
CAUSAL_CONFIGS = (((64, 64, 128, 2), {}), ((128, 64, 256, 2), {}), ((128, 32, 256, 2), {}),
                  ((128, 128, 256, 2), NO_OVERLAP), ((128, 128, 256, 2), {}), ((128, 128, 256, 3), {}))
LOG2E = 1.44269504


def causal_attention(batch, heads, seq_len, dim, block_M=64, block_N=64, threads=128, num_stages=2,
                     diagonal_mask=False):
    scale = (1.0 / dim) ** 0.5 * LOG2E  # exp(x) = exp2(x * log2(e))
    shape = [batch, seq_len, heads, dim]
    dtype, accum = "float16", "float32"

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            row_max = T.alloc_fragment([block_M], accum)
            row_max_prev = T.alloc_fragment([block_M], accum)
            rescale = T.alloc_fragment([block_M], accum)
            row_sum = T.alloc_fragment([block_M], accum)
            denom = T.alloc_fragment([block_M], accum)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(denom, 0)
            T.fill(row_max, -T.infinity(accum))
            # key blocks past this query block's last row are fully masked: not visited
            for k in T.Pipelined(T.ceildiv((bx + 1) * block_M, block_N), num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if diagonal_mask:
                    T.clear(acc_s)
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                    if (k + 1) * block_N > bx * block_M:  # a key block that crosses the diagonal
                        for i, j in T.Parallel(block_M, block_N):
                            acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, acc_s[i, j],
                                                         -T.infinity(accum))
                else:
                    for i, j in T.Parallel(block_M, block_N):  # the mask as the GEMM's starting value
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                    T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.copy(row_max, row_max_prev)
                T.reduce_max(acc_s, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(row_max_prev[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= rescale[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - row_max[i] * scale)
                T.copy(acc_s, acc_s_cast)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    denom[i] = denom[i] * rescale[i] + row_sum[i]
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= denom[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main


def _variants(shape: tuple, causal: bool, quick: bool) -> list[Variant]:
    benchmark = load_benchmark("flash_attention")
    if causal:
        configs = CAUSAL_CONFIGS
        builder = causal_attention
    else:
        configs = benchmark.CONFIGS
        from tilelang.testing.kernels import flash_attention as builder
    configs = configs[:2] if quick else configs
    # the labels benchmarks/flash_attention.py prints: each option named (/mma, /overlap, /pp-first)
    variants = [Variant(benchmark.label(c, options),
                        lambda c=c, o=options: [KernelSpec(builder(*shape, *c), o or None)])
                for c, options in configs]
    if causal and not quick:  # the mask on the diagonal's key blocks only, on each config
        variants += [Variant(benchmark.label(c, options) + "/diag-mask",
                             lambda c=c, o=options: [KernelSpec(builder(*shape, *c, diagonal_mask=True), o or None)])
                     for c, options in configs]
    if not causal and not quick:  # one block per SM walking the tiles (flash_attention.py's PERSISTENT)
        from tilelang.testing.kernels import flash_attention_persistent

        def persistent(c: tuple, o: dict) -> list[KernelSpec]:
            import torch

            # a dry run lowers without a GPU: the H100/H200's 132 SMs stand in
            sm_num = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132
            return [KernelSpec(flash_attention_persistent(*shape, *c, sm_num=sm_num), o or None)]

        variants += [Variant("persistent/" + benchmark.label(c, options), lambda c=c, o=options: persistent(c, o))
                     for c, options in benchmark.PERSISTENT]
    return variants


def _inputs(batch: int, heads: int, seq_len: int, dim: int, device: str) -> dict:
    import torch

    q, k, v = (torch.randn(batch, seq_len, heads, dim, device=device, dtype=torch.float16) for _ in range(3))
    return {"q": q, "k": k, "v": v, "o": torch.empty_like(q)}


def _launch(kernels: list, t: dict):
    kernels[0](t["q"], t["k"], t["v"], t["o"])
    return t["o"]


def _reference(t: dict, causal: bool):
    import torch.nn.functional as F

    # SDPA wants [batch, heads, seq, dim]: views of the same tensors, as benchmarks/flash_attention.py
    q, k, v = (x.transpose(1, 2) for x in (t["q"], t["k"], t["v"]))
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)


def make_case(shape: tuple, causal: bool, variants: list[Variant], device: str = "cuda") -> Case:
    batch, heads, seq_len, dim = shape
    flop = 4.0 * batch * heads * seq_len * seq_len * dim * (0.5 if causal else 1.0)
    return Case("fmha", f"d{dim}" + (" causal" if causal else ""),
                {"batch": batch, "heads": heads, "seq": seq_len, "dim": dim, "causal": causal}, "TFLOP/s", flop,
                variants, lambda: _inputs(*shape, device), _launch, lambda t: _reference(t, causal),
                atol=2e-3, rtol=1e-2)  # outputs are averages of ~seq values: mostly well below 1


def cases(quick: bool) -> list[Case]:
    # quick: head dim 64 plain, head dim 128 causal
    pairs = [(s, c) for s in SHAPES for c in ((s[3] == 128,) if quick else (False, True))]
    return [make_case(shape, causal, _variants(shape, causal, quick)) for shape, causal in pairs]


def small_cases() -> list[Case]:
    cases = [make_case(SMALL_SHAPE, causal, _variants(SMALL_SHAPE, causal, quick=True)[:1], device="cpu")
             for causal in (False, True)]
    # the diagonal-only mask: with 64-row blocks, the second query block sees a key block
    # below the diagonal (no mask) and one across it
    diagonal = Variant("bM64/bN64/t128/s2/diag-mask",
                       lambda: [KernelSpec(causal_attention(*SMALL_SHAPE, 64, 64, 128, 2, diagonal_mask=True))])
    return [*cases, make_case(SMALL_SHAPE, True, [diagonal], device="cpu")]

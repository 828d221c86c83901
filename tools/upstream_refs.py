"""Torch references and seeded inputs for the cpu and emulate modes of
tools/upstream_examples.py: what each upstream example's kernel should compute, written from
the kernel's definition (small sizes, float64 where the kernel accumulates in float32)."""

from __future__ import annotations

from typing import Any


def randn(gen: Any, *shape: int, dtype: str = "float32") -> Any:
    import torch

    return torch.randn(*shape, generator=gen).to(getattr(torch, dtype))


def mm_ref(a: Any, b: Any, *rest: Any) -> Any:
    return (a.float() @ b.float()).to(a.dtype)


def rms_ref(x: Any) -> Any:
    import torch

    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-12)


def attn_bhsd_ref(q: Any, k: Any, v: Any, causal: bool = False) -> Any:
    import torch

    s = torch.einsum("bhqd,bhkd->bhqk", q.float(), k.float()) / q.shape[-1] ** 0.5
    if causal:
        lq, lk = s.shape[-2:]
        s = s.masked_fill(torch.ones(lq, lk).tril(lk - lq) == 0, float("-inf"))
    return torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), v.float()).to(q.dtype)


def attn_bshd_ref(q: Any, k: Any, v: Any) -> Any:
    t = lambda x: x.transpose(1, 2)
    return t(attn_bhsd_ref(t(q), t(k), t(v)))


def chunk_o_inputs(gen: Any, b: int = 1, s: int = 128, h: int = 2, dk: int = 64, dv: int = 64,
                    chunk: int = 64) -> list:
    """gdn's chunk_fwd_o arguments: Q, K, V, the chunks' hidden states, and log gates G that
    fall within each chunk (a cumulative sum of negatives, as the gated delta rule makes them)."""
    import torch

    q, k, v = (randn(gen, b, s, h, d, dtype="float16") for d in (dk, dk, dv))
    hidden = (torch.randn(b, s // chunk, h, dk, dv, generator=gen) * dk ** -0.5).half()
    g = -(torch.rand(b, s // chunk, chunk, h, generator=gen) * 0.1).cumsum(2).reshape(b, s, h)
    return [q, k, v, hidden, g]


def chunk_o_ref(q: Any, k: Any, v: Any, hidden: Any, g: Any, chunk: int = 64) -> Any:
    """O of each chunk: (Q H) exp(g) + (causal, gate-decayed Q K^T, rounded to the input
    type as the kernel's shared tile holds it) V, times 1 / sqrt(dk)."""
    import torch

    b, s, h, dk = q.shape
    out = torch.empty(b, s, h, v.shape[-1])
    mask = torch.ones(chunk, chunk).tril().bool()
    for c in range(s // chunk):
        rows = slice(c * chunk, (c + 1) * chunk)
        qc, kc, vc, gc = (x[:, rows].float().transpose(1, 2) for x in (q, k, v, g.unsqueeze(-1)))
        gc = gc[..., 0]  # b, h, chunk
        o = (qc @ hidden[:, c].float()) * gc.exp().unsqueeze(-1)
        diff = gc.unsqueeze(-1) - gc.unsqueeze(-2)
        a = torch.where((diff <= 0) & mask, (qc @ kc.transpose(-1, -2)) * diff.exp(), 0.0)
        out[:, rows] = ((o + a.half().float() @ vc) * dk ** -0.5).transpose(1, 2)
    return out.half()


def delta_h_inputs(gen: Any, b: int = 1, s: int = 128, h: int = 2, dk: int = 64, dv: int = 64,
                    chunk: int = 64) -> list:
    """gdn's chunk_gated_delta_rule_fwd_h arguments: K, W, U, log gates G falling within each
    chunk, and the initial state (K and W scaled so the state stays of order one)."""
    import torch

    k = (torch.randn(b, s, h, dk, generator=gen) * 0.1).half()
    w = (torch.randn(b, s, h, dk, generator=gen) * 0.1).half()
    u = randn(gen, b, s, h, dv, dtype="float16")
    g = -(torch.rand(b, s // chunk, chunk, h, generator=gen) * 0.1).cumsum(2).reshape(b, s, h)
    return [k, w, u, g, randn(gen, b, h, dk, dv, dtype="float16")]


def delta_h_ref(k: Any, w: Any, u: Any, g: Any, state: Any, chunk: int = 64) -> list:
    """The chunks' states h (each before its chunk, as the kernel's fp16 tile holds it), the
    final state, and the new values V_new = U - W h, by the recurrence the kernel runs:
    V_new gated by exp(g_last - g), h = h exp(g_last) + K^T V_new (V_new rounded to fp16)."""
    import torch

    b, s, hh, _ = k.shape
    st = state.float()  # b, h, dk, dv
    hs, v_new = [], torch.empty(b, s, hh, u.shape[-1])
    for c in range(s // chunk):
        rows = slice(c * chunk, (c + 1) * chunk)
        held = st.half().float()  # the shared tile the GEMMs read
        hs.append(held)
        kc, wc, uc = (x[:, rows].float().transpose(1, 2) for x in (k, w, u))  # b, h, chunk, d
        gc = g[:, rows].transpose(1, 2)  # b, h, chunk
        vn = uc - wc @ held
        v_new[:, rows] = vn.transpose(1, 2)
        last = gc[..., -1:]
        vn = torch.where((last - gc <= 0).unsqueeze(-1), vn * (last - gc).exp().unsqueeze(-1), 0.0)
        st = st * last.exp().unsqueeze(-1) + kc.transpose(-1, -2) @ vn.half().float()
    return [torch.stack(hs, 1).half(), st, v_new.half()]


def gqa_bwd_inputs(gen: Any, b: int = 1, n: int = 128, h: int = 2, hkv: int = 1, dqk: int = 192, dv: int = 128) -> list:
    """example_gqa_bwd's backward kernel's arguments: Q, K, V, dO, and lse and Delta as its
    forward and preprocess kernels make them; dQ, dK, dV zeroed (it adds into them)."""
    import torch

    q, k = randn(gen, b, n, h, dqk, dtype="float16"), randn(gen, b, n, hkv, dqk, dtype="float16")
    v, do = randn(gen, b, n, hkv, dv, dtype="float16"), randn(gen, b, n, h, dv, dtype="float16")
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double().repeat_interleave(h // hkv, 2)) / dqk ** 0.5
    o = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v.double().repeat_interleave(h // hkv, 2))
    lse = (torch.logsumexp(s, -1) * 1.44269504).float()
    delta = (o * do.double()).sum(-1).transpose(1, 2).float().contiguous()
    return [q, k, v, do, lse, delta, torch.zeros(b, n, h, dqk), torch.zeros(b, n, hkv, dqk), torch.zeros(b, n, hkv, dv)]


def gqa_bwd_ref(q: Any, k: Any, v: Any, do: Any, lse: Any, delta: Any, *_: Any) -> list:
    """dQ (in the example's make_dq_layout order), dK and dV of the backward kernel."""
    import torch

    b, n, h, dqk = q.shape
    groups = h // k.shape[2]
    ke, ve = (x.double().repeat_interleave(groups, 2) for x in (k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", q.double(), ke) / dqk ** 0.5
    p = torch.exp(s - lse.double()[..., None] / 1.44269504)
    dp = torch.einsum("bqhd,bkhd->bhqk", do.double(), ve)
    ds = p * (dp - delta.double()[..., None]) / dqk ** 0.5
    dq = torch.einsum("bhqk,bkhd->bqhd", ds, ke)
    dk = torch.einsum("bhqk,bqhd->bkhd", ds, q.double()).reshape(b, n, -1, groups, dqk).sum(3)
    dv = torch.einsum("bhqk,bqhd->bkhd", p, do.double()).reshape(b, n, -1, groups, v.shape[-1]).sum(3)
    laid = torch.zeros(b, n // 8, h, dqk // 8, 2, 32, dtype=torch.float64)  # dQ's annotated layout
    rows, cols = torch.meshgrid(torch.arange(n), torch.arange(dqk), indexing="ij")
    laid[:, rows // 8, :, cols // 8, cols % 2, 4 * (rows % 8) + (cols % 8) // 2] = dq.permute(1, 3, 0, 2)
    return [laid.reshape(b, n, h, dqk), dk, dv]


def gqa_decode_ref(q: Any, k: Any, v: Any, mask: Any) -> Any:
    """Decoding attention: each query head reads its KV head's keys that ``mask`` keeps."""
    import torch

    per_kv = q.shape[1] // k.shape[2]
    ke, ve = (x.double().repeat_interleave(per_kv, 2).transpose(1, 2) for x in (k, v))  # (b, h, s, d)
    scores = torch.einsum("bhd,bhsd->bhs", q.double(), ke) / q.shape[-1] ** 0.5
    scores = scores.masked_fill(mask.repeat_interleave(per_kv, 2).transpose(1, 2) == 0, float("-inf"))
    return torch.einsum("bhs,bhsd->bhd", scores.softmax(-1), ve).to(q.dtype)


def sparse_gemm_inputs(gen: Any, m: int = 128, n: int = 128, k: int = 128) -> list:
    """gemm_sp's arguments: A 2:4 sparse (two of each four along K kept), compressed by the
    testing kit's compressor (written from the format, not upstream's), with int16 metadata;
    B dense. The dense A travels as a fourth list item for the reference only."""
    import numpy as np
    import torch
    from tilelang.testing.sparse import compress, semi_sparse

    rng = np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=gen)))
    dense = semi_sparse(rng, m, k, "float16").astype(np.float16)
    a_sparse, e = compress(dense.astype(np.float32), "float16", "int16")
    return [torch.from_numpy(a_sparse.astype(np.float16)), torch.from_numpy(e), randn(gen, k, n, dtype="float16")]


def sparse_gemm_ref(a_sparse: Any, e: Any, b: Any) -> Any:
    """C = A @ B in float32, A rebuilt from (A_sparse, E): each 4-bit chunk of E (lowest
    first) gives the positions of its group's two kept values."""
    import torch

    m, half = a_sparse.shape
    k = 2 * half
    words = e.to(torch.int64) & 0xFFFF
    dense = torch.zeros(m, k, dtype=torch.float64)
    for g in range(k // 4):
        chunk = (words[:, g * 4 // 16] >> (4 * (g % 4))) & 0xF
        for slot in range(2):
            pos = (chunk >> (2 * slot)) & 3
            dense[torch.arange(m), g * 4 + pos] += a_sparse[:, 2 * g + slot].double()
    return (dense @ b.double()).float()


# ---- gemm


def mm64(a: Any, b: Any) -> Any:
    """a @ b in float64 (the kernels accumulate in float32: float64 is the exact sum)."""
    return a.double() @ b.double()


def gemm_nt_ref(a: Any, b: Any, *rest: Any) -> Any:
    """C = A B^T (B stored N x K), rounded once to A's dtype as the kernels store it."""
    return mm64(a, b.T).to(a.dtype)


def gemm_ref(a: Any, b: Any, *rest: Any) -> Any:
    """C = A B (B stored K x N), rounded once to A's dtype."""
    return mm64(a, b).to(a.dtype)


def splitk_atomic_inputs(gen: Any, m: int = 256, n: int = 256, k: int = 256) -> list:
    """A, B (fp16) and a C that is not zero: the split-K kernel atomically adds every K slice
    of A B into C, so C's first values must survive."""
    return [randn(gen, m, k, dtype="float16"), randn(gen, k, n, dtype="float16"), randn(gen, m, n)]


def splitk_atomic_ref(a: Any, b: Any, c: Any) -> Any:
    """C + A B, in float64 (C is float32, the kernel adds float32 partial sums into it)."""
    return c.double() + mm64(a, b)


def streamk_inputs(gen: Any) -> list:
    """example_tilelang_gemm_streamk's operands at the module's fixed sizes (m, n, k = 256,
    1024, 512: its kernel reads the stream-K split from module globals, so the sizes cannot
    shrink): A (m, k), B (n, k) uniform in [-1, 1) as the module makes them, C zeroed
    (partial tiles are atomically added into it)."""
    import torch

    a = torch.rand(256, 512, generator=gen).half() * 2 - 1
    b = torch.rand(1024, 512, generator=gen).half() * 2 - 1
    return [a, b, torch.zeros(256, 1024)]


def streamk_ref(a: Any, b: Any, c: Any) -> Any:
    """C = A B^T in float64 (C is float32)."""
    return mm64(a, b.T)


def blocksparse_inputs(gen: Any, m: int = 256, n: int = 256, k: int = 128, bm: int = 128, bn: int = 128,
                       bk: int = 32) -> list:
    """A, B and a block mask (M/bm, N/bn, K/bk) with about half the K blocks kept, the first
    output tile's all dropped (a tile that only clears and stores)."""
    import torch

    mask = torch.rand(m // bm, n // bn, k // bk, generator=gen) > 0.5
    mask[0, 0] = False
    mask[-1, -1, 0] = True
    return [randn(gen, m, k, dtype="float16"), randn(gen, k, n, dtype="float16"), mask]


def blocksparse_ref(a: Any, b: Any, mask: Any) -> Any:
    """Each (bm, bn) tile of C: the sum over the K blocks its mask keeps of A's block times
    B's block, in float64, rounded once to fp16. The block sizes follow from the mask's shape."""
    import torch

    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = m // mask.shape[0], n // mask.shape[1], k // mask.shape[2]
    keep = mask.repeat_interleave(bk, 2)  # (M/bm, N/bn, K)
    out = torch.zeros(m, n, dtype=torch.float64)
    for i in range(mask.shape[0]):
        for j in range(mask.shape[1]):
            cols = keep[i, j]
            out[i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] = (
                a[i * bm:(i + 1) * bm, cols].double() @ b[cols, j * bn:(j + 1) * bn].double())
    return out.half()


def fp8_gemm_inputs(gen: Any, dtype: str, m: int = 128, n: int = 256, k: int = 192) -> list:
    """A (m, k) and B (n, k): standard normals rounded to the fp8 dtype."""
    import torch

    return [torch.randn(m, k, generator=gen).to(getattr(torch, dtype)),
            torch.randn(n, k, generator=gen).to(getattr(torch, dtype))]


def fp8_gemm_ref(a: Any, b: Any) -> Any:
    """C = A B^T (the fp8 values exactly, summed in float64), rounded once to the fp8 dtype,
    which the kernel's C is."""
    return mm64(a, b.T).to(a.dtype)


def grouped_gemm_inputs(gen: Any, sizes: tuple = (63, 77, 20), k: int = 64, n: int = 96, block_m: int = 64) -> list:
    """example_grouped_gemm_fwd's arguments: the groups' rows of A stacked (sum(sizes), K),
    B (groups, K, N), and the int32 sizes, offsets and block_M-padded offsets, as its
    construct_inputs makes them (sizes not multiples of block_M: tiles that straddle groups)."""
    import torch

    offsets, padded = [0], [0]
    for size in sizes[:-1]:
        offsets.append(offsets[-1] + size)
        padded.append(padded[-1] + -(-size // block_m) * block_m)
    as_int = lambda v: torch.tensor(v, dtype=torch.int32)
    return [randn(gen, sum(sizes), k, dtype="float16"), randn(gen, len(sizes), k, n, dtype="float16"),
            as_int(list(sizes)), as_int(offsets), as_int(padded)]


def grouped_gemm_ref(a: Any, b: Any, sizes: Any, *_: Any) -> Any:
    """Each group's rows of A times its B, in float64, rounded once to fp16."""
    import torch

    rows = torch.repeat_interleave(torch.arange(len(sizes)), sizes.long())
    return torch.einsum("mk,mkn->mn", a.double(), b.double()[rows]).half()


def conv_ref(stride: int = 1, padding: int = 1, dilation: int = 1) -> Any:
    """The NHWC x (KH, KW, C, F) convolution, in float64, rounded once to fp16."""
    def ref(data: Any, kernel: Any) -> Any:
        import torch

        out = torch.nn.functional.conv2d(data.double().permute(0, 3, 1, 2), kernel.double().permute(3, 2, 0, 1),
                                         stride=stride, padding=padding, dilation=dilation)
        return out.permute(0, 2, 3, 1).half()
    return ref


def int4_gemv_inputs(gen: Any, m: int = 2, n: int = 64, k: int = 512) -> list:
    """dequantize_gemv's A (m, k) fp16, B (n, k / 2) int8 (two int4 a byte) and C.
    A holds -1, 0, 1 so that the kernel's fp16 accumulation is exact (partial sums are
    small integers): the check is then independent of the summation order."""
    import torch

    a = torch.randint(-1, 2, (m, k), generator=gen).half()
    b = torch.randint(-128, 128, (n, k // 2), generator=gen).to(torch.int8)
    return [a, b, torch.zeros(m, n, dtype=torch.float16)]


def int4_gemv_ref(a: Any, b: Any, c: Any) -> Any:
    """C = A B^T with B's element 2j+p the signed 4-bit field p (low nibble first) of byte j,
    as the example's _tir_packed_int_to_int_convert("int", 8) reads it (sign-extended)."""
    import torch

    nib = torch.stack((b.int() & 0xF, (b.int() >> 4) & 0xF), -1).reshape(b.shape[0], -1)
    nib = torch.where(nib >= 8, nib - 16, nib)
    return (a.double() @ nib.double().T).half()


def fp4_gemm_inputs(gen: Any, m: int = 128, n: int = 256, k: int = 256) -> list:
    """example_dequant_gemm_fp4_hopper's A (m, k) fp16 and B (n, k / 2) uint8 (two fp4 a byte)."""
    import torch

    return [randn(gen, m, k, dtype="float16"), torch.randint(0, 256, (n, k // 2), generator=gen).to(torch.uint8)]


def fp4_gemm_ref(a: Any, b: Any) -> Any:
    """Ct = B A^T (N x M), B's element 2j+p the s1e2m1 field p (low nibble first) of byte j
    read as the example's _tir_u8_to_f4_to_f16 does: (-1)^s 2^(e-1) (1 + m/2) -- e = 0 is
    not zero there (the fp16 exponent is e + 14 always); float64 sums, fp16 once."""
    import torch

    nib = torch.stack((b.int() & 0xF, b.int() >> 4), -1).reshape(b.shape[0], -1)
    sign, exp, man = nib >> 3, (nib >> 1) & 3, nib & 1
    value = (1 - 2 * sign).double() * torch.pow(2.0, exp.double() - 1) * (1 + man.double() / 2)
    return (value @ a.double().T).half()


def gemv_ref(a: Any, b: Any) -> Any:
    """example_gemv's C = B A (A the vector (K,), B (N, K)), float64, fp16 once."""
    return (b.double() @ a.double()).half()


def gemv_reducer_ref(a: Any, x: Any) -> Any:
    """gemv_alloc_reducer's o = a x: each product a[i, j] x[j] is an fp16 multiply (the kernel
    multiplies its fp16 fragments) then summed in float (float64 here), fp16 once."""
    return (a * x).double().sum(-1).half()


# ---- norm-cast-misc


def layernorm_fwd_inputs(gen: Any, n: int = 8, d: int = 1024) -> list:
    """norm/layernorm's forward arguments: X, gamma, beta in bfloat16 (gamma, beta random so
    that both enter the output)."""
    return [randn(gen, n, d, dtype="bfloat16"), randn(gen, d, dtype="bfloat16"), randn(gen, d, dtype="bfloat16")]


def layernorm_fwd_ref(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> list:
    """Y (rounded to bfloat16 as the kernel stores it), Mean and Rstd (float32) of the kernel's
    one-pass formula: mean = E[x], rstd = 1 / sqrt(E[x^2] - mean^2 + eps), in float64."""
    import torch

    x64 = x.double()
    mean = x64.mean(-1)
    rstd = torch.rsqrt((x64 * x64).mean(-1) - mean * mean + eps)
    y = (x64 - mean[:, None]) * rstd[:, None] * gamma.double() + beta.double()
    return [y.to(torch.bfloat16), mean.float(), rstd.float()]


def layernorm_bwd_inputs(gen: Any, n: int = 64, d: int = 512) -> list:
    """norm/layernorm's backward arguments: dY, X, gamma (bfloat16), X's Mean and Rstd (float32,
    as the forward makes them), DGamma and DBeta zeroed (each block atomically adds into them)."""
    import torch

    dy, x, gamma = randn(gen, n, d, dtype="bfloat16"), randn(gen, n, d, dtype="bfloat16"), randn(gen, d, dtype="bfloat16")
    x64 = x.double()
    mean = x64.mean(-1)
    rstd = torch.rsqrt(x64.var(-1, unbiased=False) + 1e-5)
    return [dy, x, gamma, mean.float(), rstd.float(), torch.zeros(d), torch.zeros(d)]


def layernorm_bwd_ref(dy: Any, x: Any, gamma: Any, mean: Any, rstd: Any, *_: Any) -> list:
    """DX (rounded to bfloat16), DGamma = sum over rows of dY x_hat, DBeta = sum of dY, in float64
    from the given Mean and Rstd: x_hat = (x - mean) rstd, dx_hat = dY gamma,
    DX = rstd (dx_hat - mean(dx_hat) - x_hat mean(dx_hat x_hat))."""
    import torch

    r = rstd.double()[:, None]
    x_hat = (x.double() - mean.double()[:, None]) * r
    dx_hat = dy.double() * gamma.double()
    dx = r * (dx_hat - dx_hat.mean(-1, keepdim=True) - x_hat * (dx_hat * x_hat).mean(-1, keepdim=True))
    return [dx.to(torch.bfloat16), (dy.double() * x_hat).sum(0), dy.double().sum(0)]


def topk_inputs(gen: Any, m: int = 128, n: int = 128) -> list:
    """example_topk's logits: uniform in [0, 1) as its main() makes them (no ties)."""
    import torch

    return [torch.rand(m, n, generator=gen)]


def topk_ref(logits: Any, k: int = 6) -> list:
    """The k largest logits of each row in descending order, and their column indices (int32)."""
    import torch

    values, indices = logits.topk(k, dim=1)
    return [values, indices.to(torch.int32)]


def per_token_cast_ref(x: Any, group: int = 128) -> list:
    """Per row and 128-column group: s = max(amax, 1e-4) / 448 and clamp(x / s, +-448) rounded
    to float8_e4m3fn, in float32 as the kernel divides (so a value on an fp8 rounding boundary
    rounds as the kernel's does); returns (X_fp8, s)."""
    import torch

    m, n = x.shape
    xv = x.float().reshape(m, n // group, group)
    s = xv.abs().amax(-1).clamp_min(1e-4) / 448.0
    q = (xv / s[..., None]).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return [q.reshape(m, n), s]


def group_cast_inputs(gen: Any, sizes: tuple = (22, 40), n: int = 256) -> list:
    """example_group_per_split_token_cast_to_fp8's arguments: X (bfloat16), the groups' row
    counts (int32) -- the first not a multiple of blk_m, so one block is partly masked."""
    import torch

    return [randn(gen, sum(sizes), n, dtype="bfloat16"), torch.tensor(sizes, dtype=torch.int32)]


def group_cast_ref(x: Any, sizes: Any, m_max: int = 40) -> list:
    """Each group's rows cast as per_token_cast_ref does, padded to M_max rows; the rows past a
    group's size are 0 in both outputs (the kernel's if_then_else)."""
    import torch

    n = x.shape[1]
    q = torch.zeros(len(sizes), m_max, n, dtype=torch.float8_e4m3fn)
    s = torch.zeros(len(sizes), m_max, n // 128)
    offset = 0
    for g, size in enumerate(sizes.tolist()):
        q[g, :size], s[g, :size] = per_token_cast_ref(x[offset:offset + size])
        offset += size
    return [q, s]


def chunk_cumsum_ref(g: Any, chunk: int = 64, reverse: bool = False) -> Any:
    """gdn's chunk-local cumsum of G (b, s, h) along s within each chunk (from the chunk's end
    when reversed), in float64."""
    b, s, h = g.shape
    gc = g.double().reshape(b, s // chunk, chunk, h)
    out = gc.flip(2).cumsum(2).flip(2) if reverse else gc.cumsum(2)
    return out.reshape(b, s, h).float()


def kkt_inputs(gen: Any, b: int = 1, s: int = 128, h: int = 2, dk: int = 128) -> list:
    """gdn's chunk_scaled_dot_kkt arguments as its prepare_input makes them: K, Beta
    (bfloat16), G (float32, random: the gate mask keeps some pairs and drops others)."""
    return [randn(gen, b, s, h, dk, dtype="bfloat16"), randn(gen, b, s, h, dtype="bfloat16"), randn(gen, b, s, h)]


def kkt_ref(k: Any, beta: Any, g: Any, chunk: int = 64) -> Any:
    """A[i, j] of each chunk = (beta_i k_i, rounded to bfloat16 as the kernel's fragment holds
    it) . k_j, times exp(g_i - g_j) where i > j and g_i <= g_j, else 0; rounded to bfloat16."""
    import torch

    b, s, h, dk = k.shape
    kc = k.double().reshape(b, s // chunk, chunk, h, dk).transpose(2, 3)  # b, n, h, c, dk
    bk = (k.double() * beta.double()[..., None]).to(torch.bfloat16).double()
    bk = bk.reshape(b, s // chunk, chunk, h, dk).transpose(2, 3)
    gc = g.double().reshape(b, s // chunk, chunk, h).transpose(2, 3)  # b, n, h, c
    diff = gc[..., :, None] - gc[..., None, :]
    lower = torch.ones(chunk, chunk).tril(-1).bool()
    a = torch.where((diff <= 0) & lower, (bk @ kc.transpose(-1, -2)) * diff.exp(), 0.0)
    return a.transpose(2, 3).reshape(b, s, h, chunk).to(torch.bfloat16)


def wy_fast_inputs(gen: Any, b: int = 1, s: int = 128, h: int = 2, dk: int = 128, dv: int = 64,
                   chunk: int = 64) -> list:
    """gdn's recompute_w_u arguments as its prepare_input makes them: K, V, Beta (bfloat16),
    G (float32), A (bfloat16, each row the chunk's 64 coefficients)."""
    return [randn(gen, b, s, h, dk, dtype="bfloat16"), randn(gen, b, s, h, dv, dtype="bfloat16"),
            randn(gen, b, s, h, dtype="bfloat16"), randn(gen, b, s, h), randn(gen, b, s, h, chunk, dtype="bfloat16")]


def wy_fast_ref(k: Any, v: Any, beta: Any, g: Any, a: Any, chunk: int = 64) -> list:
    """W = A (K beta exp(g)) and U = A (V beta) per chunk, with the kernel's shared tiles'
    roundings to bfloat16: V beta and K beta (bfloat16 products, exact then rounded), then
    (K beta) exp(g) rounded again; exp(g) in float32 as its shared tile holds it; outputs
    rounded to bfloat16."""
    import torch

    bf = lambda t: t.to(torch.bfloat16).double()  # noqa: E731
    b, s, h, _ = k.shape
    bt = beta.double()[..., None]
    u_in = bf(v.double() * bt)
    w_in = bf(bf(k.double() * bt) * g.exp().double()[..., None])

    def per_chunk(x: Any) -> Any:  # b, n, h, c, d
        return x.reshape(b, s // chunk, chunk, h, -1).transpose(2, 3)

    ac = per_chunk(a.double())
    w, u = ac @ per_chunk(w_in), ac @ per_chunk(u_in)
    back = lambda t: t.transpose(2, 3).reshape(b, s, h, -1).to(torch.bfloat16)  # noqa: E731
    return [back(w), back(u)]


def retention_ref(q: Any, k: Any, v: Any, bk: int = 64, chunk: int = 64) -> Any:
    """chunk_retention_fwd's O (nk, b, s, h, dv): per 64-wide slice of DK (one kernel block
    each) and head i_h, the chunked retention with decay d = 1 - 2^(-5 - i_h): q = Q / sqrt(DK)
    (fp16), S = causal (q k^T) d^(row - col) (fp16), O = (q h) d^(row + 1) + S V (fp16);
    then V scaled by d^(chunk - 1 - row) (fp16) and h = d^chunk h + k^T V; h enters the
    GEMM as the fp16 copy the kernel makes. float64 otherwise."""
    import math

    import torch

    b, s, hh, dk = q.shape
    dv = v.shape[-1]
    hf = lambda t: t.half().double()  # noqa: E731
    out = torch.empty(dk // bk, b, s, hh, dv, dtype=torch.float64)
    rows = torch.arange(chunk, dtype=torch.float64)
    for head in range(hh):
        ld = float(torch.tensor(math.log2(1 - 2.0 ** (-5.0 - head)), dtype=torch.float32))
        decay = torch.where(rows[:, None] >= rows[None, :], torch.exp2((rows[:, None] - rows[None, :]) * ld), 0.0)
        for ik in range(dk // bk):
            cols = slice(ik * bk, (ik + 1) * bk)
            state = torch.zeros(b, bk, dv, dtype=torch.float64)
            for c in range(s // chunk):
                t = slice(c * chunk, (c + 1) * chunk)
                qc = hf(q[:, t, head, cols].double() * dk ** -0.5)
                kc, vc = k[:, t, head, cols].double(), v[:, t, head].double()
                sc = hf((qc @ kc.transpose(-1, -2)) * decay)
                o = (qc @ hf(state)) * torch.exp2((rows + 1) * ld)[:, None] + sc @ vc
                out[ik, :, t, head] = o
                vs = hf(vc * torch.exp2((chunk - rows - 1) * ld)[:, None])
                state = 2.0 ** (chunk * ld) * state + kc.transpose(-1, -2) @ vs
    return out.half()


def topk_selector_inputs(gen: Any, batch: int = 4, seq_len: int = 2048, topk: int = 32) -> list:
    """topk_selector's arguments, built so that its output order is defined: the kernel places
    the elements of each radix bin by atomic counters, so a row's top-k is in descending order
    only where no two of them share a bin. Per row: topk - 2 values, each alone in its 8-bit
    fp16 bin (above 0.625), and three candidates 0.5, 0.5 + 2^-6, 0.5 + 2^-5 sharing the
    threshold bin (they share float32's top byte too, so the tail passes run all four rounds,
    one element per bin from the second); the rest random below 0.5. starts / ends vary by row
    (rows 1 and 3 a window, rows 0 and 2 the whole row); index zeroed (written in place)."""
    import torch

    x = torch.rand(batch, seq_len, generator=gen) * -2.0 + 0.45  # in (-1.55, 0.45]
    starts = torch.tensor([0, 100, 0, 700][:batch] + [0] * max(0, batch - 4), dtype=torch.int32)
    ends = torch.tensor([seq_len, 1900, seq_len, 1500][:batch] + [seq_len] * max(0, batch - 4), dtype=torch.int32)
    bins = [2.0 ** e * (1 + q / 4) for e in range(0, 15) for q in range(4)]  # one per fp16 top-byte bin
    for r in range(batch):
        lo, hi = int(starts[r]), int(ends[r])
        pos = lo + torch.randperm(hi - lo, generator=gen)[:topk + 1]
        chosen = torch.randperm(len(bins), generator=gen)[:topk - 2].tolist()
        jitter = torch.rand(topk - 2, generator=gen) * 0.1  # stays inside the bin: 1.75 * 1.1 < 2
        vals = [bins[i] * (1 + float(j)) for i, j in zip(chosen, jitter)] + [0.5, 0.5 + 2 ** -6, 0.5 + 2 ** -5]
        x[r, pos] = torch.tensor(vals)
        if lo > 0:  # a larger value outside the window: must not be chosen
            x[r, lo - 1] = 60000.0
    return [x, torch.zeros(batch, topk, dtype=torch.int32), starts, ends]


def topk_selector_ref(x: Any, index: Any, starts: Any, ends: Any) -> Any:
    """The indices of each row's topk largest values within [start, end), in descending order
    of value (the order topk_selector_inputs makes the kernel's)."""
    import torch

    out = torch.empty_like(index)
    for r in range(x.shape[0]):
        lo, hi = int(starts[r]), int(ends[r])
        out[r] = x[r, lo:hi].topk(index.shape[1]).indices.to(torch.int32) + lo
    return out


# ---- attention
# Shared by the attention family's cases: the kernels keep Q K^T, the softmax and the
# accumulators in float32 and store O in fp16; these references work in float64 and round
# only the outputs, so a 1e-2 tolerance (fp16 storage plus the kernels' fp16 P and dS tiles,
# which the references do not model unless they say so) is the budget.

_LOG2E = 1.44269504


def _bhsd(x: Any, bshd: bool) -> Any:
    return x.transpose(1, 2) if bshd else x


def attn_core(q: Any, k: Any, v: Any, causal: bool = False, scale: float | None = None) -> tuple:
    """Softmax attention in float64 over (b, h, s, d) tensors; K and V may have fewer heads
    (GQA: query head h reads KV head h // (h_q / h_kv)). Returns O and the log-sum-exp of the
    scaled scores in base 2 (what the kernels' lse holds: log2(sum 2^(s * scale * log2 e)))."""
    import torch

    groups = q.shape[1] // k.shape[1]
    ke, ve = (x.double().repeat_interleave(groups, 1) for x in (k, v))
    s = q.double() @ ke.transpose(-1, -2) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if causal:
        lq, lk = s.shape[-2:]
        s = s.masked_fill(torch.ones(lq, lk, dtype=torch.bool).tril(lk - lq).logical_not(), float("-inf"))
    return s.softmax(-1) @ ve, torch.logsumexp(s, -1) * _LOG2E


def gqa_fwd_bshd_ref(q: Any, k: Any, v: Any, causal: bool = False) -> Any:
    """example_gqa_fwd_bshd: O = softmax(Q K^T / sqrt(d)) V, (b, s, h, d), K/V heads shared by
    groups of query heads; fp16 out."""
    return _bhsd(attn_core(_bhsd(q, True), _bhsd(k, True), _bhsd(v, True), causal)[0], True).half()


def attn_fwd_lse_ref(q: Any, k: Any, v: Any, causal: bool = False, bshd: bool = True) -> list:
    """flashattn_fwd of the backward examples: O (fp16) and lse (float32, base 2, (b, h, s))."""
    o, lse = attn_core(_bhsd(q, bshd), _bhsd(k, bshd), _bhsd(v, bshd), causal)
    return [_bhsd(o, bshd).half(), lse.float()]


def attn_inputs(gen: Any, b: int, s: int, h: int, d: int, hkv: int | None = None, dv: int | None = None,
                bshd: bool = True) -> list:
    """Q, K, V in fp16, (b, s, h, d) or (b, h, s, d)."""
    hkv, dv = hkv or h, dv or d
    shape = (lambda hh, dd: (b, s, hh, dd)) if bshd else (lambda hh, dd: (b, hh, s, dd))
    return [randn(gen, *shape(h, d), dtype="float16"), randn(gen, *shape(hkv, d), dtype="float16"),
            randn(gen, *shape(hkv, dv), dtype="float16")]


def bwd_prep_ref(o: Any, do: Any, bshd: bool = True) -> Any:
    """flashattn_bwd_preprocess: Delta = rowsum(O * dO), float32, (b, h, s); each product is
    an fp16 multiply (O and dO are fp16 fragments), rounded to fp16, summed in float32."""
    return (_bhsd(o, bshd).double() * _bhsd(do, bshd).double()).half().double().sum(-1).float()


def dq_laid(dq: Any, bshd: bool = True) -> Any:
    """dQ (natural (b, s, h, d) or (b, h, s, d) order) as the examples' make_dq_layout stores
    it: element (l, d) of a head at [l // 8, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2]."""
    import torch

    dq = dq.double()
    if bshd:
        b, n, h, d = dq.shape
        laid = torch.zeros(b, n // 8, h, d // 8, 2, 32, dtype=torch.float64)
    else:
        b, h, n, d = dq.shape
        laid = torch.zeros(b, h, n // 8, d // 8, 2, 32, dtype=torch.float64)
    rows, cols = torch.meshgrid(torch.arange(n), torch.arange(d), indexing="ij")
    at = (rows // 8, cols // 8, cols % 2, 4 * (rows % 8) + (cols % 8) // 2)
    if bshd:  # advanced indices split by the head slice: the indexed dims (n, d) come first
        laid[:, at[0], :, at[1], at[2], at[3]] = dq.permute(1, 3, 0, 2)
    else:
        laid[:, :, at[0], at[1], at[2], at[3]] = dq
    return laid.reshape(dq.shape)


def bwd_post_inputs(gen: Any, b: int, s: int, h: int, d: int, bshd: bool = True) -> list:
    """flashattn_bwd_postprocess's dQ: float32 values stored in make_dq_layout's order."""
    shape = (b, s, h, d) if bshd else (b, h, s, d)
    return [dq_laid(randn(gen, *shape), bshd).float()]


def bwd_post_ref(dq_stored: Any, bshd: bool = True) -> Any:
    """dQ_out: the stored dQ read back through make_dq_layout, in natural order, fp16."""
    import torch

    probe = torch.arange(dq_stored.numel(), dtype=torch.float64).reshape(dq_stored.shape)
    natural_at = dq_laid(probe, bshd).reshape(-1).long()  # storage slot p holds natural element natural_at[p]
    out = torch.empty(dq_stored.numel(), dtype=torch.float64)
    out[natural_at] = dq_stored.double().reshape(-1)
    return out.reshape(dq_stored.shape).half()


def attn_bwd_inputs(gen: Any, b: int, s: int, h: int, d: int, hkv: int | None = None, dv: int | None = None,
                    bshd: bool = True, causal: bool = False, split_groups: bool = False) -> list:
    """The backward kernels' arguments: Q, K, V, dO, lse and Delta as the forward and
    preprocess kernels make them (float64, stored float32), dQ zeroed (atomically added), dK and
    dV zeroed in fp16 -- (groups, b, s, h_kv, d) for example_gqa_bwd's split kernel."""
    import torch

    hkv, dv = hkv or h, dv or d
    q, k, v = attn_inputs(gen, b, s, h, d, hkv, dv, bshd)
    do = randn(gen, *((b, s, h, dv) if bshd else (b, h, s, dv)), dtype="float16")
    o, lse = attn_core(_bhsd(q, bshd), _bhsd(k, bshd), _bhsd(v, bshd), causal)
    delta = (o * _bhsd(do, bshd).double()).sum(-1)
    if split_groups:
        dk, dvv = torch.zeros(h // hkv, b, s, hkv, d), torch.zeros(h // hkv, b, s, hkv, dv)
    else:
        dk, dvv = torch.zeros(k.shape), torch.zeros(v.shape)
    return [q, k, v, do, lse.float(), delta.float(), torch.zeros(q.shape), dk.half(), dvv.half()]


def attn_bwd_core(q: Any, k: Any, v: Any, do: Any, lse: Any, delta: Any, causal: bool = False) -> tuple:
    """dQ, and dK, dV per query head, (b, h, s, d), float64, from the given lse and Delta, as
    the backward kernels compute them: P = 2^(Q K^T scale log2 e - lse) rounded to fp16 (the
    kernels' qkT_cast, the dV GEMM's operand), dS = P (dO V^T - Delta) / sqrt(d) rounded to
    fp16 (dsT_cast, the dK and dQ GEMMs' operand; computed from the float32 P)."""
    import torch

    groups = q.shape[1] // k.shape[1]
    ke, ve = (x.double().repeat_interleave(groups, 1) for x in (k, v))
    scale = q.shape[-1] ** -0.5
    p = torch.exp2(q.double() @ ke.transpose(-1, -2) * scale * _LOG2E - lse.double()[..., None])
    if causal:
        lq, lk = p.shape[-2:]
        p = p * torch.ones(lq, lk, dtype=torch.float64).tril(lk - lq)
    dp = do.double() @ ve.transpose(-1, -2)
    ds = (p * (dp - delta.double()[..., None]) * scale).half().double()
    dv = p.half().double().transpose(-1, -2) @ do.double()
    return ds @ ke, ds.transpose(-1, -2) @ q.double(), dv


def mha_bwd_ref(q: Any, k: Any, v: Any, do: Any, lse: Any, delta: Any, *_: Any, causal: bool = False,
                bshd: bool = True) -> list:
    """example_mha_bwd_{bshd,bhsd}'s flashattn_bwd: dQ (float32, in make_dq_layout's order),
    dK and dV (fp16)."""
    dq, dk, dv = attn_bwd_core(*(_bhsd(x, bshd) for x in (q, k, v, do)), lse, delta, causal)
    return [dq_laid(_bhsd(dq, bshd), bshd), _bhsd(dk, bshd).half(), _bhsd(dv, bshd).half()]


def gqa_bwd_split_ref(q: Any, k: Any, v: Any, do: Any, lse: Any, delta: Any, *_: Any, causal: bool = False) -> list:
    """example_gqa_bwd's flashattn_bwd_split: dQ (make_dq_layout's order), and dK, dV of each
    query head in fp16 at [h % groups, b, s, h // groups] (summed over groups after the kernel)."""
    b, n, h, _ = q.shape
    groups = h // k.shape[2]
    dq, dk, dv = attn_bwd_core(*(_bhsd(x, True) for x in (q, k, v, do)), lse, delta, causal)

    def split(x: Any) -> Any:  # (b, h, s, d) -> (groups, b, s, h_kv, d)
        return x.transpose(1, 2).reshape(b, n, h // groups, groups, -1).permute(3, 0, 1, 2, 4).half()

    return [dq_laid(_bhsd(dq, True), True), split(dk), split(dv)]


class ScalarArg(int):
    """A scalar kernel argument among a case's inputs: an int that the harness can .clone()
    as it clones the tensors before the reference sees them."""

    def clone(self) -> ScalarArg:
        return self


def varlen_inputs(gen: Any, seqlens_q: tuple = (50, 128, 77), seqlens_k: tuple = (100, 64, 77), h: int = 2,
                  d: int = 64) -> list:
    """example_mha_fwd_varlen's arguments: packed Q (sum seqlens_q, h, d), K, V (sum seqlens_k,
    h, d), the int32 cumulative lengths, and max_seqlen_q (a scalar)."""
    import torch

    cu = lambda lens: torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    q = randn(gen, sum(seqlens_q), h, d, dtype="float16")
    k, v = (randn(gen, sum(seqlens_k), h, d, dtype="float16") for _ in range(2))
    return [q, k, v, cu(seqlens_q), cu(seqlens_k), ScalarArg(max(seqlens_q))]


def varlen_ref(q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: int, causal: bool = False) -> Any:
    """Per sequence: softmax(Q K^T / sqrt(d)) V; causal aligned on the right (query i sees key
    j <= i + len_k - len_q); a query that sees no key gets 0 (the kernel's rule)."""
    import torch

    out = torch.zeros(q.shape, dtype=torch.float64)
    for i in range(len(cu_q) - 1):
        qs, ks = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), int(cu_k[i + 1]))
        s = torch.einsum("qhd,khd->hqk", q[qs].double(), k[ks].double()) / q.shape[-1] ** 0.5
        lq, lk = s.shape[-2:]
        if causal:
            seen = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + (lk - lq)
            s = s.masked_fill(~seen, float("-inf"))
            p = torch.nan_to_num(s.softmax(-1))  # rows that see nothing: 0
        else:
            p = s.softmax(-1)
        out[qs] = torch.einsum("hqk,khd->qhd", p, v[ks].double())
    return out.half()


def split_kv_combine(s: Any, v: Any, bounds: list) -> Any:
    """Split-KV attention as the decoding examples run it: each split's softmax(s) V and its
    base-2 lse, both stored in fp16 (the examples' Output_partial and glse), combined in float32
    as their combine kernel does: sum_k O_k 2^(lse_k - log2 sum_k 2^lse_k). s: scaled scores
    (..., n) in float64 (-inf where masked); v: (..., n, d)."""
    import torch

    parts = []
    for a, b in bounds:
        sk = s[..., a:b]
        parts.append(((sk.softmax(-1) @ v[..., a:b, :]).half().double(),
                      (torch.logsumexp(sk, -1) * _LOG2E).half().double()))
    lse = torch.stack([p[1] for p in parts])
    top = lse.max(0).values
    total = torch.log2(torch.exp2(lse - top).sum(0)) + top
    return sum(o * torch.exp2(l - total)[..., None] for o, l in parts)


def mha_inference_ref(q: Any, k: Any, v: Any, num_split: int = 4) -> Any:
    """flash_decoding/example_mha_inference (non-causal): attention over (b, s, h, d) with the
    keys in num_split equal contiguous parts, combined through fp16 partials (split_kv_combine)."""
    t = lambda x: x.double().transpose(1, 2)
    s = t(q) @ t(k).transpose(-1, -2) / q.shape[-1] ** 0.5
    part = k.shape[1] // num_split
    return split_kv_combine(s, t(v), [(i * part, (i + 1) * part) for i in range(num_split)]).transpose(1, 2).half()


def mla_decode_inputs(gen: Any, b: int = 1, h: int = 64, n: int = 256, dv: int = 128, dpe: int = 64) -> list:
    """example_mla_decode's Q (b, h, dv), Q_pe (b, h, dpe), KV (b, n, 1, dv), K_pe (b, n, 1, dpe)."""
    return [randn(gen, b, h, dv, dtype="float16"), randn(gen, b, h, dpe, dtype="float16"),
            randn(gen, b, n, 1, dv, dtype="float16"), randn(gen, b, n, 1, dpe, dtype="float16")]


def mla_decode_ref(q: Any, q_pe: Any, kv: Any, k_pe: Any, num_split: int = 1) -> Any:
    """MLA decoding (one KV head): softmax((Q KV^T + Q_pe K_pe^T) / sqrt(dv + dpe)) KV; with
    num_split > 1 the keys split in equal parts combined through fp16 partials."""
    s = (q.double() @ kv[:, :, 0].double().transpose(-1, -2) + q_pe.double() @ k_pe[:, :, 0].double().transpose(-1, -2))
    s = s * (q.shape[-1] + q_pe.shape[-1]) ** -0.5
    vals = kv[:, :, 0].double()[:, None]  # (b, 1, n, dv)
    if num_split == 1:
        return (s.softmax(-1)[..., None, :] @ vals)[..., 0, :].half()
    part = kv.shape[1] // num_split
    out = split_kv_combine(s[..., None, :], vals, [(i * part, (i + 1) * part) for i in range(num_split)])
    return out[..., 0, :].half()


def mla_paged_inputs(gen: Any, b: int = 2, h: int = 64, pad: int = 256, dv: int = 128, dpe: int = 64,
                     block_size: int = 64, seqlens: tuple = (200, 137), num_split: int = 1) -> list:
    """example_mla_decode_paged's arguments: Q, Q_pe, the paged KV and K_pe (b * pad, 1, d), a
    block table that is a seeded permutation of the pages, cache_seqlens, and the glse and
    Output_partial scratch tensors (zeroed)."""
    import torch

    pages = torch.randperm(b * pad // block_size, generator=gen).to(torch.int32).reshape(b, pad // block_size)
    return [randn(gen, b, h, dv, dtype="float16"), randn(gen, b, h, dpe, dtype="float16"),
            randn(gen, b * pad, 1, dv, dtype="float16"), randn(gen, b * pad, 1, dpe, dtype="float16"),
            pages, torch.tensor(seqlens, dtype=torch.int32), torch.zeros(b, h, num_split).half(),
            torch.zeros(b, h, num_split, dv).half()]


def mla_paged_ref(q: Any, q_pe: Any, kv: Any, k_pe: Any, pages: Any, seqlens: Any, glse: Any, partial: Any,
                  block_n: int = 64) -> Any:
    """Paged MLA decoding: sequence i's token t lives at row pages[i, t // block_size] * block_size
    + t % block_size of KV / K_pe; scores of tokens >= cache_seqlens[i] masked; scale
    (dv + dpe)^-0.5. With splits (glse's last dim), the kernel's block split: ceil(len / block_N)
    blocks, split s takes blocks_per_split (+1 for the first len % splits) consecutive ones;
    fp16 partials combined (split_kv_combine)."""
    import torch

    b, h, dv = q.shape
    block_size = kv.shape[0] // pages.numel()
    num_split = glse.shape[-1]
    out = torch.empty(b, h, dv, dtype=torch.float64)
    for i in range(b):
        n = int(seqlens[i])
        tokens = torch.arange(n)
        rows = pages[i].long()[tokens // block_size] * block_size + tokens % block_size
        s = q[i].double() @ kv[rows, 0].double().T + q_pe[i].double() @ k_pe[rows, 0].double().T
        s = s * (dv + q_pe.shape[-1]) ** -0.5
        if num_split == 1:
            out[i] = s.softmax(-1) @ kv[rows, 0].double()
            continue
        blocks = -(-n // block_n)
        per, rem = divmod(blocks, num_split)
        bounds, at = [], 0
        for sid in range(num_split):
            cnt = per + (1 if sid < rem else 0)
            bounds.append((at * block_n, min((at + cnt) * block_n, n)))
            at += cnt
        out[i] = split_kv_combine(s, kv[rows, 0].double(), bounds)
    return out.half()


def sink_ref(q: Any, k: Any, v: Any, sinks: Any, window: int | None = None) -> Any:
    """attention_sink/example_mha_sink_fwd_bhsd: causal attention (queries at the end: query i
    is position i + s_kv - s_q), optionally within a sliding window (key j seen by position p
    iff j <= p < j + window), whose softmax denominator also counts exp(sink[h]) (not scaled
    by 1 / sqrt(d)). The kernel multiplies the sink by log2 e in the input type (its sinks
    fragment has that type, fp16 or bf16): the sink enters as 2^(t(sink * t(log2 e))). Output in
    the input type."""
    import torch

    lq, lk = q.shape[2], k.shape[2]
    s = q.double() @ k.double().transpose(-1, -2) * q.shape[-1] ** -0.5
    pos, key = torch.arange(lq)[:, None] + lk - lq, torch.arange(lk)[None, :]
    seen = key <= pos
    if window is not None:
        seen &= pos < key + window
    s = s.masked_fill(~seen, float("-inf"))
    sink2 = (sinks * torch.tensor(_LOG2E).to(sinks.dtype)).double()  # base 2
    sink = (sink2 / _LOG2E)[None, :, None, None].expand(*s.shape[:3], 1)
    p = torch.cat([s, sink], -1).softmax(-1)[..., :-1]
    return (p @ v.double()).to(q.dtype)


def block_mask_inputs(gen: Any, b: int, h: int, sq: int, skv: int, d: int = 64, blocks: int | None = None,
                      causal: bool = True, dtype: str = "bool") -> list:
    """Q, K, V (b, h, s, d) fp16 and a block mask (b, h, blocks, blocks): seeded random blocks,
    block column 0 always kept (every row then has a visible key), lower-triangular when causal."""
    import torch

    blocks = blocks or -(-skv // 64)
    mask = torch.rand(b, h, blocks, blocks, generator=gen) < 0.5
    mask[..., 0] = True
    if causal:
        mask = mask.tril()
    q, k, v = (randn(gen, b, h, n, d, dtype="float16") for n in (sq, skv, skv))
    return [q, k, v, mask.to(getattr(torch, dtype))]


def block_sparse_ref(q: Any, k: Any, v: Any, mask: Any, causal: bool = True, block: int = 64) -> Any:
    """Block-sparse attention: query i (block i // 64) sees key j iff mask[b, h, i // 64, j // 64]
    (the kernel reads the mask row of the query's own block index) and, if causal, j <= i +
    s_kv - s_q; softmax(Q K^T / sqrt(d)) V over what it sees."""
    import torch

    lq, lk = q.shape[2], k.shape[2]
    rows, cols = torch.arange(lq) // block, torch.arange(lk) // block
    seen = mask.bool()[:, :, rows][:, :, :, cols]
    if causal:
        seen = seen & (torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + lk - lq)
    s = (q.double() @ k.double().transpose(-1, -2) * q.shape[-1] ** -0.5).masked_fill(~seen, float("-inf"))
    return (s.softmax(-1) @ v.double()).half()


def nsa_inputs(gen: Any, b: int = 2, n: int = 128, hq: int = 16, hkv: int = 1, d: int = 32, s_blocks: int = 2,
               block_size: int = 32, q_len: int | None = None) -> list:
    """deepseek_nsa's Q (b, q_len or n, hq, d), K, V (b, n, hkv, d) and BlockIndices
    (b, q_len or n, hkv, s_blocks), int32: for token t, s_blocks distinct blocks among
    0 .. t // block_size (its own included), in seeded random order, padded with n (an index
    the kernel skips: n * block_size > t), sorted. q_len=1: decoding (all n // block_size
    blocks are candidates)."""
    import torch

    tokens = q_len or n
    idx = torch.full((b, tokens, hkv, s_blocks), n, dtype=torch.int32)
    for bi in range(b):
        for t in range(tokens):
            for h in range(hkv):
                avail = n // block_size if q_len else t // block_size + 1
                pick = torch.randperm(avail, generator=gen)[:s_blocks]
                idx[bi, t, h, :len(pick)] = pick.to(torch.int32)
    return [randn(gen, b, tokens, hq, d, dtype="float16"), randn(gen, b, n, hkv, d, dtype="float16"),
            randn(gen, b, n, hkv, d, dtype="float16"), idx.sort(-1).values]


def nsa_fwd_ref(q: Any, k: Any, v: Any, idx: Any, causal: bool = True, block_size: int = 32,
                scale: float | None = None) -> Any:
    """example_tilelang_nsa_fwd: token t of query head h attends to the keys of its KV head
    (h // groups) in the selected blocks that start at or before t (block * block_size <= t),
    only keys j <= t if causal; softmax(scale Q K^T) V (scale default 1 / sqrt(d))."""
    import torch

    b, n, hq, d = q.shape
    groups = hq // k.shape[2]
    scale = d ** -0.5 if scale is None else scale
    out = torch.zeros(b, n, hq, d, dtype=torch.float64)
    for bi in range(b):
        for t in range(n):
            for h in range(k.shape[2]):
                keys = [j for blk in idx[bi, t, h].tolist() if 0 <= blk * block_size <= t
                        for j in range(blk * block_size, (blk + 1) * block_size) if not causal or j <= t]
                s = q[bi, t, h * groups:(h + 1) * groups].double() @ k[bi, keys, h].double().T * scale
                out[bi, t, h * groups:(h + 1) * groups] = s.softmax(-1) @ v[bi, keys, h].double()
    return out.half()


def nsa_decode_ref(q: Any, k: Any, v: Any, idx: Any, block_size: int = 32) -> Any:
    """example_tilelang_nsa_decode, as its kernel computes it: over the selected blocks in
    order, P_k = 2^((s - m_k) scale log2 e) with m_k the block's own max, logsum rescaled by
    2^((m_{k-1} - m_k) scale log2 e) each block, but the output accumulator NOT rescaled
    (upstream's decode kernel has no acc_o *= scores_scale); O = sum_k P_k V_k / logsum. With
    one selected block (upstream main's) this is exact attention; P_k rounded to fp16 (the
    P V GEMM's operand). scale = 1 / sqrt(d)."""
    import torch

    b, _, hq, d = q.shape
    groups = hq // k.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    for bi in range(b):
        for h in range(k.shape[2]):
            qh = q[bi, 0, h * groups:(h + 1) * groups].double()
            acc, logsum, prev = 0.0, torch.zeros(groups, dtype=torch.float64), None
            for blk in idx[bi, 0, h].tolist():
                rows = slice(blk * block_size, (blk + 1) * block_size)
                s = qh @ k[bi, rows, h].double().T * d ** -0.5
                m = s.max(-1).values
                p = torch.exp(s - m[:, None])
                logsum = (logsum * (torch.exp(prev - m) if prev is not None else 0)) + p.sum(-1)
                acc = acc + p.half().double() @ v[bi, rows, h].double()
                prev = m
            out[bi, 0, h * groups:(h + 1) * groups] = acc / logsum[:, None]
    return out.half()

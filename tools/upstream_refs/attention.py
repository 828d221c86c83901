"""Softmax attention: forward and backward (MHA, GQA), varlen, flash decoding, MLA decoding
(plain, paged), the attention sink, block-sparse attention and native sparse attention.

The kernels keep Q K^T, the softmax and the accumulators in float32 and store O in fp16;
these references work in float64 and round only the outputs, so a 1e-2 tolerance (fp16
storage plus the kernels' fp16 P and dS tiles, which the references do not model unless
they say so) is the budget."""

from __future__ import annotations

from typing import Any

from .common import randn


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


def varlen_inputs(gen: Any, seqlens_q: tuple = (50, 128, 77), seqlens_k: tuple = (100, 64, 77), h: int = 2,
                  d: int = 64) -> list:
    """example_mha_fwd_varlen's arguments: packed Q (sum seqlens_q, h, d), K, V (sum seqlens_k,
    h, d), the int32 cumulative lengths, and max_seqlen_q (a scalar)."""
    import torch

    cu = lambda lens: torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    q = randn(gen, sum(seqlens_q), h, d, dtype="float16")
    k, v = (randn(gen, sum(seqlens_k), h, d, dtype="float16") for _ in range(2))
    return [q, k, v, cu(seqlens_q), cu(seqlens_k), max(seqlens_q)]


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

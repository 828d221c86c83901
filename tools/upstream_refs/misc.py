"""Casts to fp8 (per token, per group split) and the top-k kernels (example_topk, deepseek_v32's
topk_selector)."""

from __future__ import annotations

from typing import Any

from .common import randn


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
    bins = [2.0 ** e * (1 + q / 4) for e in range(15) for q in range(4)]  # one per fp16 top-byte bin
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

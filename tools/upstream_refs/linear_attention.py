"""Linear attention and gated delta net (gdn): chunked outputs, the delta-rule state, chunk-local
cumsum, the scaled K K^T, the WY recomputation and chunked retention."""

from __future__ import annotations

from typing import Any

from .common import randn


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

    bf = lambda t: t.to(torch.bfloat16).double()
    b, s, h, _ = k.shape
    bt = beta.double()[..., None]
    u_in = bf(v.double() * bt)
    w_in = bf(bf(k.double() * bt) * g.exp().double()[..., None])

    def per_chunk(x: Any) -> Any:  # b, n, h, c, d
        return x.reshape(b, s // chunk, chunk, h, -1).transpose(2, 3)

    ac = per_chunk(a.double())
    w, u = ac @ per_chunk(w_in), ac @ per_chunk(u_in)
    back = lambda t: t.transpose(2, 3).reshape(b, s, h, -1).to(torch.bfloat16)
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
    hf = lambda t: t.half().double()
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

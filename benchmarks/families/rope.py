"""rope: rotary position embedding applied to q and k ([batch, seq, heads, dim], fp16; the
rotate-half form of GPT-NeoX / Llama, cos and sin tables [seq, dim]) in one kernel, computed
in fp32, against the eager torch expression ``x * cos + rotate_half(x) * sin`` (HF's
apply_rotary_pos_emb). GB/s counts q, k, their outputs and the tables once."""

from __future__ import annotations

import tilelang.language as T

from .common import Case, KernelSpec, Variant

SHAPES = ((4, 4096, 32, 128), (16, 1024, 8, 64))  # batch, seq, heads, dim
SMALL_SHAPE = (2, 16, 4, 32)
CONFIGS = ((8, 256), (4, 128))  # seq positions per block, threads


def rope_kernel(batch, seq, heads, dim, block_S=8, threads=256, dtype="float16"):
    half = dim // 2
    shape = [batch, seq, heads, dim]

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), Cos: T.Tensor([seq, dim], dtype),
             Sin: T.Tensor([seq, dim], dtype), Q_out: T.Tensor(shape, dtype), K_out: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq, block_S), batch, threads=threads) as (sx, bz):
            for i, h, j in T.Parallel(block_S, heads, half):
                s = sx * block_S + i
                if s < seq:
                    c1 = T.cast(Cos[s, j], "float32")
                    c2 = T.cast(Cos[s, j + half], "float32")
                    s1 = T.cast(Sin[s, j], "float32")
                    s2 = T.cast(Sin[s, j + half], "float32")
                    q1 = T.cast(Q[bz, s, h, j], "float32")
                    q2 = T.cast(Q[bz, s, h, j + half], "float32")
                    k1 = T.cast(K[bz, s, h, j], "float32")
                    k2 = T.cast(K[bz, s, h, j + half], "float32")
                    # rotate_half(x) = [-x2, x1]
                    Q_out[bz, s, h, j] = T.cast(q1 * c1 - q2 * s1, dtype)
                    Q_out[bz, s, h, j + half] = T.cast(q2 * c2 + q1 * s2, dtype)
                    K_out[bz, s, h, j] = T.cast(k1 * c1 - k2 * s1, dtype)
                    K_out[bz, s, h, j + half] = T.cast(k2 * c2 + k1 * s2, dtype)

    return main


def _inputs(batch: int, seq: int, heads: int, dim: int, device: str) -> dict:
    import torch

    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device).float() / dim))
    angles = torch.outer(torch.arange(seq, device=device).float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    q, k = (torch.randn(batch, seq, heads, dim, device=device, dtype=torch.float16) for _ in range(2))
    return {"q": q, "k": k, "cos": angles.cos().half(), "sin": angles.sin().half(),
            "q_out": torch.empty_like(q), "k_out": torch.empty_like(k)}


def _launch(kernels: list, t: dict):
    kernels[0](t["q"], t["k"], t["cos"], t["sin"], t["q_out"], t["k_out"])
    return t["q_out"], t["k_out"]


def _reference(t: dict):
    import torch

    cos, sin = t["cos"][None, :, None, :], t["sin"][None, :, None, :]

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([-x2, x1], dim=-1)

    return t["q"] * cos + rotate_half(t["q"]) * sin, t["k"] * cos + rotate_half(t["k"]) * sin


def make_case(shape: tuple, configs: tuple, device: str = "cuda") -> Case:
    batch, seq, heads, dim = shape
    nbytes = 2.0 * (4 * batch * seq * heads * dim + 2 * seq * dim)
    variants = [Variant(f"bS{c[0]}/t{c[1]}", lambda c=c: [KernelSpec(rope_kernel(*shape, *c))]) for c in configs]
    # torch rounds each product to fp16, the kernel once: a few fp16 ulps of values up to ~4
    return Case("rope", f"b{batch} s{seq} h{heads} d{dim}", {"batch": batch, "seq": seq, "heads": heads, "dim": dim},
                "GB/s", nbytes, variants, lambda: _inputs(*shape, device), _launch, _reference, atol=1e-2, rtol=1e-2)


def cases(quick: bool) -> list[Case]:
    return [make_case(shape, CONFIGS) for shape in (SHAPES[:1] if quick else SHAPES)]


def small_cases() -> list[Case]:
    return [make_case(SMALL_SHAPE, CONFIGS[:1], device="cpu")]

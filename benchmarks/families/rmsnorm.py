"""rmsnorm: y = x / sqrt(mean(x^2) + eps) * w over the rows of an fp16 [M, N] matrix (fp32
inside), against torch's F.rms_norm (eager). GB/s counts x, y and w once."""

from __future__ import annotations

import tilelang.language as T

from .common import Case, KernelSpec, Variant

SHAPES = ((16384, 4096), (65536, 1024))  # M, N
SMALL_SHAPE = (64, 256)
CONFIGS = ((1, 256), (2, 256), (4, 512))  # rows per block, threads
# A block of R > 1 rows whose threads split into R groups of 32, 64, 128 ... reduces all its
# rows at once, one group per row (tilelang/transform/block_reduce.py; (2, 256) and (4, 512)
# above too, 128 threads a row). Rows of 1024 are short for a whole block: these give each
# row one or two warps.
SHORT_ROW_CONFIGS = ((4, 128), (8, 256), (4, 256))
EPS = 1e-6


def rmsnorm_kernel(M, N, block_M=1, threads=256, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            sq = T.alloc_fragment((block_M, N), "float32")
            inv = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.cast(X[bx * block_M + i, j], "float32")
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, inv, dim=1)
            for i in T.Parallel(block_M):
                inv[i] = T.rsqrt(inv[i] / N + EPS)
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = T.cast(x[i, j] * inv[i] * T.cast(W[j], "float32"), dtype)

    return main


def _inputs(m: int, n: int, device: str) -> dict:
    import torch

    x = torch.randn(m, n, device=device, dtype=torch.float16)
    return {"x": x, "w": torch.rand(n, device=device, dtype=torch.float16) + 0.5, "y": torch.empty_like(x)}


def _launch(kernels: list, t: dict):
    kernels[0](t["x"], t["w"], t["y"])
    return t["y"]


def _reference(t: dict):
    import torch.nn.functional as F

    return F.rms_norm(t["x"], (t["x"].shape[-1],), t["w"], EPS)


def make_case(shape: tuple, configs: tuple, device: str = "cuda") -> Case:
    m, n = shape
    variants = [Variant(f"rows{c[0]}/t{c[1]}", lambda c=c: [KernelSpec(rmsnorm_kernel(m, n, *c))]) for c in configs]
    return Case("rmsnorm", f"{m}x{n}", {"M": m, "N": n}, "GB/s", 2.0 * (2 * m * n + n), variants,
                lambda: _inputs(m, n, device), _launch, _reference, atol=1e-2, rtol=1e-2)


def cases(quick: bool) -> list[Case]:
    return [make_case(shape, CONFIGS[:2] if quick else CONFIGS + (SHORT_ROW_CONFIGS if shape[1] <= 1024 else ()))
            for shape in (SHAPES[:1] if quick else SHAPES)]


def small_cases() -> list[Case]:
    return [make_case(SMALL_SHAPE, CONFIGS[:1], device="cpu")]

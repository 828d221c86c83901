"""softmax: row softmax of an fp16 [M, N] matrix (fp32 inside), block_M rows per block held
on chip, against torch.softmax(dim=-1). GB/s counts one read and one write."""

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
LOG2E = 1.44269504


def softmax_kernel(M, N, block_M=1, threads=256, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            row_max = T.alloc_fragment((block_M,), "float32")
            row_sum = T.alloc_fragment((block_M,), "float32")
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.cast(X[bx * block_M + i, j], "float32")
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):  # exp(x - max) as exp2: one FFMA and MUFU.EX2
                x[i, j] = T.exp2(x[i, j] * LOG2E - row_max[i] * LOG2E)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = T.cast(x[i, j] / row_sum[i], dtype)

    return main


def _inputs(m: int, n: int, device: str) -> dict:
    import torch

    x = torch.randn(m, n, device=device, dtype=torch.float16)
    return {"x": x, "y": torch.empty_like(x)}


def _launch(kernels: list, t: dict):
    kernels[0](t["x"], t["y"])
    return t["y"]


def _reference(t: dict):
    import torch

    return torch.softmax(t["x"], dim=-1)


def make_case(shape: tuple, configs: tuple, device: str = "cuda") -> Case:
    m, n = shape
    variants = [Variant(f"rows{c[0]}/t{c[1]}", lambda c=c: [KernelSpec(softmax_kernel(m, n, *c))]) for c in configs]
    return Case("softmax", f"{m}x{n}", {"M": m, "N": n}, "GB/s", 2.0 * 2 * m * n, variants,
                lambda: _inputs(m, n, device), _launch, _reference, atol=1e-6, rtol=5e-3)  # outputs ~1/N: relative


def cases(quick: bool) -> list[Case]:
    return [make_case(shape, CONFIGS[:2] if quick else CONFIGS + (SHORT_ROW_CONFIGS if shape[1] <= 1024 else ()))
            for shape in (SHAPES[:1] if quick else SHAPES)]


def small_cases() -> list[Case]:
    return [make_case(SMALL_SHAPE, CONFIGS[:1], device="cpu")]

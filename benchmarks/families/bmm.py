"""bmm: batched fp16 GEMM C[b] = A[b] @ B[b] (fp32 accumulation), one grid z-slice per batch
entry, against torch.bmm (cuBLAS's strided-batched GEMM)."""

from __future__ import annotations

import tilelang.language as T

from .common import Case, KernelSpec, Variant

# batch, M, N, K; the last one, with a long K, tells a per-tile cost (the ring's fill, the
# epilogue: about the same for any K) from the main loop's speed
SHAPES = ((16, 1024, 1024, 1024), (32, 2048, 2048, 512), (8, 2048, 2048, 4096))
SMALL_SHAPE = (2, 128, 256, 64)
# bM, bN, bK, threads, stages; 4-stage rings and the 2-blocks-per-SM 128x128 tile beside the
# canonical ones: with K of 512-1024 each tile has 8-16 iterations, so the fill and the epilogue
# weigh more, and a second resident block hides them; 128x128 over two consumer warpgroups
# (64 rows each) ran 16 x 1024^3 at 1.04x torch.bmm on the H200 in a paired scan, against 0.97x
# for 128x256, and within 1.2% of it in the families' run (docs/benchmarks/h200-2026-12-02-mask.md)
CONFIGS = ((128, 128, 32, 128, 3), (128, 128, 64, 128, 3), (128, 256, 64, 256, 3), (128, 128, 64, 128, 4),
           (128, 256, 64, 256, 4), (256, 128, 64, 256, 3), (128, 128, 64, 256, 3))


def bmm_kernel(batch, M, N, K, bM=128, bN=128, bK=32, threads=128, num_stages=3, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((batch, M, K), dtype), B: T.Tensor((batch, K, N), dtype),
             C: T.Tensor((batch, M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), batch, threads=threads) as (bx, by, bz):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=num_stages):
                T.copy(A[bz, by * bM:(by + 1) * bM, k * bK:(k + 1) * bK], As)
                T.copy(B[bz, k * bK:(k + 1) * bK, bx * bN:(bx + 1) * bN], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[bz, by * bM:(by + 1) * bM, bx * bN:(bx + 1) * bN])

    return main


def _inputs(b: int, m: int, n: int, k: int, device: str) -> dict:
    import torch

    return {"a": torch.randn(b, m, k, device=device, dtype=torch.float16),
            "b": (torch.randn(b, k, n, device=device) * k**-0.5).half(),  # outputs of order one
            "c": torch.empty(b, m, n, device=device, dtype=torch.float16)}


def _launch(kernels: list, t: dict):
    kernels[0](t["a"], t["b"], t["c"])
    return t["c"]


def _reference(t: dict):
    import torch

    return torch.bmm(t["a"], t["b"])


def make_case(shape: tuple, configs: tuple, device: str = "cuda") -> Case:
    b, m, n, k = shape
    variants = [Variant("{}x{}x{}/t{}/s{}".format(*c), lambda c=c: [KernelSpec(bmm_kernel(*shape, *c))])
                for c in configs]
    return Case("bmm", f"{b}x{m}x{n}x{k}", {"batch": b, "M": m, "N": n, "K": k}, "TFLOP/s", 2.0 * b * m * n * k,
                variants, lambda: _inputs(*shape, device), _launch, _reference, atol=1e-2, rtol=1e-2)


def cases(quick: bool) -> list[Case]:
    return [make_case(shape, CONFIGS[:2] if quick else CONFIGS) for shape in (SHAPES[:1] if quick else SHAPES)]


def small_cases() -> list[Case]:
    return [make_case(SMALL_SHAPE, CONFIGS[:1], device="cpu")]

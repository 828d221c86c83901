"""linear_bias_act: Y = act(X @ W^T + bias) in fp16 (a Linear layer with its activation):
one GEMM whose epilogue adds the bias and applies GELU (tanh form) or ReLU in registers,
against torch's F.linear (cuBLAS, bias in its epilogue) followed by the eager activation."""

from __future__ import annotations

import tilelang.language as T

from .common import Case, KernelSpec, Variant

SHAPES = ((8192, 8192, 4096, "gelu"), (8192, 8192, 4096, "relu"), (4096, 11008, 4096, "gelu"))  # M, N, K, act
# bM, bN, bK, threads, stages, rasterization panel (T.use_swizzle; 0: none). Panels of 16 ran
# every shape faster in a paired scan on the H200 (docs/benchmarks/h200-2026-12-02-scheduler.md):
# 4096x11008x4096 gelu 128x128x64 1.111x against 1.04 without, 128x256x64 1.071 against 0.961
CONFIGS = ((128, 128, 32, 128, 3, 0), (128, 128, 64, 128, 3, 16), (128, 256, 64, 256, 3, 16),
           (128, 256, 64, 256, 4, 16), (128, 256, 64, 256, 3, 0))
SQRT_2_OVER_PI = 0.7978845608028654


def _activation(x, act: str):
    if act == "relu":
        return T.max(x, T.float32(0))
    # torch's F.gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    return 0.5 * x * (1.0 + T.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))


def linear_kernel(M, N, K, act, bM=128, bN=128, bK=32, threads=128, num_stages=3, panel=0, dtype="float16"):
    @T.prim_func
    def main(X: T.Tensor((M, K), dtype), W: T.Tensor((N, K), dtype), bias: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            T.use_swizzle(max(panel, 1), enable=panel > 0)  # blocks in panels sharing L2 tiles
            Xs = T.alloc_shared((bM, bK), dtype)
            Ws = T.alloc_shared((bN, bK), dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=num_stages):
                T.copy(X[by * bM, k * bK], Xs)
                T.copy(W[bx * bN, k * bK], Ws)
                T.gemm(Xs, Ws, Cl, transpose_B=True)
            for i, j in T.Parallel(bM, bN):
                Cl[i, j] = _activation(Cl[i, j] + T.cast(bias[bx * bN + j], "float32"), act)
            T.copy(Cl, Y[by * bM, bx * bN])

    return main


def _inputs(m: int, n: int, k: int, device: str) -> dict:
    import torch

    return {"x": torch.randn(m, k, device=device, dtype=torch.float16),
            "w": (torch.randn(n, k, device=device) * k**-0.5).half(),  # pre-activations of order one
            "bias": torch.randn(n, device=device, dtype=torch.float16),
            "y": torch.empty(m, n, device=device, dtype=torch.float16)}


def _launch(kernels: list, t: dict):
    kernels[0](t["x"], t["w"], t["bias"], t["y"])
    return t["y"]


def _reference(t: dict, act: str):
    import torch.nn.functional as F

    y = F.linear(t["x"], t["w"], t["bias"])
    return F.relu(y) if act == "relu" else F.gelu(y, approximate="tanh")


def make_case(shape: tuple, configs: tuple, device: str = "cuda") -> Case:
    m, n, k, act = shape
    variants = [Variant("{}x{}x{}/t{}/s{}".format(*c) + (f"/p{c[5]}" if c[5] else ""),
                        lambda c=c: [KernelSpec(linear_kernel(*shape, *c))]) for c in configs]
    return Case("linear_bias_act", f"{m}x{n}x{k} {act}", {"M": m, "N": n, "K": k, "act": act}, "TFLOP/s",
                2.0 * m * n * k, variants, lambda: _inputs(m, n, k, device), _launch,
                lambda t: _reference(t, act), atol=1e-2, rtol=1e-2)


def cases(quick: bool) -> list[Case]:
    return [make_case(shape, CONFIGS[:2] if quick else CONFIGS) for shape in (SHAPES[:1] if quick else SHAPES)]


def small_cases() -> list[Case]:
    return [make_case((128, 256, 64, act), CONFIGS[:1], device="cpu") for act in ("gelu", "relu")]

"""matmul_fp8: C = A @ B^T with 8-bit float operands (e4m3; fp32 accumulation, bf16 out),
upstream's examples/gemm_fp8 kernel (A as [m][k], B as [n][k]: the K-major form fp8 tensor
cores read), against torch._scaled_mm (cuBLASLt's fp8 GEMM) with unit scales and fast
accumulation: Hopper's fp8 wgmma adds in fewer bits than fp32 (about 14), and like this
kernel that mode never promotes its sums into fp32 (cuBLASLt's default does, every few k
steps, as upstream's 2xAcc examples do by hand). So the comparison is like for like, and
the tolerance is that of sums of K products of order one kept in 14 bits.

On sm_90 the GEMM runs on wgmma k32 with TMA rings; on sm_89 on mma.sync m16n8k32; older
GPUs keep the SIMT path. There is no CPU check: the CPU backend has no 8-bit float
arithmetic (it refuses such kernels with a message), so ``small_cases`` is empty."""

from __future__ import annotations

import tilelang.language as T

from .common import Case, KernelSpec, Variant

SIZES = (4096, 8192)
# bM, bN, bK, threads, stages, rasterization panel (T.use_swizzle; 0: none). bK = 128 bytes:
# the rows fill the 128-byte swizzle that wgmma and TMA read without bank conflicts
CONFIGS = ((128, 128, 128, 128, 4, 0), (128, 128, 128, 128, 4, 16), (128, 256, 128, 256, 3, 16),
           (128, 256, 128, 256, 4, 16), (256, 128, 128, 256, 3, 16))


def fp8_gemm(M, N, K, bM=128, bN=128, bK=128, threads=128, num_stages=4, panel=0, dtype="float8_e4m3fn",
             out_dtype="bfloat16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            T.use_swizzle(max(panel, 1), enable=panel > 0)
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bN, bK), dtype)
            Cl = T.alloc_fragment((bM, bN), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=num_stages):
                T.copy(A[by * bM, k * bK], As)
                T.copy(B[bx * bN, k * bK], Bs)
                T.gemm(As, Bs, Cl, transpose_B=True)
            T.copy(Cl, C[by * bM, bx * bN])

    return main


def _inputs(m: int, n: int, k: int, device: str) -> dict:
    import torch

    # operands of order one (e4m3 keeps 3 bits of mantissa); the products' sums are exact
    # enough in fp32 that only the bf16 rounding of C separates the two paths
    return {"a": torch.randn(m, k, device=device).to(torch.float8_e4m3fn),
            "b": torch.randn(n, k, device=device).to(torch.float8_e4m3fn),
            "c": torch.empty(m, n, device=device, dtype=torch.bfloat16)}


def _launch(kernels: list, t: dict):
    kernels[0](t["a"], t["b"], t["c"])
    return t["c"]


def _reference(t: dict):
    import torch

    a, b = t["a"], t["b"]
    one = torch.ones((), device=a.device, dtype=torch.float32)
    return torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)


def make_case(n: int, configs: tuple, device: str = "cuda") -> Case:
    variants = [Variant("{}x{}x{}/t{}/s{}".format(*c) + (f"/p{c[5]}" if c[5] else ""),
                        lambda c=c: [KernelSpec(fp8_gemm(n, n, n, *c))]) for c in configs]
    # |C| ~ sqrt(K) (sigma); partial sums kept in ~14 bits over K / 32 wgmma steps drift, in
    # either path, and bf16 rounds the outputs to 2^-8 of themselves: on the H200 the outputs
    # equal cuBLASLt's fast-accumulation ones exactly, and differ by 2 (K = 4096) and 4
    # (8192) from its promoting mode's, within 5% of sigma; a wrong layout or a lost k step
    # errs by sigma or more
    return Case("matmul_fp8", f"{n}^3 e4m3", {"M": n, "N": n, "K": n, "dtype": "e4m3"}, "TFLOP/s",
                2.0 * n**3, variants, lambda: _inputs(n, n, n, device), _launch, _reference,
                atol=5e-2 * n**0.5, rtol=2e-2)


def cases(quick: bool) -> list[Case]:
    return [make_case(n, CONFIGS[:2] if quick else CONFIGS) for n in (SIZES[:1] if quick else SIZES)]


def small_cases() -> list[Case]:
    return []  # (see the module docstring)

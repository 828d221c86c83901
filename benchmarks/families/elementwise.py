"""elementwise: C = A + B on 2^26 elements (fp32 and fp16), benchmarks/elementwise.py's kernel
and block configs, against torch.add(out=). GB/s counts two reads and one write."""

from __future__ import annotations

from .common import Case, KernelSpec, Variant, load_benchmark

LOG2N = 26
CONFIGS = ((4096, 256), (8192, 512), (2048, 128))  # elements per block, threads (benchmarks/elementwise.py)


def _inputs(n: int, dtype: str, device: str) -> dict:
    import torch

    a = torch.randn(n, device=device).to(getattr(torch, dtype))
    return {"a": a, "b": torch.randn(n, device=device).to(a.dtype), "c": torch.empty_like(a)}


def _launch(kernels: list, t: dict):
    kernels[0](t["a"], t["b"], t["c"])
    return t["c"]


def _reference(t: dict):
    import torch

    return torch.add(t["a"], t["b"])


def make_case(n: int, dtype: str, configs: tuple, device: str = "cuda") -> Case:
    add_kernel = load_benchmark("elementwise").add_kernel
    variants = [Variant(f"block{block}/t{threads}", lambda c=(block, threads): [KernelSpec(add_kernel(n, dtype, *c))])
                for block, threads in configs]
    size = 4 if dtype == "float32" else 2
    return Case("elementwise", f"add {dtype}", {"n": n, "dtype": dtype}, "GB/s", 3.0 * n * size, variants,
                lambda: _inputs(n, dtype, device), _launch, _reference, atol=0.0, rtol=1e-3)  # one rounding each: an ulp at most


def cases(quick: bool) -> list[Case]:
    dtypes = ("float16",) if quick else ("float32", "float16")
    return [make_case(1 << LOG2N, dtype, CONFIGS[:1] if quick else CONFIGS) for dtype in dtypes]


def small_cases() -> list[Case]:
    return [make_case(1 << 13, "float16", CONFIGS[:1], device="cpu")]

"""matmul: fp16 GEMM (fp32 accumulation) C = A @ B, examples/gemm.py's kernel with the tile
configs of benchmarks/matmul.py, against torch.matmul (cuBLAS)."""

from __future__ import annotations

from .common import Case, KernelSpec, Variant, load_benchmark

SIZES = (4096, 8192)
SMALL_SIZE = 256  # the CPU check's
QUICK_CONFIGS = 2  # the canonical config and the first tuned one


def config_label(config: tuple, options: dict) -> str:
    """benchmarks/matmul.py's spelling: tile/threads/stages/panel, then pass-config flags."""
    short = load_benchmark("matmul").SHORT
    label = "x".join(map(str, config[:3])) + f"/t{config[3]}/s{config[4]}/p{config[5]}"
    return label + "".join(f"/{short[k]}" + ("" if v is True else str(v)) for k, v in options.items())


def gemm_variants(m: int, n: int, k: int, quick: bool) -> list[Variant]:
    bench = load_benchmark("matmul")
    configs = bench.CONFIGS[:QUICK_CONFIGS] if quick else bench.CONFIGS

    def variant(config: tuple, options: dict) -> Variant:
        def build() -> list[KernelSpec]:
            return [KernelSpec(bench.matmul.builder(m, n, k, *config), options or None)]

        return Variant(config_label(config, options), build)

    return [variant(config, options) for config, options in configs]


def _inputs(m: int, n: int, k: int, device: str) -> dict:
    import torch

    # B scaled by 1/sqrt(K): outputs of order one, so fp16 rounding stays at its relative size
    return {"a": torch.randn(m, k, device=device, dtype=torch.float16),
            "b": (torch.randn(k, n, device=device) * k**-0.5).half(),
            "c": torch.empty(m, n, device=device, dtype=torch.float16)}


def _launch(kernels: list, t: dict):
    kernels[0](t["a"], t["b"], t["c"])
    return t["c"]


def _reference(t: dict):
    import torch

    return torch.matmul(t["a"], t["b"])


def make_case(n: int, variants: list[Variant], device: str = "cuda") -> Case:
    return Case("matmul", f"{n}^3", {"M": n, "N": n, "K": n}, "TFLOP/s", 2.0 * n**3, variants,
                lambda: _inputs(n, n, n, device), _launch, _reference, atol=1e-2, rtol=1e-2)


def cases(quick: bool) -> list[Case]:
    return [make_case(n, gemm_variants(n, n, n, quick)) for n in (SIZES[:1] if quick else SIZES)]


def small_cases() -> list[Case]:
    return [make_case(SMALL_SIZE, gemm_variants(SMALL_SIZE, SMALL_SIZE, SMALL_SIZE, quick=True)[:1], device="cpu")]

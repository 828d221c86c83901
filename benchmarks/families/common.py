"""What a benchmark family provides (``cases(quick) -> list[Case]``) and the two ways a case
runs: on a GPU (compile, check against torch, time both with CUDA events) or dry (lower for
a CUDA arch and compile the device code, launching nothing; for machines without a GPU)."""

from __future__ import annotations

import importlib.util
import math
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent.parent
EXAMPLES = BENCHMARKS.parent / "examples"


def load_benchmark(name: str) -> Any:
    """benchmarks/<name>.py as module ``bench_<name>``: by path, because examples/ (which
    benchmarks/matmul.py puts first on sys.path) has files of the same names."""
    module_name = f"bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    for folder in (BENCHMARKS, EXAMPLES):  # cuda_timing, gemm: imported by plain name there
        if str(folder) not in sys.path:
            sys.path.append(str(folder))
    spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def sm_count() -> int:
    """The GPU's SM count for persistent kernels; a dry run (no GPU) lowers for the
    H100/H200's 132."""
    import torch

    return torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132


@dataclass(frozen=True)
class KernelSpec:
    """One launch of a variant: a ``T.prim_func`` and how it is compiled. Outputs are
    passed in preallocated (no ``out_idx``), so the timing holds the kernels alone."""

    func: Any
    pass_configs: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Variant:
    """One tile configuration of a case; ``build`` makes its kernels (run in order);
    ``launch``, where given, runs them instead of the case's (a variant with its own buffers)."""

    label: str
    build: Callable[[], Sequence[KernelSpec]]
    launch: Callable[[list[Any], dict[str, Any]], Any] | None = None


@dataclass
class Case:
    """One family/shape: TileLang variants against the torch path on the same inputs.

    ``inputs()`` makes the CUDA tensors (outputs preallocated), ``launch(kernels, inputs)``
    runs a variant's compiled kernels and returns its output(s), ``reference(inputs)`` runs
    the torch path and returns the same. ``work`` is FLOPs (metric TFLOP/s) or bytes moved
    (GB/s). Correct: every element within ``atol + rtol * |reference|``."""

    family: str
    name: str
    shape: dict[str, Any]
    metric: str
    work: float
    variants: list[Variant]
    inputs: Callable[[], dict[str, Any]]
    launch: Callable[[list[Any], dict[str, Any]], Any]
    reference: Callable[[dict[str, Any]], Any]
    atol: float
    rtol: float
    notes: str = ""
    record: dict[str, Any] = field(default_factory=dict)

    def base_record(self) -> dict[str, Any]:
        return {"name": self.family, "case": self.name, "shape": self.shape, "metric": self.metric,
                "atol": self.atol, "rtol": self.rtol, "tl_ms": None, "ref_ms": None, "ratio": None,
                "tl_value": None, "ref_value": None, "correct": None, "max_err": None, "config": None,
                "error": None, **({"notes": self.notes} if self.notes else {})}


def error_text(exc: BaseException) -> str:
    """The exception's type and first lines: enough to see what failed in a table cell."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) < 600 else text[:600] + " ..."


def _outputs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def compare(got: Any, want: Any, atol: float, rtol: float) -> tuple[bool, float]:
    """(every element within tolerance and finite, max absolute error) over all outputs."""
    correct, worst = True, 0.0
    for g, w in zip(_outputs(got), _outputs(want), strict=True):
        g, w = g.float(), w.float()
        diff = (g - w).abs()
        worst = max(worst, float(diff.max().nan_to_num(nan=math.inf)))
        correct = correct and bool((diff <= atol + rtol * w.abs()).all()) and bool(g.isfinite().all())
    return correct, worst


def throughput(case: Case, ms: float) -> float:
    """TFLOP/s or GB/s of ``case.work`` done in ``ms``."""
    scale = 1e9 if case.metric == "TFLOP/s" else 1e6
    return significant(case.work / ms / scale)


def significant(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant digits (times and rates span decades)."""
    return float(f"{value:.{digits}g}")


def run_case(case: Case, repeat: int, inner: int, target: str = "cuda",
             timer: Callable[..., float] | None = None) -> dict[str, Any]:
    """Compile every variant for ``target`` (the local GPU), check it against torch, time
    each variant beside torch (benchmarks/cuda_timing.py's ``paired_ms``: alternating
    CUDA-event samples, so both run at the same clocks; ``timer``, a ``time_ms``-like
    function, times the two one after the other instead); the record carries the fastest
    correct variant (else the fastest, marked incorrect) and the torch time paired with it."""
    import tilelang
    import torch

    if timer is None:
        paired = load_benchmark("cuda_timing").paired_ms
    else:
        def paired(fn: Callable[[], Any], ref: Callable[[], Any], repeat: int, inner: int) -> tuple[float, float]:
            return timer(fn, repeat, inner), timer(ref, repeat, inner)
    sync = torch.cuda.synchronize if target == "cuda" else (lambda: None)
    record = case.base_record()
    tried: list[dict[str, Any]] = []
    record["variants"] = tried
    try:
        inputs = case.inputs()
        want = case.reference(inputs)
        sync()
    except Exception as exc:  # noqa: BLE001 -- the torch side failing is a result too
        record["error"] = "torch reference: " + error_text(exc)
        return record
    for variant in case.variants:
        entry: dict[str, Any] = {"config": variant.label}
        tried.append(entry)
        stage = "compile"
        try:
            kernels = [tilelang.compile(spec.func, target=target, pass_configs=spec.pass_configs)
                       for spec in variant.build()]
            stage = "run"
            launch = variant.launch or case.launch
            got = launch(kernels, inputs)
            sync()
            entry["correct"], entry["max_err"] = compare(got, want, case.atol, case.rtol)
            entry["max_err"] = significant(entry["max_err"])
            stage = "timing"
            tl_ms, ref_ms = paired(lambda ks=kernels, go=launch: go(ks, inputs), lambda: case.reference(inputs),
                                   repeat, inner)
            entry["tl_ms"], entry["ref_ms"] = significant(tl_ms), significant(ref_ms)
        except Exception as exc:  # noqa: BLE001 -- reported per variant; the others continue
            entry["error"] = f"{stage}: {error_text(exc)}"
            traceback.print_exc(file=sys.stderr)
    timed = [e for e in tried if e.get("tl_ms")]
    best = min([e for e in timed if e["correct"]] or timed, key=lambda e: e["tl_ms"], default=None)
    if best is None:
        record["error"] = "; ".join(f"{e['config']}: {e['error']}" for e in tried)
        return record
    record.update(config=best["config"], tl_ms=best["tl_ms"], correct=best["correct"], max_err=best["max_err"],
                  tl_value=throughput(case, best["tl_ms"]), ref_ms=best["ref_ms"],
                  ref_value=throughput(case, best["ref_ms"]), ratio=significant(best["ref_ms"] / best["tl_ms"], 3))
    return record


def dry_run_case(case: Case, arch: str, nvcc: bool, execution_backend: str = "tvm_ffi") -> dict[str, Any]:
    """Lower every variant's kernels for ``arch`` as ``execution_backend`` gets them (the GPU
    run's default: its tensor maps put sm_90 pipelines on TMA with a producer warp) and
    (``nvcc``) compile their device code with the CUDA backend's toolchain; nothing is
    launched, torch's side is not run."""
    import tilelang

    record = case.base_record()
    tried: list[dict[str, Any]] = []
    record["variants"] = tried
    for variant in case.variants:
        entry: dict[str, Any] = {"config": variant.label}
        tried.append(entry)
        stage = "build"
        try:
            specs = variant.build()
            for spec in specs:
                stage = "lower"
                artifact = tilelang.lower(spec.func, target={"kind": "cuda", "arch": arch},
                                          pass_configs=spec.pass_configs, execution_backend=execution_backend)
                if not artifact.device_source:
                    raise RuntimeError("lowering produced no CUDA source")
                if nvcc:
                    stage = "device compile"
                    from tilelang.cuda.toolchain import compile_cubin

                    compile_cubin(artifact.device_source, arch, artifact.kernel_name)
            entry["status"] = "compiled" if nvcc else "lowered"
            entry["kernels"] = len(specs)
        except Exception as exc:  # noqa: BLE001 -- every failure is a result to report
            entry["status"] = "failed"
            entry["error"] = f"{stage}: {error_text(exc)}"
    failed = [e for e in tried if e["status"] == "failed"]
    record["status"] = "failed" if failed else tried[0]["status"]
    if failed:
        record["error"] = "; ".join(f"{e['config']}: {e['error']}" for e in failed)
    return record


def check_on_cpu(case: Case) -> dict[str, Any]:
    """Compile every variant of a small case (inputs on the CPU) for the CPU backend, run it
    and compare with torch on the CPU: the kernels' arithmetic checked where no GPU is. The
    record holds the worst variant's error, and is correct only if every variant is."""
    import tilelang

    record = case.base_record()
    record["config"] = ", ".join(v.label for v in case.variants)
    record["correct"], record["max_err"] = True, 0.0
    for variant in case.variants:
        inputs = case.inputs()
        want = case.reference({k: v.clone() for k, v in inputs.items()})
        kernels = [tilelang.compile(spec.func, target="cpu", pass_configs=spec.pass_configs)
                   for spec in variant.build()]
        got = (variant.launch or case.launch)(kernels, inputs)
        correct, err = compare(got, want, case.atol, case.rtol)
        record["correct"] = record["correct"] and correct
        record["max_err"] = max(record["max_err"], err)
    return record

"""Where a cold compile's seconds go, and how fast a cached kernel comes back in a new process.

    python benchmarks/compile_time.py --quick [--json out.json] [--markdown out.md]
    python benchmarks/compile_time.py [--runs 5] [--step-timeout 180] [--budget 1800] [--bytecode]

Every measurement runs in a new process with its own timeout (``--step-timeout``), and no
step starts once ``--budget`` seconds are spent, so one slow step (a hung toolchain, a cold
disk) is recorded as such and cannot eat the run. What is measured:

1. ``import tilelang`` (beyond Python's own start), the median of ``--runs`` processes: the
   yardstick; every time below is also given as a ratio to it.
2. The canonical GEMM (8192^3 fp16, 128x128x32 tiles, 3 stages, static shapes) on the best
   target here, for each usable execution backend of its target backend (the default one
   marked): a cold compile to a callable kernel in a new process with an empty cache, and
   where its seconds went — importing TVM and the language (what the first kernel of a
   process pays), building the IR (TVMScript), the backend context, the engine's stages
   (lowering, host/device split, device codegen, host codegen), the device compile
   (NVRTC/nvcc), the CUDA driver's initialization and device query (cuInit: the execution
   backend's availability check) and NVRTC's library load (cuda-bindings) on their own, the
   execution backend's build (launcher, host module) and load, and the rest (cache keys,
   checks, storing), every stage exclusive of the others; the same cold compile in a process
   that imported torch and made a tensor on the GPU first (a torch program's state when it
   calls a kernel); then disk hits in new processes (the kernel is written the upstream way, ``import tilelang.language as T`` at
   module level): the time to a callable, and whether TVM or torch was imported, also in a
   process that imported torch first and made a tensor on the GPU (tvm_ffi's own import
   loads torch; a torch program has its CUDA context before it calls a kernel), and one
   more hit of each kind in stages (``compile_stages.HIT_STAGES``: the packages the plain hits imported,
   each timed on its own, the request key, the cache's integrity checks, TVM's runtime
   libraries, the module load, the launcher), in a process of its own so that the probes
   stay out of the plain hits' times.
   Without a GPU: the CUDA sm_90 code generation and device compile only (no load), and the
   CPU target's GEMM (fp32 1024^3) as the runnable kernel. ``--quick`` leaves the CPU GEMM
   out where there is a GPU, and runs 3 hits per backend.

Python bytecode: the processes inherit this one's environment. Where it sets
PYTHONDONTWRITEBYTECODE, every process compiles each module it imports from source, which an
installed package never does (pip compiles a wheel's modules): ``import tilelang`` and a hit
both pay it. ``--bytecode`` gives the processes a private bytecode folder instead
(PYTHONPYCACHEPREFIX), warmed first by one throwaway cold compile per row; the header says
which way was measured.

Results: a markdown table on stdout (and ``--markdown``), everything in ``--json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_STARTED = time.perf_counter()
import tilelang.language as T  # at the top, as upstream kernels import it (no TVM yet)

_IMPORTED = time.perf_counter()
# beside this script: its folder is on sys.path
from bytecode import bytecode_environment
from compile_stages import (
    StageProbe,
    new_packages,
)

HERE = Path(__file__).resolve().parent
GEMM = {"M": 8192, "N": 8192, "K": 8192}
CPU_GEMM = {"M": 1024, "N": 1024, "K": 1024}


def gemm(M, N, K, bM=128, bN=128, bK=32, threads=128, num_stages=3, dtype="float16", accum_dtype="float32"):
    """The canonical GEMM (examples/gemm.py)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=threads) as (bx, by):
            As = T.alloc_shared((bM, bK), dtype)
            Bs = T.alloc_shared((bK, bN), dtype)
            Cl = T.alloc_fragment((bM, bN), accum_dtype)
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=num_stages):
                T.copy(A[by * bM, k * bK], As)
                T.copy(B[k * bK, bx * bN], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * bM, bx * bN])

    return main


def cpu_gemm(M, N, K, bM=64, bN=64, bK=32, dtype="float32"):
    return gemm(M, N, K, bM, bN, bK, threads=128, num_stages=1, dtype=dtype, accum_dtype=dtype)


BUILDERS = {"gemm": gemm, "cpu_gemm": cpu_gemm}
SIZES = {"gemm": GEMM, "cpu_gemm": CPU_GEMM}


# -- in a child process (the stages it times: compile_stages.py) -----------------------
def child(spec: dict) -> dict:
    """One measurement in this (new) process; see main's steps."""
    import tilelang

    result = {"import_tilelang_s": _IMPORTED - _STARTED}  # this module imports the language first
    if spec.get("preimport") == "torch":  # a torch program, its tensors already on the GPU
        mark = time.perf_counter()
        torch = importlib.import_module("torch")
        if torch.cuda.is_available():
            torch.zeros(1, device="cuda")  # the CUDA context a kernel's first launch would make
            result["cuda_context"] = True
        result["preimport_s"] = time.perf_counter() - mark  # not part of total_s
    builder, sizes, target = BUILDERS[spec["builder"]], SIZES[spec["builder"]], spec["target"]
    probe = None
    if spec["mode"] == "hit_stages":
        probe = StageProbe()
        for package in spec.get("preload", ()):  # what the plain hits imported, each on its own
            if package in sys.modules:  # imported by one before it
                continue
            mark = time.perf_counter()
            try:
                importlib.import_module(package)
            except ImportError:  # a name an extension put in sys.modules (Cython's shared module)
                continue
            probe.times[f"import {package}"] = time.perf_counter() - mark
        mark = time.perf_counter()
        probe.install_hit()
        probe.times["import tilelang's hit modules"] = time.perf_counter() - mark
    elif spec["mode"] != "hit":
        probe = StageProbe()
        probe.install()
    before = set(sys.modules)
    start = time.perf_counter()
    if probe is not None and spec["mode"] != "hit_stages":  # what the first kernel of a process pays; never on a hit
        if "torch" not in sys.modules and importlib.util.find_spec("torch") is not None:
            importlib.import_module("torch")  # tvm_ffi's import loads it anyway: shown on its own
            probe.times["import torch (tvm_ffi's import loads it)"] = time.perf_counter() - start
        mark = time.perf_counter()
        T.Kernel  # noqa: B018 - loads the language (and TVM)
        probe.times["import TVM + language"] = time.perf_counter() - mark
    if spec["mode"] == "codegen":  # a target this machine cannot run: no execution backend
        from tilelang.plugin import compile_device_source

        artifact = tilelang.lower(probe.timed("build IR (TVMScript)", builder)(**sizes), target=target,
                                  out_idx=[-1])
        context = probe.create_backend_context(target, None, None)  # not timed again
        compile_device_source(artifact, context, "benchmark")  # the toolchain is timed
    else:
        fn = tilelang.jit(out_idx=[-1], target=target, execution_backend=spec["backend"])(builder)
        kernel = fn(**sizes)
        result.update(from_cache=kernel.from_cache, execution_backend=kernel.execution_backend)
    result["total_s"] = time.perf_counter() - start
    result["tvm"], result["torch"] = "tvm" in sys.modules, "torch" in sys.modules
    result["packages"] = new_packages(before)
    if probe is not None and spec["mode"] == "hit_stages":
        result["total_s"] += sum(v for k, v in probe.times.items() if k.startswith("import "))
        probe.times["other (the JIT's call, context facts)"] = result["total_s"] - sum(probe.times.values())
        result["stages"] = probe.times
    elif probe is not None:
        probe.times["other (keys, checks, cache)"] = result["total_s"] - sum(probe.times.values())
        result["stages"] = probe.times
    return result


# -- the parent: steps with timeouts ----------------------------------------------------
class Steps:
    """Runs children under a per-step timeout and an overall budget; a failed, timed-out
    or skipped step is recorded as {"error": why}."""

    def __init__(self, step_timeout: float, budget: float, env: dict[str, str] | None = None) -> None:
        self.step_timeout, self.deadline = step_timeout, time.monotonic() + budget
        self.env = dict(os.environ) if env is None else env

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, argv: list[str], env: dict[str, str] | None = None) -> dict:
        timeout = min(self.step_timeout, self.left())
        if timeout <= 1:
            return {"error": "skipped: the run's budget is spent"}
        start = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, *argv], env={**self.env, **(env or {})},
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if proc.returncode != 0:
            return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-1500:]}"}
        lines = proc.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else {"wall_s": time.perf_counter() - start}

    def measurement(self, spec: dict, cache: str) -> dict:
        return self.run([str(Path(__file__)), "--child", json.dumps(spec)], {"TILELANG_CACHE_DIR": cache})

    def import_time(self, module: str, runs: int) -> float | None:
        """Median seconds of ``import <module>`` in new processes, beyond Python's start."""
        walls = {}
        for code in ("pass", f"import {module}"):
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                if "error" in self.run(["-c", code]):
                    return None
                times.append(time.perf_counter() - start)
            walls[code] = statistics.median(times)
        return walls[f"import {module}"] - walls["pass"]


def best_target() -> tuple[object, bool, str | None] | None:
    """(target, runnable, default execution backend) of the GPU here; CUDA sm_90 for code
    generation only when its backend is installed but no GPU is; None otherwise."""
    from tilelang.backend.module import create_backend_context
    from tilelang.backend.registry import REGISTRY
    from tilelang.backend.resolution import ordered_detectors
    from tilelang.errors import TileLangError

    for detector in ordered_detectors():
        spec = detector.detect()
        if isinstance(spec, dict) and spec.get("kind") != "llvm":
            try:
                default = create_backend_context(spec, None, "auto").execution_backend.name
            except TileLangError:
                default = None
            return spec, True, default
    if "cuda" in REGISTRY.backends:
        return {"kind": "cuda", "arch": "sm_90"}, False, None
    return None


def usable_execution_backends(target) -> list[str]:
    """The execution backends the target's backend declares that can run here."""
    from tilelang.backend.module import create_backend_context
    from tilelang.backend.resolution import execution_specs
    from tilelang.errors import TileLangError

    module = create_backend_context(target, None, None).module
    usable = []
    for spec in execution_specs(module):
        try:
            create_backend_context(target, None, spec.name)
        except TileLangError:
            continue
        usable.append(spec.name)
    return usable


def compile_and_hits(steps: Steps, builder: str, target, backend: str, runs: int, gpu: bool = False) -> dict:
    """A cold compile, then ``runs`` hits, then ``runs`` hits after ``import torch``; on a GPU
    also a cold compile (in a cache of its own) after torch made its CUDA context."""
    spec = {"builder": builder, "target": target, "backend": backend}
    out: dict = {}
    if gpu and importlib.util.find_spec("torch") is not None:
        with tempfile.TemporaryDirectory(prefix="tilelang-bench-cache-") as cache:
            out["cold_after_cuda"] = steps.measurement({**spec, "mode": "cold", "preimport": "torch"}, cache)
    with tempfile.TemporaryDirectory(prefix="tilelang-bench-cache-") as cache:
        cold = steps.measurement({**spec, "mode": "cold"}, cache)
        out["cold"] = cold
        if "error" in cold:
            return out
        if cold.get("from_cache"):
            cold["error"] = "the cold process found the kernel in an empty cache"
            return out
        hits, out["hit_error"] = _hits(steps, {**spec, "mode": "hit"}, cache, runs)
        out["hits"] = hits
        if hits:
            out["hit_stages"] = _hit_stages(steps, spec, hits, cache)
        if hits and importlib.util.find_spec("torch") is not None:
            out["hits_after_torch"], _ = _hits(steps, {**spec, "mode": "hit", "preimport": "torch"}, cache, runs)
            if out["hits_after_torch"]:
                out["hit_stages_after_torch"] = _hit_stages(steps, {**spec, "preimport": "torch"},
                                                            out["hits_after_torch"], cache)
    return out


def _hit_stages(steps: Steps, spec: dict, hits: list[dict], cache: str) -> dict:
    """One more hit, in stages (HIT_STAGES), with the packages the plain ``hits`` imported
    imported first; a process that compiled instead (the request key changed) is an error."""
    preload = [p for p in hits[0].get("packages", []) if p not in ("tilelang", spec.get("preimport"))]
    measured = steps.measurement({**spec, "mode": "hit_stages", "preload": preload}, cache)
    if "error" not in measured and not measured.get("from_cache"):
        measured["error"] = "the process compiled instead of hitting the cache"
    return measured


def _hits(steps: Steps, spec: dict, cache: str, runs: int) -> tuple[list[dict], str | None]:
    """``runs`` processes that found the kernel in the cache, and the error that stopped
    them if any. A process that compiled instead saw compiler sources edited meanwhile (a
    checkout others edit; the kernel key changed) and is run again, at most 3 times a hit."""
    hits, attempts = [], 0
    while len(hits) < runs and attempts < 3 * runs:
        attempts += 1
        hit = steps.measurement(spec, cache)
        if "error" in hit:
            return hits, hit["error"]
        if hit["from_cache"]:
            hits.append(hit)
    return hits, None if hits else f"{attempts} processes compiled again instead of hitting the cache"


def summarize(name: str, measured: dict, base: float | None) -> dict:
    cold, hits = measured.get("cold", {}), measured.get("hits", [])
    row = {"name": name, "error": cold.get("error") or measured.get("hit_error")}
    if "total_s" in cold:
        row["cold_s"] = cold["total_s"]
        row["stages"] = cold.get("stages", {})
        torch_import = sum(v for k, v in row["stages"].items() if k.startswith("import torch"))
        row["cold_after_torch_s"] = row["cold_s"] - torch_import  # what a torch program pays
    if hits:
        row["hit_s"] = statistics.median(h["total_s"] for h in hits)
        row["hit_imports"] = sorted({m for h in hits for m in ("tvm", "torch") if h[m]})
    after_cuda = measured.get("cold_after_cuda", {})
    if after_cuda.get("error"):
        row["error"] = "; ".join(filter(None, [row["error"], f"cold after torch's CUDA context: {after_cuda['error']}"]))
    if "total_s" in after_cuda and after_cuda.get("cuda_context"):
        row["cold_after_cuda_s"] = after_cuda["total_s"]
        row["stages_after_cuda"] = after_cuda.get("stages", {})
        row["cuda_context_s"] = after_cuda["preimport_s"]  # import torch + its CUDA context
    for key in ("hit_stages", "hit_stages_after_torch"):
        if "stages" in measured.get(key, {}):
            row[key] = {"total_s": measured[key]["total_s"], "stages": measured[key]["stages"]}
    torch_hits = measured.get("hits_after_torch", [])
    if torch_hits:
        row["hit_after_torch_s"] = statistics.median(h["total_s"] for h in torch_hits)
    for key in ("cold_s", "cold_after_torch_s", "cold_after_cuda_s", "hit_s", "hit_after_torch_s"):
        if key in row and base:
            row[key.replace("_s", "_ratio")] = row[key] / base
    return row


def markdown(results: dict) -> str:
    base = results.get("import_tilelang_s")
    tvm = results.get("import_tvm_s")
    head = (f"`import tilelang`: {base * 1e3:.1f} ms" if base else "`import tilelang`: not measured") + \
        (f"; `import tvm`: {tvm * 1e3:.0f} ms" if tvm else "") + f"; target: {results['device']}; " + \
        f"Python bytecode: {results['bytecode']}\n"
    columns = ("| kernel / execution backend | cold to callable | cold, torch imported before "
               "| cold, torch + CUDA tensor made before | disk hit | hit, torch imported before | hit imports |")
    lines = [head, columns, "|---|---|---|---|---|---|---|"]

    def cell(row, key):
        if key not in row:
            return "-"
        ratio = row.get(key.replace("_s", "_ratio"))
        value = f"{row[key]:.2f} s" if key.startswith("cold") else f"{row[key] * 1e3:.1f} ms"
        return value + (f" ({ratio:.1f}x)" if ratio is not None else "")

    for row in results["rows"]:
        lines.append(f"| {row['name']} | {cell(row, 'cold_s')} | {cell(row, 'cold_after_torch_s')} | "
                     f"{cell(row, 'cold_after_cuda_s')} | {cell(row, 'hit_s')} | {cell(row, 'hit_after_torch_s')} | "
                     f"{', '.join(row.get('hit_imports', [])) or '-'} |")
    for row in results["rows"]:
        if row.get("error"):
            lines.append(f"\n{row['name']}: {row['error']}")
        if row.get("stages"):
            lines.append(f"\n{row['name']}, where the cold compile's {row.get('cold_s', 0):.2f} s went:\n")
            lines += ["| stage | seconds |", "|---|---|"]
            lines += [f"| {stage} | {seconds:.3f} |" for stage, seconds in row["stages"].items()]
        for key, when in (("hit_stages", ""), ("hit_stages_after_torch", ", torch imported before")):
            if row.get(key):
                lines.append(f"\n{row['name']}, a disk hit{when} in stages (a process of its own, "
                             f"{row[key]['total_s'] * 1e3:.1f} ms):\n")
                lines += ["| stage | ms |", "|---|---|"]
                lines += [f"| {stage} | {seconds * 1e3:.2f} |" for stage, seconds in row[key]["stages"].items()]
        if row.get("stages_after_cuda"):
            lines.append(f"\n{row['name']}, the cold compile after torch made its CUDA context "
                         f"(which took {row['cuda_context_s']:.2f} s with torch's import, not counted): "
                         f"{row['cold_after_cuda_s']:.2f} s\n")
            lines += ["| stage | seconds |", "|---|---|"]
            lines += [f"| {stage} | {seconds:.3f} |" for stage, seconds in row["stages_after_cuda"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the best target's GEMM only, 3 hits per backend")
    parser.add_argument("--runs", type=int, help="hits per backend and import samples (default 5; 3 quick)")
    parser.add_argument("--step-timeout", type=float, default=180.0, help="seconds one process may take")
    parser.add_argument("--budget", type=float, help="no step starts after this many seconds (default 1800; 420 quick)")
    parser.add_argument("--bytecode", action="store_true",
                        help="processes cache bytecode in a private folder (as an installed package runs)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--markdown", type=Path, help="write the markdown table here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    runs = args.runs or (3 if args.quick else 5)
    env, pycache = bytecode_environment(args.bytecode)
    steps = Steps(args.step_timeout, args.budget or (420.0 if args.quick else 1800.0), env)
    best = best_target()
    plan = []  # (row name, builder, target, backend or None for code generation only)
    if best is not None:
        target, runnable, default = best
        for backend in usable_execution_backends(target) if runnable else [None]:
            mark = " (default)" if backend is not None and backend == default else ""
            plan.append((f"gemm {target} {backend or 'codegen + device compile'}{mark}", "gemm", target, backend))
    if best is None or not best[1] or not args.quick:
        plan += [(f"cpu_gemm cpu {b}", "cpu_gemm", "cpu", b) for b in usable_execution_backends("cpu")]
    if pycache is not None:  # every module a row imports, compiled once before anything is timed
        for _, builder, target, backend in plan:
            with tempfile.TemporaryDirectory(prefix="tilelang-bench-cache-") as cache:
                mode = "cold" if backend is not None else "codegen"
                steps.measurement({"builder": builder, "target": target, "backend": backend, "mode": mode}, cache)
        steps.run(["-c", "import tvm"])
    results = {"device": f"{best[0]}{'' if best and best[1] else ' not runnable here'}" if best else "CPU only",
               "bytecode": ("cached in a private folder (--bytecode)" if pycache is not None else
                            "not written (PYTHONDONTWRITEBYTECODE): every process compiles from source"
                            if env.get("PYTHONDONTWRITEBYTECODE") else "as the environment caches it"),
               "runs": runs, "import_tilelang_s": steps.import_time("tilelang", runs),
               "import_tvm_s": steps.import_time("tvm", max(1, runs // 2)), "rows": [], "raw": {}}
    base = results["import_tilelang_s"]
    for name, builder, target, backend in plan:
        if backend is None:
            with tempfile.TemporaryDirectory(prefix="tilelang-bench-cache-") as cache:
                measured = {"cold": steps.measurement({"builder": builder, "target": target, "mode": "codegen"},
                                                      cache)}
        else:
            measured = compile_and_hits(steps, builder, target, backend, runs, gpu=builder == "gemm")
        results["raw"][name] = measured
        results["rows"].append(summarize(name, measured, base))
        print(f"[{steps.left():.0f} s of budget left] {name}", file=sys.stderr)
    text = markdown(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.markdown:
        args.markdown.write_text(text)
    print(text)
    if pycache is not None:
        pycache.cleanup()


if __name__ == "__main__":
    main()

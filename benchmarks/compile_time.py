"""Where a compile's seconds go, and how fast a cached kernel comes back in a new process.

    python benchmarks/compile_time.py [--runs 5] [--json results.json]

1. Stages, in this process (stage, seconds): the canonical GEMM (8192^3 fp16, 128x128x32
   tiles, 3 stages) on the best target here — the GPU's, else CUDA sm_90 lowered here and
   compiled by the CUDA toolchain (NVRTC, else nvcc) when tilelang-cuda is installed — and
   a CPU GEMM (fp32 1024^3, T.gemm) for each CPU execution backend. Stages: building the
   IR (TVMScript), the backend context, the engine's stages (lowering,
   host/device split, device codegen, host codegen), the device compile, the execution
   backend's host build, and the load (tvm_ffi compiles CUDA source as it loads the
   module: its device compile is in "load"). Nothing is read from a cache (a private, empty one).
   Importing TVM (which a first compile in a process pays) is measured in new processes.
2. New processes, as ratios to ``import tilelang`` measured in the same run: a cold compile
   (empty cache) to a callable kernel, then a disk-cache hit to a callable kernel, for every
   kernel this machine can run, with each execution backend. The builders import
   ``tilelang.language`` inside their bodies: ``import tilelang.language`` imports TVM
   (1-2 s), which a kernel module importing it at its top pays on a hit too.
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

HERE = Path(__file__).resolve().parent
GEMM = {"M": 8192, "N": 8192, "K": 8192}
CPU_GEMM = {"M": 1024, "N": 1024, "K": 1024}


def gemm(M, N, K, bM=128, bN=128, bK=32, threads=128, num_stages=3, dtype="float16", accum_dtype="float32"):
    """The canonical GEMM (examples/gemm.py), with the language imported on first build."""
    import tilelang.language as T

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


# -- 1. stages in this process --------------------------------------------------------
def stages(builder, sizes: dict, target, execution_backend: str | None) -> dict[str, float]:
    """(stage -> seconds) of one compile; execution_backend None: code generation plus the
    device compile only (a target this machine cannot run)."""
    from tilelang.backend.module import create_backend_context
    from tilelang.engine.lower import lower
    from tilelang.plugin import compile_device_source

    times: dict[str, float] = {}
    start = time.perf_counter()
    func = builder(**sizes)
    times["build IR (TVMScript)"] = time.perf_counter() - start
    start = time.perf_counter()
    context = create_backend_context(target, None, execution_backend, kernel=func)
    times["backend context"] = time.perf_counter() - start
    artifact = lower(func, context, out_idx=[-1], timings=times)
    backend = context.execution_backend
    # tvm_ffi compiles embedded device source when it loads the module (see "load")
    if artifact.device_source and (backend is None or backend.name != "tvm_ffi"):
        start = time.perf_counter()
        compile_device_source(artifact, context, "benchmark")
        times["device compile"] = time.perf_counter() - start
    if backend is None:
        return times
    start = time.perf_counter()
    files = backend.build(artifact, context)
    times["host build"] = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        for name, data in files.items():
            (Path(folder) / name).write_bytes(data)
        start = time.perf_counter()
        backend.load(artifact, Path(folder), context)  # tvm_ffi + CUDA: the device compile is here
        times["load"] = time.perf_counter() - start
    return times


def gpu_target() -> tuple[object, bool] | None:
    """(target, runnable): the GPU here, or CUDA sm_90 for code generation; None without
    a GPU backend."""
    from tilelang.backend.registry import REGISTRY
    from tilelang.backend.resolution import ordered_detectors

    for detector in ordered_detectors():
        spec = detector.detect()
        if spec is not None and isinstance(spec, dict) and spec.get("kind") != "llvm":
            return spec, True
    if "cuda" in REGISTRY.backends:
        return {"kind": "cuda", "arch": "sm_90"}, False
    return None


# -- 2. new processes -----------------------------------------------------------------
CHILD = """
import json, sys, time
{preimport}
start = time.perf_counter()
import tilelang
imported = time.perf_counter()
sys.path.insert(0, {here!r})
import compile_time
kernel_fn = tilelang.jit(out_idx=[-1], target={target!r}, execution_backend={backend!r})(
    compile_time.BUILDERS[{builder!r}])
defined = time.perf_counter()
kernel = kernel_fn(**{sizes!r})
done = time.perf_counter()
print(json.dumps({{"import": imported - start, "kernel": done - defined, "from_cache": kernel.from_cache,
                  "tvm": "tvm" in sys.modules, "torch": "torch" in sys.modules}}))
"""


def child(cache: str, **fields) -> dict:
    env = {**os.environ, "TILELANG_CACHE_DIR": cache}
    proc = subprocess.run([sys.executable, "-c", CHILD.format(here=str(HERE), **fields)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def import_time(module: str, runs: int) -> float:
    """Median seconds of ``import <module>`` in new processes, beyond Python's own start."""
    return statistics.median(_run_python(f"import {module}") for _ in range(runs)) - \
        statistics.median(_run_python("pass") for _ in range(runs))


def _run_python(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def new_process(builder: str, sizes: dict, target, backend: str, runs: int) -> dict:
    """A cold compile, then hits: in a bare process, and in one that imported torch first
    (a torch program; tvm_ffi's own import loads torch when it is installed)."""
    with tempfile.TemporaryDirectory(prefix="tilelang-bench-cache-") as cache:
        fields = {"builder": builder, "sizes": sizes, "target": target, "backend": backend, "preimport": ""}
        cold = child(cache, **fields)
        if cold["from_cache"]:
            raise RuntimeError(f"{builder}/{backend}: the first process found the kernel in an empty cache")
        hits = _hits(cache, fields, runs)
        torch_hits = []
        if importlib.util.find_spec("torch") is not None:
            torch_hits = _hits(cache, {**fields, "preimport": "import torch"}, runs)
    return {"cold_s": cold["kernel"], "hit_s": statistics.median(h["kernel"] for h in hits),
            "hit_after_torch_s": statistics.median(h["kernel"] for h in torch_hits) if torch_hits else None,
            "hit_imports_tvm": any(h["tvm"] for h in hits), "hit_imports_torch": any(h["torch"] for h in hits)}


def _hits(cache: str, fields: dict, runs: int) -> list[dict]:
    """``runs`` processes that found the kernel in the cache. A process that compiled instead
    saw edited compiler sources (a checkout others are editing) and is run again."""
    hits = []
    for _ in range(3 * runs):
        result = child(cache, **fields)
        if result["from_cache"]:
            hits.append(result)
            if len(hits) == runs:
                return hits
    raise RuntimeError(f"{fields['builder']}/{fields['backend']}: {3 * runs} processes, {len(hits)} cache hits")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    os.environ["TILELANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="tilelang-bench-stages-")
    import tilelang.language  # noqa: F401 - imports TVM: measured in new processes, not as a stage
    results: dict = {"stages": {}, "new_process": {}}
    gpu = gpu_target()
    if gpu is not None:
        target, runnable = gpu
        name = f"gemm {target} ({'default execution backend' if runnable else 'codegen + toolchain only'})"
        results["stages"][name] = stages(gemm, GEMM, target, "auto" if runnable else None)
    for backend in usable_execution_backends("cpu"):
        results["stages"][f"cpu_gemm {backend}"] = stages(cpu_gemm, CPU_GEMM, "cpu", backend)
    base = import_time("tilelang", args.runs)
    results["import_tilelang_s"] = base
    results["import_tvm_s"] = import_time("tvm", args.runs)
    runs = [("cpu_gemm", CPU_GEMM, "cpu", b) for b in usable_execution_backends("cpu")]
    if gpu is not None and gpu[1]:
        runs[:0] = [("gemm", GEMM, "auto", b) for b in ["auto", *usable_execution_backends(gpu[0])]]
    for builder, sizes, target, backend in runs:
        measured = new_process(builder, sizes, target, backend, args.runs)
        measured["cold_ratio"] = measured["cold_s"] / base
        measured["hit_ratio"] = measured["hit_s"] / base
        results["new_process"][f"{builder} {target} {backend}"] = measured
    for name, times in results["stages"].items():
        print(f"\n{name}: {sum(times.values()):.3f} s")
        for stage, seconds in times.items():
            print(f"  {stage:<24} {seconds:8.3f}")
    print(f"\nimport tilelang (beyond Python's start): {base * 1e3:.1f} ms; import tvm: "
          f"{results['import_tvm_s'] * 1e3:.0f} ms (a cold compile imports it)")
    for name, m in results["new_process"].items():
        after_torch = m["hit_after_torch_s"]
        print(f"{name}: cold {m['cold_s']:.3f} s ({m['cold_ratio']:.1f}x import), hit {m['hit_s'] * 1e3:.1f} ms "
              f"({m['hit_ratio']:.2f}x import; imports tvm: {m['hit_imports_tvm']}, torch: {m['hit_imports_torch']})"
              + (f", hit in a torch program {after_torch * 1e3:.1f} ms ({after_torch / base:.2f}x import)"
                 if after_torch is not None else ""))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""A 16-configuration GEMM autotune (fp16, examples/gemm.py's kernel) on one GPU with the
local executor, then the same tune through Ray (tilelang.autotuner.RayExecutor) on every GPU
of the host: the wall time of each, their ratio, and whether the two agree on the best
configuration (issue 14, item 5: the target is a ratio <= 0.6 on two GPUs, same best).

Each tune starts cold: its own kernel cache, tuning cache and (for Ray) workers' cache, so
that both compile all 16 configurations and time them. The Ray cluster is started (or
connected to: --address, or TILELANG_RAY_ADDRESS) before the clock starts; its start time
is printed apart. Needs only what tilelang[cuda,ray] brings (ray, torch); no network. On
an offline host Ray comes as wheels, e.g. for Python 3.12 (79 MB, ray's own 76 MiB):
    pip download 'ray==2.60.0' --only-binary=:all: --python-version 3.12 \
        --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d wheels/

Usage: python benchmarks/autotune_ray.py [--size 8192] [--warmup 25] [--rep 100]
                                         [--no-pipeline] [--address auto] [--json out.json]
                                         [--local-workers N ...] [--compile-cpus C] [--bytecode]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import tilelang
import torch
from bytecode import use_private_bytecode
from tilelang.autotuner import AutoTuner, LocalExecutor, RayExecutor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from gemm import matmul  # examples/ is not a package: on the path above

# (bM, bN, bK, threads, num_stages, panel): 2-warpgroup and 1-warpgroup tiles, two K steps,
# 3 and 4 stages, with and without rasterization (all fit the H200's 227 KB of shared memory)
TILES = [(128, 128, 32, 128), (128, 128, 64, 128), (128, 256, 64, 256), (256, 128, 64, 256)]
CONFIGS = [{"bM": m, "bN": n, "bK": k, "threads": t, "num_stages": s, "panel": p}
           for (m, n, k, t) in TILES for s in (3, 4) for p in (0, 8)]


def _reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


class Timeline:
    """An executor as the tuner sees it, noting when each compiled configuration reaches the
    tuning process (seconds from the tune's start): what bounds a tune, compiling or timing."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.arrivals: list[float] = []
        self.start = time.perf_counter()

    def compile(self, job):
        self.start = time.perf_counter()
        for outcome in self.inner.compile(job):
            self.arrivals.append(time.perf_counter() - self.start)
            yield outcome

    def measure(self, job, outcomes):
        return self.inner.measure(job, outcomes)

    def summary(self) -> dict:
        got = sorted(self.arrivals)
        return {"first_compiled_s": got[0], "median_compiled_s": got[len(got) // 2], "last_compiled_s": got[-1]} \
            if got else {}


def cache_bytecode(folder: Path) -> None:
    """Every process started from here on (compile workers, the Ray cluster's) reads and
    writes bytecode in ``folder`` (bytecode.py says why); one throwaway process warms it
    before the clock."""
    use_private_bytecode(os.environ, str(folder))
    examples = str(Path(__file__).resolve().parent.parent / "examples")
    warm = "import sys; sys.path.insert(0, sys.argv[1]); import torch, tvm, tilelang.autotuner, gemm, ray"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", warm, examples], check=True)
    print(f"bytecode cached in {folder} (warmed in {time.perf_counter() - start:.1f} s)")


def warm_driver() -> None:
    """What this process needs once, made before either clock. The local tune times its
    configurations here, so it would pay this process's first ``import tvm``, CUDA context
    and cuBLAS handle (seconds where bytecode is not cached), and it runs first. Ray's
    actors make their own, inside Ray's time."""
    import tvm  # noqa: F401  (through tilelang's import hook, as a tune imports it)

    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    _reference(a, a)
    torch.cuda.synchronize()


def tune(executor, size: int, warmup: int, rep: int, pipeline: bool, cache_dir: str) -> tuple[float, object]:
    # a fresh cache root: this process's kernels, cubins and tuning results; the local
    # pool's workers are handed it too
    tilelang.env.TILELANG_CACHE_DIR = cache_dir
    tuner = AutoTuner(matmul, CONFIGS, args=(size, size, size), executor=executor)
    # fp16 outputs of K-long fp32 sums: 1e-2 relative plus 0.1 absolute near zero
    tuner.set_profile_args(ref_prog=_reference, rtol=1e-2, atol=1e-1)
    start = time.perf_counter()
    result = tuner.run(warmup=warmup, rep=rep, use_pipeline=pipeline)
    return time.perf_counter() - start, result


def _row(name: str, seconds: float, result, timeline: Timeline) -> dict:
    latencies = {json.dumps(t.config, sort_keys=True): t.latency for t in result.trials if t.ok}
    top = sorted(latencies.items(), key=lambda kv: kv[1])[:3]
    workers = Counter(t.measured_on or "this process" for t in result.trials if t.ok)
    failed = [(t.config, t.stage, (t.error or "").splitlines()[0]) for t in result.trials if not t.ok]
    flops = 2 * ARGS.size ** 3
    print(f"{name}: {seconds:.1f} s; best {result.config}: {result.latency:.4f} ms "
          f"({flops / result.latency / 1e9:.0f} TFLOP/s)")
    for config, latency in top:
        print(f"    {latency:.4f} ms  {config}")
    for worker, count in sorted(workers.items()):
        print(f"    measured on {worker}: {count} configs")
    for config, stage, error in failed:
        print(f"    FAILED {config} ({stage}): {error}")
    compiled = timeline.summary()
    if compiled:
        print("    compiled configurations reached the tuner at {first_compiled_s:.1f} s (first), "
              "{median_compiled_s:.1f} s (median), {last_compiled_s:.1f} s (last)".format(**compiled))
    return {"seconds": seconds, **compiled, "best": result.config, "best_ms": result.latency, "latencies": latencies,
            "measured_on": dict(workers), "failed": [list(f) for f in failed]}


def main() -> int:
    if not torch.cuda.is_available():
        print("autotune_ray: no CUDA GPU here (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="tilelang-autotune-ray-"))
    if ARGS.bytecode:
        cache_bytecode(root / "pycache")
    warm_driver()
    report: dict = {"size": ARGS.size, "warmup": ARGS.warmup, "rep": ARGS.rep, "pipeline": ARGS.pipeline,
                    "configs": len(CONFIGS), "gpus_visible": torch.cuda.device_count()}
    try:
        import ray

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # the host is offline: nothing to report to
        executor = RayExecutor(ARGS.address, worker_cache_dir=str(root / "ray-workers"), compile_cpus=ARGS.compile_cpus)
        start = time.perf_counter()
        executor.connect()
        report["ray_start_s"] = time.perf_counter() - start
        report["ray_resources"] = {k: v for k, v in ray.cluster_resources().items() if k in ("CPU", "GPU")}
        print(f"{len(CONFIGS)} configs, GEMM fp16 {ARGS.size}^3, warmup {ARGS.warmup}, rep {ARGS.rep}, "
              f"pipeline {ARGS.pipeline}; Ray {ray.__version__}: {report['ray_resources']}, "
              f"started/connected in {report['ray_start_s']:.1f} s")

        timeline = Timeline(LocalExecutor())
        seconds, local = tune(timeline, ARGS.size, ARGS.warmup, ARGS.rep, ARGS.pipeline, str(root / "local"))
        report["local"] = _row(f"local (1 GPU, {torch.cuda.get_device_name(0)})", seconds, local, timeline)
        for run, workers in enumerate(ARGS.local_workers):  # the same local tune, other compile pools
            timeline = Timeline(LocalExecutor(max_workers=workers))
            seconds, capped = tune(timeline, ARGS.size, ARGS.warmup, ARGS.rep, ARGS.pipeline,
                                   str(root / f"local-{run}"))  # cold too: a folder of its own
            report[f"local_{run}_{workers}_workers"] = _row(f"local, at most {workers} compile workers", seconds,
                                                            capped, timeline)
        timeline = Timeline(executor)
        seconds, remote = tune(timeline, ARGS.size, ARGS.warmup, ARGS.rep, ARGS.pipeline, str(root / "ray"))
        report["ray"] = _row(f"ray ({int(report['ray_resources'].get('GPU', 0))} GPUs)", seconds, remote, timeline)
    finally:
        tilelang.env.TILELANG_CACHE_DIR = None
        if not ARGS.keep:
            shutil.rmtree(root, ignore_errors=True)

    ratio = report["ray"]["seconds"] / report["local"]["seconds"]
    agree = remote.config == local.config
    # when they differ: how far apart the two bests are in each run (noise between near-equal tiles)
    local_ms = report["local"]["latencies"]
    gap = local_ms.get(json.dumps(remote.config, sort_keys=True), float("nan")) / local.latency - 1
    report.update(ratio=ratio, best_agree=agree, local_gap_of_ray_best=gap)
    print(f"ratio ray/local: {ratio:.2f} (target <= 0.60); best configs agree: {'yes' if agree else 'no'}"
          + ("" if agree else f" (ray's best is {gap * 100:+.1f}% slower than local's best in the local run)"))
    if ARGS.json:
        Path(ARGS.json).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--warmup", type=int, default=25)
    parser.add_argument("--rep", type=int, default=100)
    parser.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                        help="time configurations after all compiled (default: as each compiles)")
    parser.add_argument("--address", default=None, help="a Ray cluster to use (default: start a local one)")
    parser.add_argument("--local-workers", type=int, nargs="*", default=[], metavar="N",
                        help="also time the local tune with at most N compile processes (each N given; the "
                             "default pool of a pipelined tune has half the CPUs, at least 2)")
    parser.add_argument("--compile-cpus", type=float, default=1, help="CPUs each Ray compile task reserves")
    parser.add_argument("--bytecode", action="store_true",
                        help="the workers cache Python bytecode in a private folder (see cache_bytecode)")
    parser.add_argument("--keep", action="store_true", help="keep the caches (printed folder)")
    parser.add_argument("--json", default=None)
    ARGS = parser.parse_args()
    sys.exit(main())

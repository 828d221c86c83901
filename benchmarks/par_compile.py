"""Cold compiles of many kernels: ``tilelang.par_compile`` against the same kernels compiled
one after another, in one process.

    python benchmarks/par_compile.py [--count 24] [--workers N] [--target auto] [--json out.json]

The kernels are distinct (every one a kernel-cache miss: each run has an empty cache of its
own, and the two runs' shapes differ): GEMMs of several tile shapes, flash attention,
row-wise RMS norm and element-wise adds, in turn, from ``tilelang.testing.kernels``. The
RMS norm is upstream's one row a block, whose TVMScript text does not read back as itself
(tilelang.jit.func_text): those kernels compile in this process in both runs, as a user's
mix of kernels may. The serial run is ``tilelang.compile`` of each kernel; the parallel run is
``tilelang.par_compile(kernels, num_workers=N)`` (default: one worker per CPU). The ratio
is the parallel time over the serial time (lower is better); both include building the
PrimFuncs. On a machine without a GPU the target is the CPU's and the GPU kernels are left
out. The CPU count bounds what parallel compiles can gain; the line printed says how many
kernels the workers compiled.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any


def zoo(count: int, salt: int, gpu: bool) -> list[Callable[[], Any]]:
    """``count`` builders of distinct kernels; ``salt`` shifts every shape."""
    from tilelang.testing import kernels

    rows = 128 * (1 + salt)
    makers: list[Callable[[int], Callable[[], Any]]] = [
        lambda i: lambda: kernels.rms_norm_rows(rows + 8 * i, 1024 + 256 * (i % 4), blk_m=1),
        lambda i: lambda: kernels.elementwise_add(rows + 8 * i, 512),
    ]
    if gpu:
        makers += [
            lambda i: lambda: kernels.tile_gemm(rows * 2 + 64 * i, 1024, 1024, bM=128, bN=128, bK=32, stages=3,
                                                threads=128),
            lambda i: lambda: kernels.tile_gemm(rows * 2 + 64 * i, 2048, 512, bM=64, bN=64, bK=32, stages=2,
                                                threads=128),
            lambda i: lambda: kernels.flash_attention(1, 8, rows * 2 + 64 * i, 128 if i % 2 else 64),
        ]
    else:
        makers += [lambda i: lambda: kernels.tiled_matmul(rows + 16 * i, 128, 128)]
    return [makers[i % len(makers)](i // len(makers)) for i in range(count)]


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    with tempfile.TemporaryDirectory(prefix="tl-par-compile-") as cache:
        os.environ["TILELANG_CACHE_DIR"] = cache  # an empty cache: every kernel is compiled
        start = time.perf_counter()
        done = run()
        return time.perf_counter() - start, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=24, help="kernels per run")
    parser.add_argument("--workers", type=int, default=None, help="par_compile's num_workers (default: one per CPU)")
    parser.add_argument("--target", default="auto")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()

    import tilelang
    from tilelang.autotuner.compile_pool import available_cpus
    from tilelang.backend.module import create_backend_context

    context = create_backend_context(args.target, None, "auto")
    gpu = context.target.kind.name != "c" and context.target.kind.name != "llvm"
    target = context.target
    warm = zoo(1, 9, gpu)[0]()
    tilelang.compile(warm, target=target)  # the imports and first-use costs, out of both runs

    def serial() -> None:
        for build in zoo(args.count, 0, gpu):
            tilelang.compile(build(), target=target)

    def parallel() -> list[Any]:
        return tilelang.par_compile([build() for build in zoo(args.count, 1, gpu)], num_workers=args.workers,
                             target=target)

    one_by_one, _ = timed(serial)
    pooled, kernels = timed(parallel)
    # a kernel a worker compiled is a kernel-cache hit here
    from_workers = sum(kernel.from_cache for kernel in kernels)
    workers = args.workers or min(args.count, available_cpus())
    result = {"target": str(target.kind.name), "kernels": args.count, "cpus": available_cpus(),
              "workers": workers, "serial_s": round(one_by_one, 2), "par_compile_s": round(pooled, 2),
              "ratio": round(pooled / one_by_one, 3), "from_workers": from_workers}
    print(f"# {args.count} distinct cold kernels for {result['target']}, {result['cpus']} CPUs, "
          f"{workers} workers ({from_workers} kernels compiled by them)")
    print(f"one after another  {one_by_one:8.2f} s")
    print(f"par_compile        {pooled:8.2f} s   ratio {pooled / one_by_one:.2f} "
          f"(speedup {one_by_one / pooled:.2f}x)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()

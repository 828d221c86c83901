"""TileLang CPU elementwise add on 2^24 float32 against numpy, in the same process.

Prints the throughput of each and the ratio tilelang/numpy (higher is better; the
foundation issue aims for >= 0.8). Usage: python benchmarks/cpu_elementwise.py [--n 16777216]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import tilelang
import tilelang.language as T


@tilelang.jit(target="cpu")
def add(n: int, block: int):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=1) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


def median_seconds(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--block", type=int, default=1 << 16)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    a = np.random.rand(args.n).astype("float32")
    b = np.random.rand(args.n).astype("float32")
    out_np = np.empty_like(a)
    out_tl = np.empty_like(a)
    kernel = add(args.n, args.block)
    kernel(a, b, out_tl)
    np.testing.assert_allclose(out_tl, a + b, rtol=1e-6)
    # both write into a preallocated output: the comparison is of the loops, not of malloc
    t_tl = median_seconds(lambda: kernel(a, b, out_tl), args.repeat)
    t_np = median_seconds(lambda: np.add(a, b, out=out_np), args.repeat)
    gbytes = 3 * args.n * 4 / 1e9
    result = {
        "n": args.n,
        "tilelang_ms": round(t_tl * 1e3, 3),
        "numpy_ms": round(t_np * 1e3, 3),
        "tilelang_GBps": round(gbytes / t_tl, 2),
        "numpy_GBps": round(gbytes / t_np, 2),
        "ratio_tilelang_over_numpy": round(t_np / t_tl, 3),
        "kernel": kernel.describe(),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

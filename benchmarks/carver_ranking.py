"""Does the carver's ranking find fast tiles? The CPU GEMM of benchmarks/cpu_gemm.py (float32,
512^3 by default), compiled for tiles the carver ranks for this CPU
(``MatmulTemplate(...).with_arch(get_arch("cpu")).recommend_hints``): the best-ranked, some
from the middle and the worst of the ranking, each timed (median of rounds, in this
process) and checked against numpy.

Prints each tile's rank, cost and time, Spearman's rank correlation between cost and time
(1: the ranking orders the tiles as their times do), and the fastest time of all tiles
timed over the fastest among the best-ranked ``--sample`` (1.0: those hold the fastest).
Usage: python benchmarks/carver_ranking.py [--size 512] [--sample 4] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from pathlib import Path

import numpy as np
from tilelang import carver
from tilelang.carver.arch import get_arch

_GEMM = Path(__file__).with_name("cpu_gemm.py")


def _kernel_builder():
    spec = importlib.util.spec_from_file_location("_cpu_gemm", _GEMM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.matmul


def _spearman(xs: list[float], ys: list[float]) -> float:
    def ranks(values: list[float]) -> list[int]:
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0] * len(values)
        for rank, index in enumerate(order):
            out[index] = rank
        return out

    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    return 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--sample", type=int, default=4, help="tiles from each of the top, middle and bottom")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    n = args.size
    arch = get_arch("cpu")
    hints = carver.MatmulTemplate(M=n, N=n, K=n, in_dtype="float32", out_dtype="float32",
                                  accum_dtype="float32").with_arch(arch).recommend_hints(topk=10_000)
    tiles, seen = [], set()
    for rank, hint in enumerate(hints):  # the kernel reads block and rstep only
        key = (hint.block[0], hint.block[1], hint.rstep[0])
        if key not in seen and min(key) >= 8:
            seen.add(key)
            tiles.append((rank, hint.cost, key))
    k = args.sample
    middle = len(tiles) // 2
    chosen = tiles[:k] + tiles[middle - k // 2: middle - k // 2 + k] + tiles[-k:]
    matmul = _kernel_builder()
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    want = a @ b
    rows = []
    for rank, cost, (bm, bn, bk) in chosen:
        kernel = matmul(n, n, n, bm, bn, bk)
        c = np.zeros((n, n), np.float32)
        kernel(a, b, c)
        np.testing.assert_allclose(c, want, rtol=1e-3, atol=1e-3 * np.sqrt(n))
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            kernel(a, b, c)
            times.append(time.perf_counter() - start)
        rows.append({"rank": rank, "cost": cost, "block_M": bm, "block_N": bn, "block_K": bk,
                     "ms": statistics.median(times) * 1e3})
    rho = _spearman([r["cost"] for r in rows], [r["ms"] for r in rows])
    top = min(r["ms"] for r in rows[:k])
    best = min(r["ms"] for r in rows)
    if args.json:
        print(json.dumps({"size": n, "arch": arch.name, "tiles": rows, "spearman": rho, "best_over_top": best / top}))
        return
    print(f"{arch.name}: {len(tiles)} distinct tiles ranked for a {n}^3 float32 GEMM; timed {len(rows)}")
    for r in rows:
        print(f"  rank {r['rank']:5d}  cost {r['cost']:12.0f}  block {r['block_M']:4d} x {r['block_N']:4d} "
              f"x {r['block_K']:4d}  {r['ms']:8.2f} ms")
    print(f"spearman(cost, time) = {rho:.2f}; fastest of the top {k} / fastest timed = {best / top:.2f}")


if __name__ == "__main__":
    main()

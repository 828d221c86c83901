"""Median wall time of `import tilelang` over `import tvm`, each in fresh processes.

`import tilelang` loads plugin manifests only (no TVM, no SDK), so the ratio should stay
at or below 1.1. Usage: python benchmarks/import_time.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def time_import(module: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    t_python = time_import("sys", args.runs)
    t_tvm = time_import("tvm", args.runs)
    t_tilelang = time_import("tilelang", args.runs)
    t_language = time_import("tilelang.language", args.runs)
    print(json.dumps({
        "runs": args.runs,
        "python_startup_s": round(t_python, 3),
        "import_tvm_s": round(t_tvm, 3),
        "import_tilelang_s": round(t_tilelang, 3),
        "import_tilelang_language_s": round(t_language, 3),
        "ratio_tilelang_over_tvm": round(t_tilelang / t_tvm, 3),
        "ratio_tilelang_language_over_tvm": round(t_language / t_tvm, 3),
    }, indent=1))


if __name__ == "__main__":
    main()

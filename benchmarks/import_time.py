"""Median wall time of `import tilelang` over `import tvm`, each in fresh processes.

`import tilelang` loads plugin manifests only (no TVM, no SDK), so the ratio should stay
at or below 1.1. `tvm_ffi` (a cold compile's and a tvm_ffi disk hit's first import) and
`ml_dtypes` (which tvm_ffi imports; architecture note 49) are timed on their own too.

The processes read and write bytecode in a private folder, warmed by one throwaway import of
each module (bytecode.py says why); ``--source`` keeps this environment's settings instead.

Usage: python benchmarks/import_time.py [--runs 15] [--source]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from bytecode import bytecode_environment


def time_import(module: str, runs: int, env: dict[str, str]) -> float:
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=env)  # warms the bytecode
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=env)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--source", action="store_true",
                        help="inherit this environment's bytecode settings (PYTHONDONTWRITEBYTECODE: from source)")
    args = parser.parse_args()
    env, pycache = bytecode_environment(not args.source)
    t_python = time_import("sys", args.runs, env)
    t_tvm = time_import("tvm", args.runs, env)
    t_tilelang = time_import("tilelang", args.runs, env)
    t_language = time_import("tilelang.language", args.runs, env)
    t_tvm_ffi = time_import("tvm_ffi", args.runs, env)
    t_ml_dtypes = time_import("ml_dtypes", args.runs, env)
    print(json.dumps({
        "runs": args.runs,
        "bytecode": "from source (--source)" if pycache is None else "cached in a private folder",
        "python_startup_s": round(t_python, 3),
        "import_tvm_s": round(t_tvm, 3),
        "import_tilelang_s": round(t_tilelang, 3),
        "import_tilelang_language_s": round(t_language, 3),
        "import_tvm_ffi_s": round(t_tvm_ffi, 3),
        "import_ml_dtypes_s": round(t_ml_dtypes, 3),
        "ratio_tilelang_over_tvm": round(t_tilelang / t_tvm, 3),
        "ratio_tilelang_language_over_tvm": round(t_language / t_tvm, 3),
    }, indent=1))


if __name__ == "__main__":
    main()

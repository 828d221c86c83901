"""GEMM (fp16 in, fp32 accumulate) with the upstream-style tile kernel, against torch.mm in
the same process, with a correctness check: TFLOP/s and the ratio to torch.

Configs: the canonical 128x128x32 / 128 threads / 3 stages and a few others; the best is
reported. Usage: python benchmarks/matmul.py [--sizes 4096 8192] [--json out]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

import tilelang

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from cuda_timing import time_ms  # noqa: E402
from gemm import matmul  # noqa: E402 - the example is the kernel under test

CONFIGS = [(128, 128, 32), (64, 64, 32), (128, 64, 32)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        flop = 2 * n**3
        t_torch = time_ms(lambda: torch.mm(a, b), repeat=5, inner=2)
        row = {"n": n, "torch_TFLOPs": round(flop / t_torch / 1e9, 1), "tilelang": []}
        reference = torch.mm(a, b).float()
        for bm, bn, bk in CONFIGS:
            kernel = tilelang.compile(matmul.builder(n, n, n, bm, bn, bk), out_idx=[-1], target="cuda")
            c = kernel(a, b)
            err = (c.float() - reference).abs().max().item()
            t = time_ms(lambda: kernel(a, b), repeat=5, inner=2)
            row["tilelang"].append({"config": f"{bm}x{bn}x{bk}", "TFLOPs": round(flop / t / 1e9, 2),
                                    "ratio_vs_torch": round(t_torch / t, 4), "max_abs_err": round(err, 3)})
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

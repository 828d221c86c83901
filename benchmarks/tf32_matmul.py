"""float32 GEMM on TF32 tensor cores, as upstream's T.gemm computes float32 operands,
against cuBLAS's TF32 GEMM (torch.mm with ``torch.backends.cuda.matmul.allow_tf32``) in the
same process: TFLOP/s and the ratio. Two layouts: "tn" (A as [n][k], B as [n][k], C = A B^T:
both K-major, wgmma on sm_90) and "nn" (B as [k][n], upstream's plain GEMM: mma.sync with
B's fragments read a word at a time). The kernel with ``tl.disable_tf32`` (float32 on the
SIMT path) and cuBLAS in full float32 are timed beside them for scale.

Correctness: every element within TF32's bound of the float64 product, 2^-9 (|A| |B|^T)
(each operand rounded or truncated to 10 mantissa bits) plus float32's sums. wgmma reads
the float32 in shared memory as TF32 by dropping the low 13 bits, as upstream's kernels do;
cuBLAS rounds, so its largest error (reported) is about half of the kernel's.

Usage: python benchmarks/tf32_matmul.py [--sizes 4096 8192] [--json out]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tilelang
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from cuda_timing import paired_ms
from tilelang.errors import TileLangError
from tilelang.testing.kernels import tile_gemm

# layout, (bM, bN, bK, threads, stages, rasterization panel), pass configs
CONFIGS = [
    ("tn", (128, 256, 32, 256, 3, 8), {}),
    ("tn", (128, 256, 16, 256, 4, 8), {}),
    ("tn", (256, 128, 32, 256, 3, 8), {}),
    ("tn", (128, 128, 32, 128, 4, 8), {}),
    ("tn", (128, 128, 32, 128, 3, 8), {"tl.disable_wgmma": True}),  # mma.sync m16n8k8 on sm_90
    ("nn", (128, 128, 32, 128, 3, 8), {}),
    ("nn", (128, 128, 32, 256, 3, 8), {}),
    ("nn", (128, 256, 32, 256, 3, 8), {}),
    ("nn", (64, 128, 32, 128, 4, 8), {}),
    ("tn", (128, 128, 32, 256, 2, 8), {"tl.disable_tf32": True}),  # float32 on the SIMT path
]


def cublas(a: torch.Tensor, b: torch.Tensor, tf32: bool) -> torch.Tensor:
    """A B^T (B as [n][k]), as the "tn" kernels compute it; the "nn" ones get B^T, a view."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        return torch.mm(a, b.T)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float32)
        b = torch.randn(n, n, device="cuda", dtype=torch.float32)
        exact = a.double() @ b.double().T
        bound = 2.0 ** -9 * (a.double().abs() @ b.double().abs().T) + 1e-4
        cublas_err = (cublas(a, b, True).double() - exact).abs().max().item()
        flop = 2 * n ** 3
        row = {"n": n, "cublas_tf32_max_err": cublas_err, "tilelang": []}
        b_kn = b.T.contiguous()  # B as [k][n] for the "nn" kernels
        for layout, config, options in CONFIGS:
            bm, bn, bk, threads, stages, panel = config
            label = f"{layout}/{bm}x{bn}x{bk}/t{threads}/s{stages}/p{panel}" + \
                "".join(f"/{k.split('.')[1]}" for k in options)
            operand = b if layout == "tn" else b_kn
            try:
                kernel = tilelang.compile(tile_gemm(n, n, n, bm, bn, bk, False, layout == "tn", dtype="float32",
                                                    stages=stages, threads=threads, panel=panel),
                                          out_idx=[-1], target="cuda", pass_configs=options or None)
                c = kernel(a, operand)
            except TileLangError as err:
                row["tilelang"].append({"config": label, "error": str(err).splitlines()[0][:300]})
                print(json.dumps({"n": n, **row["tilelang"][-1]}), flush=True)
                continue
            err = (c.double() - exact).abs()
            within = bool((err <= bound).all())
            err = err.max().item()
            reference = "cublas_fp32" if "tl.disable_tf32" in options else "cublas_tf32"
            tf32 = reference == "cublas_tf32"
            t, t_ref = paired_ms(lambda k=kernel, a=a, b=operand: k(a, b), lambda a=a, b=b, tf32=tf32: cublas(a, b, tf32),
                                 repeat=7, inner=2)
            entry = {"config": label, "TFLOPs": round(flop / t / 1e9, 1), "reference": reference,
                     "reference_TFLOPs": round(flop / t_ref / 1e9, 1), "ratio": round(t_ref / t, 3),
                     "max_err": err, "correct": within}
            row["tilelang"].append(entry)
            print(json.dumps({"n": n, **entry}), flush=True)
        for layout in ("tn", "nn"):
            candidates = [e for e in row["tilelang"] if e.get("correct") and e["reference"] == "cublas_tf32"
                          and e["config"].startswith(layout)]
            if candidates:
                row[f"best_{layout}"] = max(candidates, key=lambda e: e["TFLOPs"])
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "tilelang"}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

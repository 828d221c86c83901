"""The same kernels on both CUDA paths in one run: tilelang-cuda (target="cuda") and
tilelang-cutedsl (target="cutedsl"): kernel time of each, the ratio cuda/cutedsl (above 1:
cutedsl is faster) and a correctness check of each against torch. Families: GEMM,
elementwise, softmax (row max + exp), row sums, flash-attention forward. A kernel one path
cannot compile is reported with the reason instead of a time.

cutedsl lowers fp16/bf16 T.gemm on CuTe MMA atoms (warpgroup MMA on sm_90 for T.Pipelined
stage rings of whole tiles, warp-level mma.sync + ldmatrix otherwise); flash-attention's
GEMMs, whose accumulators feed reductions, go through shared memory around the MMA.

Usage: python benchmarks/routing.py [--quick] [--only TEXT] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tilelang
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tilelang-cutedsl" / "tests"))
from cuda_timing import time_ms
from cute_kernels import row_max_exp, row_sum
from tilelang.testing.kernels import elementwise_add, flash_attention, tile_gemm

PATHS = ("cuda", "cutedsl")


def attention_reference(q: Any, k: Any, v: Any) -> Any:
    out = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
    return out.transpose(1, 2)


def families(quick: bool) -> list[tuple[str, Callable[[], Any], Callable[[], tuple], Callable[..., Any], float]]:
    """(name, kernel builder, inputs, reference, tolerance)."""
    n = 2048 if quick else 8192
    m = 4096 if quick else 16384
    seq = 1024 if quick else 4096

    def half(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda", dtype=torch.float16)

    def single(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda")

    return [
        (f"gemm {n}^3 fp16", lambda: tile_gemm(n, n, n, 128, 128, 32, stages=3), lambda: (half(n, n), half(n, n)),
         lambda a, b: a.float() @ b.float(), 5e-2),
        # the cuda path's best tile of benchmarks/matmul.py: two consumer warpgroups, 128 x 256
        (f"gemm {n}^3 fp16 128x256x64/t256/s3/p8",
         lambda: tile_gemm(n, n, n, 128, 256, 64, stages=3, threads=256, panel=8),
         lambda: (half(n, n), half(n, n)), lambda a, b: a.float() @ b.float(), 5e-2),
        (f"elementwise {m}x1024 fp16", lambda: elementwise_add(m, 1024, dtype="float16"),
         lambda: (half(m, 1024), half(m, 1024)), lambda a, b: a + b, 1e-3),
        (f"softmax-exp {m}x256 fp32", lambda: row_max_exp(m, 256), lambda: (single(m, 256),),
         lambda a: torch.exp(a - a.max(1, keepdim=True).values), 1e-5),
        (f"row sum {m}x512 fp32", lambda: row_sum(m, 512), lambda: (single(m, 512),), lambda a: a.sum(1), 1e-3),
        (f"flash-attention fwd 4x8x{seq}x64", lambda: flash_attention(4, 8, seq, 64),
         lambda: tuple(half(4, seq, 8, 64) for _ in range(3)), attention_reference, 2e-2),
    ]


def run_path(path: str, build: Callable[[], Any], inputs: tuple, reference: Any, tol: float) -> dict[str, Any]:
    try:
        kernel = tilelang.compile(build(), out_idx=[-1], target=path)
        out = kernel(*inputs)
        ok = torch.allclose(out.float(), reference.float(), rtol=tol, atol=tol)
        return {"ms": round(time_ms(lambda: kernel(*inputs)), 4), "correct": bool(ok),
                "backend": kernel.context.module.name}
    except Exception as err:  # noqa: BLE001 - reported per path, the run goes on
        return {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", action="append", default=[], help="run the kernels whose name has this text")
    args = parser.parse_args()
    rows = []
    for name, build, inputs_of, reference_of, tol in families(args.quick):
        if args.only and not any(text in name for text in args.only):
            continue
        inputs = inputs_of()
        reference = reference_of(*inputs)
        row: dict[str, Any] = {"kernel": name}
        for path in PATHS:
            row[path] = run_path(path, build, inputs, reference, tol)
        cuda_ms, cute_ms = row["cuda"].get("ms"), row["cutedsl"].get("ms")
        row["cuda/cutedsl"] = round(cuda_ms / cute_ms, 3) if cuda_ms and cute_ms else None
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""Flash-attention forward (the upstream-style example kernel, fp16) against
torch.nn.functional.scaled_dot_product_attention in the same process, with a correctness
check: TFLOP/s (4 x batch x heads x seq^2 x dim) and the ratio to torch (timed beside each
config, in alternating samples), per tile config.

Usage: python benchmarks/flash_attention.py [--json out]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tilelang
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from cuda_timing import paired_ms, time_ms
from tilelang.testing.kernels import (
    flash_attention,  # the examples' kernel, classic style
)

SHAPES = [(8, 16, 4096, 64), (8, 16, 4096, 128)]  # batch, heads, seq_len, dim
# block_M, block_N, threads, num_stages (1: synchronous K/V copies; 2 or more: a stage ring)
# On sm_90 these run on wgmma (16 rows per warp); the last configs measure mma.sync.
# With 256 threads (head dim 128: a producer warp too) two opt-in schedules of tilelang-cuda:
# "/overlap" issues P V of the previous iteration under the softmax (FlashAttention-3's
# intra-warpgroup overlap, transform/gemm_overlap.py), "/pp-first" makes the two consumer
# warpgroups take turns at the first GEMM (pingpong, transform/pingpong.py).
MMA_SYNC = {"tl.disable_wgmma": True}
OVERLAP = {"tl.intra_warpgroup_overlap": True}
PP_FIRST = {"tl.warpgroup_pingpong": "first"}
CONFIGS = [((64, 64, 128, 1), {}), ((64, 64, 128, 2), {}), ((128, 64, 256, 2), {}), ((64, 32, 128, 2), {}),
           ((128, 32, 256, 2), {}), ((64, 128, 128, 2), {}), ((128, 128, 256, 2), {}), ((128, 128, 256, 3), {})]
CONFIGS += [(tiles, options) for tiles in ((128, 128, 256, 2), (128, 128, 256, 3))
            for options in (OVERLAP, PP_FIRST, {**OVERLAP, **PP_FIRST})]
CONFIGS += [((64, 64, 128, 2), MMA_SYNC), ((128, 32, 256, 2), MMA_SYNC)]


def label(config: tuple, options: dict) -> str:
    names = {"tl.disable_wgmma": "/mma", "tl.intra_warpgroup_overlap": "/overlap"}
    extra = "".join(names.get(key, f"/pp-{value}") for key, value in options.items())
    return "bM{}/bN{}/t{}/s{}".format(*config) + extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for batch, heads, seq_len, dim in SHAPES:
        q, k, v = (torch.randn(batch, seq_len, heads, dim, device="cuda", dtype=torch.float16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # SDPA wants [batch, heads, seq, dim]
        reference = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt).transpose(1, 2)
        flop = 4 * batch * heads * seq_len * seq_len * dim
        t_torch = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt), repeat=10, inner=3)
        row = {"shape": [batch, heads, seq_len, dim], "torch_TFLOPs": round(flop / t_torch / 1e9, 1), "tilelang": []}
        for config, options in CONFIGS:
            kernel = tilelang.compile(flash_attention(batch, heads, seq_len, dim, *config), out_idx=[3],
                                      target="cuda", pass_configs=options or None)
            err = (kernel(q, k, v).float() - reference.float()).abs().max().item()
            # SDPA is timed again beside each config (alternating samples; see paired_ms)
            t, t_sdpa = paired_ms(lambda: kernel(q, k, v),
                                  lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt), repeat=10, inner=3)
            entry = {"config": label(config, options), "TFLOPs": round(flop / t / 1e9, 1),
                     "torch_TFLOPs": round(flop / t_sdpa / 1e9, 1), "ratio_vs_torch": round(t_sdpa / t, 3), "max_abs_err": round(err, 4), "correct": err < 2e-2}
            row["tilelang"].append(entry)
            print(json.dumps({"shape": row["shape"], **entry}), flush=True)
        correct = [e for e in row["tilelang"] if e["correct"]]
        if correct:
            row["best"] = max(correct, key=lambda e: e["TFLOPs"])
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "tilelang"}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

"""Flash-attention forward (the upstream-style example kernel, fp16) against
torch.nn.functional.scaled_dot_product_attention in the same process, with a correctness
check: TFLOP/s (4 x batch x heads x seq^2 x dim, half that with --causal) and the ratio to
torch (timed beside each config, in alternating samples), per tile config.

Usage: python benchmarks/flash_attention.py [--causal] [--json out]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import tilelang
import torch
from tilelang.errors import TileLangError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from cuda_timing import paired_ratio, time_ms
from tilelang.testing.kernels import (
    flash_attention,  # the examples' kernel, classic style
    flash_attention_persistent,
)

SHAPES = [(8, 16, 4096, 64), (8, 16, 4096, 128)]  # batch, heads, seq_len, dim
# block_M, block_N, threads, num_stages (1: synchronous K/V copies; 2 or more: a stage ring)
# On sm_90 these run on wgmma (16 rows per warp); the last configs measure mma.sync.
# With a warp-specialized ring (head dim 128; 64 with 3 stages) tilelang-cuda issues P V of the
# previous iteration under the softmax by default where that pays (FlashAttention-3's
# intra-warpgroup overlap, transform/gemm_overlap.py and overlap_policy.py): "/overlap" forces
# it, "/no-overlap" switches it off (the loop as written). "/pp-first" makes the two consumer
# warpgroups take turns at the first GEMM (pingpong, transform/pingpong.py), "/pp-pair" at
# both GEMM issues of an overlapped iteration together (FlashAttention-3's order).
MMA_SYNC = {"tl.disable_wgmma": True}
OVERLAP = {"tl.intra_warpgroup_overlap": True}
NO_OVERLAP = {"tl.intra_warpgroup_overlap": False}
PP_FIRST = {"tl.warpgroup_pingpong": "first"}
PP_PAIR = {"tl.warpgroup_pingpong": "pair"}
CONFIGS = [((64, 64, 128, 1), {}), ((64, 64, 128, 2), {}), ((128, 64, 256, 2), {}), ((64, 32, 128, 2), {}),
           ((128, 32, 256, 2), {}), ((64, 128, 128, 2), {}), ((128, 128, 256, 2), {}), ((128, 128, 256, 3), {})]
CONFIGS += [(tiles, options) for tiles in ((128, 128, 256, 2), (128, 128, 256, 3))
            for options in (OVERLAP, PP_FIRST, {**OVERLAP, **PP_FIRST}, {**OVERLAP, **PP_PAIR})]
CONFIGS += [(tiles, NO_OVERLAP) for tiles in ((64, 128, 128, 2), (128, 128, 256, 2), (128, 128, 256, 3))]
CONFIGS += [((64, 64, 128, 2), MMA_SYNC), ((128, 32, 256, 2), MMA_SYNC)]
# --causal: the key loop cut at the diagonal, the mask as the first GEMM's starting value
# (upstream's causal examples). tilelang-cuda moves the mask after the GEMM, onto the key
# blocks that cross the diagonal, where shared memory holds one block per SM or the launch bounds
# promise a block count
# (transform/mask_after_gemm.py): "/mask-after" forces that, "/mask-as-written" keeps the kernel.
MASK_AFTER = {"tl.mask_after_gemm": True}
MASK_AS_WRITTEN = {"tl.mask_after_gemm": False}
CAUSAL_CONFIGS = [((64, 64, 128, 2), {}), ((128, 64, 256, 2), {}), ((128, 32, 256, 2), {}),
                  ((128, 128, 256, 2), NO_OVERLAP), ((128, 128, 256, 2), {}), ((128, 128, 256, 3), {})]
CAUSAL_CONFIGS += [(tiles, {**options, **MASK_AFTER}) for tiles, options in CAUSAL_CONFIGS]
CAUSAL_CONFIGS += [((128, 128, 256, 2), MASK_AS_WRITTEN), ((128, 128, 256, 3), MASK_AS_WRITTEN)]
# persistent: one block per SM walks the (batch, head, query block) tiles with T.Persistent
# (testing.kernels.flash_attention_persistent); the K/V ring runs on across tiles
# (with the overlap K and V have barriers of their own, so 2 stages keep the producer ahead)
PERSISTENT = [((128, 128, 256, 2), NO_OVERLAP), ((128, 128, 256, 2), {}), ((128, 128, 256, 2), PP_FIRST), ((128, 128, 256, 3), OVERLAP),
              ((128, 128, 256, 3), {**OVERLAP, **PP_FIRST}), ((128, 128, 256, 3), {**OVERLAP, **PP_PAIR}),
              ((128, 128, 256, 2), {**OVERLAP, **PP_FIRST}), ((128, 128, 256, 2), {**OVERLAP, **PP_PAIR})]


def label(config: tuple, options: dict) -> str:
    names = {("tl.disable_wgmma", True): "/mma", ("tl.intra_warpgroup_overlap", True): "/overlap",
             ("tl.intra_warpgroup_overlap", False): "/no-overlap", ("tl.mask_after_gemm", True): "/mask-after",
             ("tl.mask_after_gemm", False): "/mask-as-written"}
    extra = "".join(names.get((key, value), f"/pp-{value}") for key, value in options.items())
    return "bM{}/bN{}/t{}/s{}".format(*config) + extra


def batch_by_tokens(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not BATCHxTOKENS (two positive integers, e.g. 8x4096)")
    return int(parts[0]), int(parts[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", default=None)
    parser.add_argument("--causal", action="store_true", help="causal attention (CAUSAL_CONFIGS; no persistent kernels)")
    parser.add_argument("--only", nargs="+", default=None, metavar="TEXT",
                        help="only the configs whose label contains one of these (e.g. persistent t256/s3)")
    parser.add_argument("--dims", type=int, nargs="+", default=None, help="only these head dims")
    parser.add_argument("--shapes", nargs="+", type=batch_by_tokens, default=None, metavar="BATCHxTOKENS",
                        help="batch x tokens instead of 8x4096 (16 heads; e.g. 16x2048 2x16384: the fixed "
                             "costs of a block show as the ratio's change with the tokens)")
    args = parser.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [(batch, 16, tokens, dim) for batch, tokens in args.shapes for dim in (64, 128)]
    sm_num = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for batch, heads, seq_len, dim in shapes:
        if args.dims and dim not in args.dims:
            continue
        q, k, v = (torch.randn(batch, seq_len, heads, dim, device="cuda", dtype=torch.float16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # SDPA wants [batch, heads, seq, dim]
        sdpa = functools.partial(torch.nn.functional.scaled_dot_product_attention, qt, kt, vt, is_causal=args.causal)
        reference = sdpa().transpose(1, 2)
        flop = 4 * batch * heads * seq_len * seq_len * dim // (2 if args.causal else 1)
        t_torch = time_ms(sdpa, repeat=10, inner=3)
        row = {"shape": [batch, heads, seq_len, dim], "torch_TFLOPs": round(flop / t_torch / 1e9, 1), "tilelang": []}
        jobs = [(label(config, options), flash_attention(batch, heads, seq_len, dim, *config, causal=args.causal),
                 options) for config, options in (CAUSAL_CONFIGS if args.causal else CONFIGS)]
        if not args.causal:
            jobs += [("persistent/" + label(config, options),
                      flash_attention_persistent(batch, heads, seq_len, dim, *config, sm_num=sm_num), options)
                     for config, options in PERSISTENT]
        jobs = [job for job in jobs if not args.only or any(text in job[0] for text in args.only)]
        for name, func, options in jobs:
            try:
                kernel = tilelang.compile(func, out_idx=[3], target="cuda", pass_configs=options or None)
            except TileLangError as err:  # a config over the shared-memory limit: recorded, the run goes on
                row["tilelang"].append({"config": name, "error": str(err).splitlines()[0][:300]})
                print(json.dumps({"shape": row["shape"], **row["tilelang"][-1]}), flush=True)
                continue
            err = (kernel(q, k, v).float() - reference.float()).abs().max().item()
            # SDPA is timed again beside each config (alternating samples; see paired_ratio)
            timing = paired_ratio(functools.partial(kernel, q, k, v), sdpa)
            t, t_sdpa = timing["ms"], timing["reference_ms"]
            entry = {"config": name, "TFLOPs": round(flop / t / 1e9, 1), "torch_TFLOPs": round(flop / t_sdpa / 1e9, 1),
                     "ratio_vs_torch": round(timing["ratio"], 3),
                     "ratio_quartiles": [round(timing["ratio_q1"], 3), round(timing["ratio_q3"], 3)],
                     "max_abs_err": round(err, 4), "correct": err < 2e-2}
            row["tilelang"].append(entry)
            print(json.dumps({"shape": row["shape"], **entry}), flush=True)
        correct = [e for e in row["tilelang"] if e.get("correct")]
        if correct:
            row["best"] = max(correct, key=lambda e: e["TFLOPs"])
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "tilelang"}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

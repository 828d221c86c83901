"""GEMM (fp16 in, fp32 accumulate) with the upstream-style tile kernel, against torch.mm in
the same process, with a correctness check: TFLOP/s and the ratio to torch.

Configs: the canonical 128x128x32 / 128 threads / 3 stages and others (tile, threads,
stages, rasterization panel, optionally the blocks per SM to plan registers for); the best is reported per size, with the generated kernel's
instruction mix (PTX counts and ptxas' register/spill report, where nvcc is installed).
Usage: python benchmarks/matmul.py [--sizes 4096 8192] [--json out]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import tilelang
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from cuda_timing import time_ms
from gemm import matmul

# (bM, bN, bK, threads, num_stages, rasterization panel[, blocks per SM to plan for])
CANONICAL = (128, 128, 32, 128, 3, 0)
CONFIGS = [
    CANONICAL,
    (128, 128, 32, 128, 3, 8),
    (128, 128, 32, 128, 4, 8),
    (128, 128, 32, 128, 3, 8, 3),  # three blocks per SM: single-buffered fragments, some spills
    (128, 128, 64, 128, 3, 8),
    (128, 128, 64, 256, 3, 8),
    (64, 64, 32, 128, 3, 0),
]


def instruction_mix(source: str, arch: str) -> dict:
    """PTX instruction counts and ptxas' resource report for one kernel source."""
    if shutil.which("nvcc") is None:
        return {"note": "nvcc not installed"}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.cu"
        src.write_text(source)
        subprocess.run(["nvcc", "-ptx", f"-arch={arch}", str(src), "-o", f"{tmp}/k.ptx"], check=True,
                       capture_output=True)
        ptx = Path(f"{tmp}/k.ptx").read_text()
        report = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-Xptxas", "-v", str(src), "-o",
                                 f"{tmp}/k.cubin"], capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    return {
        "mma.sync": ptx.count("mma.sync.aligned"), "ldmatrix": ptx.count("ldmatrix.sync"),
        "cp.async": ptx.count("cp.async.cg"), "bar.sync": len(re.findall(r"\bbar(rier)?\.sync", ptx)),
        "ld.shared": ptx.count("ld.shared"), "st.global": ptx.count("st.global"),
        "registers": int(regs.group(1)) if regs else None,
        "spill_store_bytes": int(spills.group(1)) if spills else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    rows = []
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        flop = 2 * n**3
        t_torch = time_ms(lambda: torch.mm(a, b), repeat=5, inner=2)
        row = {"n": n, "torch_TFLOPs": round(flop / t_torch / 1e9, 1), "tilelang": []}
        reference = torch.mm(a, b).float()
        best = None
        for config in CONFIGS:
            configs = {"tl.min_blocks_per_sm": config[6]} if len(config) > 6 else None
            kernel = tilelang.compile(matmul.builder(n, n, n, *config[:6]), out_idx=[-1], target="cuda",
                                      pass_configs=configs)
            c = kernel(a, b)
            err = (c.float() - reference).abs().max().item()
            t = time_ms(lambda: kernel(a, b), repeat=5, inner=2)
            label = "x".join(map(str, config[:3])) + f"/t{config[3]}/s{config[4]}/p{config[5]}"
            entry = {"config": label + (f"/b{config[6]}" if len(config) > 6 else ""),
                     "TFLOPs": round(flop / t / 1e9, 1), "ratio_vs_torch": round(t_torch / t, 3),
                     "max_abs_err": round(err, 3), "correct": err < 1e-2 * n ** 0.5}
            row["tilelang"].append(entry)
            print(json.dumps({"n": n, **entry}), flush=True)
            if entry["correct"] and (best is None or entry["TFLOPs"] > best[0]["TFLOPs"]):
                best = (entry, kernel)
        if best is not None:
            row["best"] = best[0]
            row["best_instruction_mix"] = instruction_mix(best[1].get_kernel_source(), arch)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "tilelang"}), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

"""GEMM (fp16 in, fp32 accumulate) with the upstream-style tile kernel, against torch.mm in
the same process, with a correctness check: TFLOP/s and the ratio to torch (timed beside each
config, in alternating samples).

Configs: the canonical 128x128x32 / 128 threads / 3 stages and others (tile, threads,
stages, rasterization panel, pass configs: on sm_90 GEMMs run on wgmma, and the mma.sync
path is measured too); the best is reported per size, with the generated kernel's
instruction mix (PTX counts and ptxas' register/spill report, where nvcc is installed).

Persistent configs ("persistent/..."): upstream's examples/gemm/example_gemm_persistent.py
kernel — one block per SM (the SM count from the device) walking the tiles with
T.Persistent, C written through a shared tile — the same kernel with upstream's
T.PersistentTileScheduler's while loop ("scheduler/...", panels of 8 tile columns), and its
non-persistent twin with the same shared epilogue ("shared-epilogue/..."), measured in the
same run.

Warp-specialized configs ("ws-.../"): upstream's examples/warp_specialize GEMMs, whose own
warp roles and mbarriers schedule the copies (T.ws, T.tma_copy, T.alloc_barrier): one
producer and one consumer warpgroup on one tile ("ws-roles"), a ring of two stage tiles
("ws-ring"), two consumer warpgroups sharing A, copied with T.copy ("ws-split"); each on
wgmma and on mma.sync ("/mma").

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
from cuda_timing import paired_ms, time_ms
from gemm import matmul
from tilelang.carver.arch import driver
from tilelang.errors import TileLangError
from tilelang.testing.kernels import persistent_gemm  # upstream's persistent example
from tilelang.testing.warp_specialized import (
    barrier_pipe,
    copy_gemm_roles,
    copy_gemm_split,
)

# (bM, bN, bK, threads, num_stages, rasterization panel), pass configs. On sm_90 the
# pipelined GEMMs run on wgmma; "tl.disable_wgmma" measures the mma.sync path they replace.
CANONICAL = ((128, 128, 32, 128, 3, 0), {})
MMA_SYNC = {"tl.disable_wgmma": True}
CONFIGS = [
    CANONICAL,
    ((128, 128, 32, 128, 3, 8), {}),  # the canonical tile, rasterized: what the panel alone buys
    ((128, 128, 32, 128, 4, 8), {}),
    ((128, 128, 32, 128, 5, 8), {}),
    ((128, 128, 64, 128, 3, 8), {}),
    ((128, 128, 64, 128, 4, 8), {}),
    ((128, 256, 64, 256, 3, 8), {}),
    ((128, 256, 64, 256, 3, 4), {}),  # the rasterization panel around the best tile
    ((128, 256, 64, 256, 3, 16), {}),
    ((128, 256, 64, 256, 3, 32), {}),
    ((256, 128, 64, 256, 3, 8), {}),
    ((128, 256, 64, 256, 4, 8), {}),
    ((256, 128, 64, 256, 4, 8), {}),
    ((256, 128, 32, 256, 4, 8), {}),
    ((128, 256, 32, 256, 5, 8), {}),
    ((128, 128, 32, 128, 4, 8), {"tl.disable_wgmma_swizzle": True}),
    # on sm_90 through tvm_ffi the pipelines load with TMA; these measure cp.async instead
    ((128, 128, 32, 128, 3, 0), {"tl.disable_tma_lower": True}),
    ((128, 128, 32, 128, 3, 0), {"tl.disable_warp_specialized": True}),  # TMA, thread 0 issuing
    ((128, 256, 64, 256, 4, 8), {"tl.disable_warp_specialized": True}),
    ((128, 256, 64, 256, 3, 8), {"tl.disable_tma_lower": True}),
    ((128, 128, 64, 128, 3, 8), MMA_SYNC),  # the best mma.sync config
    ((128, 128, 32, 128, 3, 0), MMA_SYNC),
]
# (bM, bN, bK, threads, num_stages) of the persistent kernel and of its non-persistent twin
# (4 stages of 128x256x64 with the 64 KiB C tile exceed the 227 KiB a block may have)
PERSISTENT_CONFIGS = [(128, 256, 64, 256, 3), (128, 128, 64, 128, 4), (128, 128, 32, 128, 3)]
# upstream's examples/warp_specialize forms: copy_1_gemm_0 (and softpipe_stage2, the same
# statements), barrierpipe_stage2, copy_gemm_0_1
WARP_SPECIALIZED = [("roles", lambda m, n, k: copy_gemm_roles(m, n, k, producer=1, consumer=0)),
                    ("ring", barrier_pipe), ("split", copy_gemm_split)]
SHORT = {"tl.disable_wgmma": "mma", "tl.disable_wgmma_swizzle": "noswizzle", "tl.min_blocks_per_sm": "b",
         "tl.disable_tma_lower": "cpasync", "tl.disable_warp_specialized": "nows"}


def instruction_mix(source: str, arch: str) -> dict:
    """PTX instruction counts and ptxas' resource report for one kernel source."""
    if shutil.which("nvcc") is None:
        return {"note": "nvcc not installed"}
    from tilelang.cuda.toolchain import arch_for_source

    arch = arch_for_source(source, arch)  # sm_90a for wgmma
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.cu"
        src.write_text(source)
        subprocess.run(["nvcc", "-ptx", f"-arch={arch}", str(src), "-o", f"{tmp}/k.ptx"], check=True,
                       capture_output=True)
        ptx = Path(f"{tmp}/k.ptx").read_text()
        report = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", "-Xptxas", "-v", str(src), "-o",
                                 f"{tmp}/k.cubin"], capture_output=True, text=True).stderr
        sass = ""
        if shutil.which("cuobjdump"):
            sass = subprocess.run(["cuobjdump", "-sass", f"{tmp}/k.cubin"], capture_output=True, text=True).stdout
    regs = re.search(r"Used (\d+) registers", report)
    spills = re.search(r"(\d+) bytes spill stores", report)
    return {
        "wgmma": ptx.count("wgmma.mma_async"), "mma.sync": ptx.count("mma.sync.aligned"),
        "ldmatrix": ptx.count("ldmatrix.sync"),
        "cp.async": ptx.count("cp.async.cg"), "bar.sync": len(re.findall(r"\bbar(rier)?\.sync", ptx)),
        "ld.shared": ptx.count("ld.shared"), "st.global": ptx.count("st.global"),
        "sass": {op: len(re.findall(rf"\b{op}\b", sass)) for op in ("HGMMA", "HMMA", "LDSM", "LDGSTS", "BAR")}
        if sass else "cuobjdump not installed",
        "registers": int(regs.group(1)) if regs else None,
        "spill_store_bytes": int(spills.group(1)) if spills else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--json", default=None)
    parser.add_argument("--only", nargs="+", default=None, metavar="TEXT",
                        help="only the configs whose label contains one of these (e.g. persistent s3/p0)")
    args = parser.parse_args()
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    sm_num = driver.get_num_sms()  # as upstream's persistent example asks the device
    rows = []
    for n in args.sizes:
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        flop = 2 * n**3
        t_torch = time_ms(lambda: torch.mm(a, b), repeat=5, inner=2)
        row = {"n": n, "torch_TFLOPs": round(flop / t_torch / 1e9, 1), "tilelang": []}
        reference = torch.mm(a, b).float()
        best = None
        jobs = []
        for config, options in CONFIGS:
            label = "x".join(map(str, config[:3])) + f"/t{config[3]}/s{config[4]}/p{config[5]}"
            label += "".join(f"/{SHORT[k]}" + ("" if v is True else str(v)) for k, v in options.items())
            jobs.append((label, matmul.builder(n, n, n, *config), options))
        for config in PERSISTENT_CONFIGS:
            shape = "x".join(map(str, config[:3])) + f"/t{config[3]}/s{config[4]}"
            jobs.append((f"persistent/{shape}/sm{sm_num}", persistent_gemm(n, n, n, *config, sm_num), {}))
            jobs.append((f"scheduler/{shape}/sm{sm_num}", persistent_gemm(n, n, n, *config, sm_num, "scheduler"), {}))
            jobs.append((f"shared-epilogue/{shape}", persistent_gemm(n, n, n, *config, None, "tile"), {}))
        for name, build in WARP_SPECIALIZED:
            for options in ({}, MMA_SYNC):
                jobs.append((f"ws-{name}/128x128x64" + ("/mma" if options else ""), build(n, n, n), options))
        jobs = [job for job in jobs if not args.only or any(text in job[0] for text in args.only)]
        for label, func, options in jobs:
            try:
                kernel = tilelang.compile(func, out_idx=[-1], target="cuda", pass_configs=options or None)
                c = kernel(a, b)
            except TileLangError as err:  # one config that does not compile or launch: recorded, the run goes on
                row["tilelang"].append({"config": label, "error": str(err).splitlines()[0][:300]})
                print(json.dumps({"n": n, **row["tilelang"][-1]}), flush=True)
                continue
            err = (c.float() - reference).abs().max().item()
            # torch.mm is timed again beside each config (alternating samples): the ratio is
            # taken at the clocks both ran at, not against the cool GPU of the first minute
            t, t_mm = paired_ms(lambda: kernel(a, b), lambda: torch.mm(a, b), repeat=7, inner=2)
            entry = {"config": label, "TFLOPs": round(flop / t / 1e9, 1),
                     "torch_TFLOPs": round(flop / t_mm / 1e9, 1), "ratio_vs_torch": round(t_mm / t, 3),
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

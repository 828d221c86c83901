"""Benchmark families (issue 14, item 2): matmul, bmm, linear_bias_act, fmha, mla_decoding,
rope, elementwise, softmax, rmsnorm. Each runs TileLang's kernels and torch's path (cuBLAS,
SDPA, eager ops) on the same inputs in this process, checks TileLang's output against
torch's with stated tolerances, times both kernel-only with CUDA events and reports
TFLOP/s or GB/s and the ratio (torch ms / TileLang ms: above 1, TileLang is faster).

Each family runs in a child process by default, so a crash or a poisoned CUDA context
stops that family only; the JSON and markdown are rewritten after every family, so a run
cut short keeps what finished.

    python benchmarks/families.py [--only fam ...] [--quick] [--json out.json] [--md out.md]
    python benchmarks/families.py --dry-run [--arch sm_90] [--no-nvcc]   # no GPU needed
    python benchmarks/families.py --cpu-check                            # no GPU needed

--dry-run lowers every variant of every case for --arch and compiles its device code with
the CUDA backend's toolchain (NVRTC or nvcc), launching nothing. --cpu-check runs each
family's kernels at small sizes on the CPU backend against torch on the CPU (the kernels'
arithmetic, not their GPU lowering). --budget bounds the whole run (one call on a leased
GPU): families not started in time are reported as such. Plot the JSON with
benchmarks/plot_families.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from families import FAMILIES, family_module  # the package beside this script
from families.report import markdown


def run_family(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every case of one family, in this process; a failure to build its cases is a record."""
    from families.common import check_on_cpu, dry_run_case, error_text, run_case

    try:
        module = family_module(name)
        cases = module.small_cases() if args.cpu_check else module.cases(args.quick)
    except Exception as exc:  # noqa: BLE001 -- reported; the other families continue
        return [{"name": name, "case": "*", "error": "building the cases: " + error_text(exc)}]
    records = []
    for case in cases:
        start = time.perf_counter()
        if args.cpu_check:
            try:
                record = check_on_cpu(case)
            except Exception as exc:  # noqa: BLE001 -- reported; the other cases continue
                record = {**case.base_record(), "error": error_text(exc)}
        elif args.dry_run:
            record = dry_run_case(case, args.arch, nvcc=not args.no_nvcc)
        else:
            record = run_case(case, repeat=5 if args.quick else 10, inner=3 if args.quick else 5)
            _free_cuda_memory()
        record["seconds"] = round(time.perf_counter() - start, 1)
        print(json.dumps({k: v for k, v in record.items() if k != "variants"}), flush=True)
        records.append(record)
    return records


def _free_cuda_memory() -> None:
    import gc

    import torch

    gc.collect()
    torch.cuda.empty_cache()


def run_family_isolated(name: str, args: argparse.Namespace, timeout: float) -> list[dict[str, Any]]:
    """One family in a child process (this script with --only name --in-process)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "records.json"
        command = [sys.executable, __file__, "--only", name, "--in-process", "--json", str(out),
                   "--arch", args.arch] + ["--quick"] * args.quick + ["--dry-run"] * args.dry_run
        command += ["--no-nvcc"] * args.no_nvcc + ["--cpu-check"] * args.cpu_check
        try:
            proc = subprocess.run(command, check=False, timeout=timeout)
            status = f"exit status {proc.returncode}"
        except subprocess.TimeoutExpired:
            status = f"timed out after {timeout:.0f} s"
        if out.exists():
            return json.loads(out.read_text())
    return [{"name": name, "case": "*", "error": f"the family's process ended without results ({status})"}]


def write_outputs(records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    if args.md:
        Path(args.md).write_text(markdown(records, dry_run=args.dry_run))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=FAMILIES, default=list(FAMILIES), metavar="FAMILY",
                        help=f"families to run (default: all of {', '.join(FAMILIES)})")
    parser.add_argument("--quick", action="store_true", help="one shape per family, fewer configs and repeats")
    parser.add_argument("--json", default=None, help="write the records here")
    parser.add_argument("--md", default=None, help="write the markdown table here")
    parser.add_argument("--dry-run", "--lower-only", dest="dry_run", action="store_true",
                        help="lower and compile the device code only; no GPU needed")
    parser.add_argument("--arch", default="sm_90", help="CUDA arch for --dry-run (default sm_90)")
    parser.add_argument("--no-nvcc", action="store_true", help="with --dry-run: lower only, no device compile")
    parser.add_argument("--cpu-check", action="store_true",
                        help="run each family's small cases on the CPU backend against torch; no GPU needed")
    parser.add_argument("--budget", type=float, default=float(os.environ.get("FAMILIES_BUDGET", "540")),
                        help="seconds for the whole run (default 540): later families are reported as not run")
    parser.add_argument("--in-process", action="store_true", help="run every family in this process")
    parser.add_argument("--family-timeout", type=float, default=float(os.environ.get("FAMILY_TIMEOUT", "300")),
                        help="seconds a family's child process may take (default 300)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    records: list[dict[str, Any]] = []
    deadline = time.monotonic() + args.budget
    for name in args.only:
        left = deadline - time.monotonic()
        if left < 10:  # not worth starting: a child needs seconds to import torch and tilelang
            records.append({"name": name, "case": "*", "error": f"not run: the {args.budget:.0f} s budget was spent"})
        elif args.in_process:
            records += run_family(name, args)
        else:
            records += run_family_isolated(name, args, min(args.family_timeout, left))
        write_outputs(records, args)
    if not args.json and not args.md:
        print(markdown(records, dry_run=args.dry_run))
    failed = [r for r in records if r.get("error") or r.get("correct") is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

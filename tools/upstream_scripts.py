"""Run upstream TileLang's examples as a user runs them, and keep what they say about themselves.

Each example runs as a script -- ``python example.py`` in its own folder, with its own default
arguments, in a subprocess with a timeout -- against this installed project. What it prints is
kept: its own correctness check, and the timings it measures of its TileLang kernel beside
the reference it measures in the same process (torch, Triton, a naive form). Where a script
prints both, the ratio is reference time / TileLang time (above 1: TileLang is faster). On a
CUDA host; upstream's examples are read from a checkout (tile-ai/tilelang), never copied here.

    python tools/upstream_scripts.py --examples /path/to/tilelang/examples [--only minference]
        [--all] [--timeout 120] [--json out.json] [--markdown out.md]

A session on the H200 (docs/benchmarks/h200-2026-12-04-survey.md) found this way a split-KV
decode 12x slower than torch, minference at 0.26x Triton, and a wrong backward kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# scripts that time their TileLang kernel beside a reference, and need nothing this project's
# GPU bundle lacks (``--all``: every example script)
DEFAULT_SCRIPTS = (
    "flash_attention/example_mha_fwd_bshd.py", "flash_attention/example_gqa_fwd_bshd.py",
    "flash_attention/example_mha_bwd_bshd.py", "flash_attention/example_gqa_bwd.py",
    "flash_decoding/example_gqa_decode.py", "flash_decoding/example_mha_inference.py",
    "minference/example_vertical_slash_sparse_attn.py", "attention_sink/example_mha_sink_fwd_bhsd.py",
    "attention_sink/benchmark_mha_sink_fwd.py", "cast/example_per_token_cast_to_fp8.py", "norm/rms_norm.py",
    "online_softmax/online_softmax.py", "deepseek_v32/topk_selector.py", "gemv/example_gemv.py",
    "linear_attention/example_mamba_chunk_state.py", "linear_attention/example_mamba_chunk_scan.py",
    "dequantize_gemm/example_dequant_gemm_fp4_hopper.py", "gemm/example_gemm_persistent.py",
)

# "Ref: 0.13 ms", "triton_time: 0.172ms", "TileLang Latency: 0.0073 ms", "speedup: 0.26x"
_MEASURE = re.compile(r"^\s*(?P<label>[A-Za-z][\w.\- ]*?)\s*[:=]\s*(?P<value>\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*"
                      r"(?P<unit>ms|us|TFlops|TFLOPs|TFLOPS|tflops|GB/s|x)?\s*$")
_TILELANG = re.compile(r"tile|\btl_", re.IGNORECASE)
_REFERENCE = re.compile(r"ref|torch|triton|baseline|cublas|cudnn", re.IGNORECASE)
_CHECK = re.compile(r"pass|match|check|assert|error|diff", re.IGNORECASE)


def measurements(text: str) -> list[dict[str, Any]]:
    """Every ``label: value [unit]`` line a script printed, in order. A time without a unit
    is taken in ms when its label says latency or time (``Persistent GEMM Latency: 1.84``)."""
    found = []
    for line in text.splitlines():
        match = _MEASURE.match(line)
        if match is None:
            continue
        unit = match["unit"] or ("ms" if re.search(r"latency|time", match["label"], re.IGNORECASE) else "")
        found.append({"label": match["label"].strip(), "value": float(match["value"]), "unit": unit})
    return found


def ratios(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reference time / TileLang time for each TileLang time (ms or us) that follows a
    reference time, paired in the order the script printed them."""
    scale = {"ms": 1.0, "us": 1e-3}
    pairs, reference = [], None
    for m in found:
        if m["unit"] not in scale:
            continue
        ms = m["value"] * scale[m["unit"]]
        if _TILELANG.search(m["label"]):
            if reference is not None and ms > 0:
                pairs.append({"reference": reference["label"], "reference_ms": reference["ms"],
                              "tilelang": m["label"], "tilelang_ms": ms, "ratio": reference["ms"] / ms})
                reference = None
        elif _REFERENCE.search(m["label"]):
            reference = {"label": m["label"], "ms": ms}
    return pairs


def run_script(path: Path, timeout: float) -> dict[str, Any]:
    """One example as a script, in its folder; its exit status, time and printed results."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(path.parent), os.environ.get("PYTHONPATH")])))
    started = time.time()
    try:
        proc = subprocess.run([sys.executable, path.name], cwd=path.parent, capture_output=True, text=True, check=False,
                              timeout=timeout, env=env)
        text, status = proc.stdout + "\n" + proc.stderr, ("ok" if proc.returncode == 0 else f"exit {proc.returncode}")
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        text, status = out, f"timeout ({timeout:.0f} s)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = measurements(text)
    return {"status": status, "seconds": round(time.time() - started, 1), "measurements": found,
            "ratios": ratios(found), "checks": [line[:200] for line in lines if _CHECK.search(line)][-3:],
            "last_lines": [line[:300] for line in lines[-4:]]}


def markdown(results: dict[str, dict[str, Any]]) -> str:
    rows = ["| example | status | reference / TileLang | printed |", "|---|---|---|---|"]
    for name, r in results.items():
        shown = ", ".join(f"{p['reference']} {p['reference_ms']:.4g} ms / {p['tilelang']} {p['tilelang_ms']:.4g} ms "
                          f"= {p['ratio']:.2f}" for p in r["ratios"]) or "-"
        printed = "; ".join(f"{m['label']} {m['value']:g} {m['unit']}".strip() for m in r["measurements"][:6])
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {(r['last_lines'] or [''])[-1][:120]}"
        rows.append(f"| {name} | {status.replace('|', '/')} | {shown} | {printed.replace('|', '/') or '-'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=Path, required=True, help="upstream's examples/ folder")
    parser.add_argument("--only", action="append", default=[], help="scripts whose path contains this (repeatable)")
    parser.add_argument("--all", action="store_true", help="every example script, not the default list")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per script")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--markdown", type=Path, help="write a markdown table here")
    args = parser.parse_args(argv)
    root = args.examples.resolve()
    if not root.is_dir():
        parser.error(f"--examples {root}: not a directory; point it at upstream's examples/")
    if args.all:
        names = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                       if not p.name.startswith(("test_", "regression_")) and "__main__" in p.read_text(errors="replace"))
    else:
        names = list(DEFAULT_SCRIPTS)
    names = [n for n in names if not args.only or any(o in n for o in args.only)]
    results = {}
    for name in names:
        if not (root / name).is_file():
            print(f"{name}: not in {root}", flush=True)
            continue
        r = results[name] = run_script(root / name, args.timeout)
        shown = ", ".join(f"{p['ratio']:.2f}x" for p in r["ratios"]) or "no reference timing"
        print(f"{name}: {r['status']} in {r['seconds']} s; reference / TileLang {shown}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(results) + "\n")
    return 0 if results and all(r["status"] == "ok" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

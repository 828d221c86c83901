"""tools/upstream_scripts.py: what an upstream example script prints about its own timings,
read back (the lines below are the ones upstream's examples printed on the H200), and a run
over a folder of stand-in scripts."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "upstream_scripts.py"
if not TOOL.is_file():
    pytest.skip("tools/upstream_scripts.py is not in this checkout", allow_module_level=True)
_spec = importlib.util.spec_from_file_location("upstream_scripts", TOOL)
tool = importlib.util.module_from_spec(_spec)
sys.modules["upstream_scripts"] = tool
_spec.loader.exec_module(tool)


def test_the_printed_timings_pair_each_tilelang_time_with_the_reference_before_it():
    text = """All checks pass.
Ref: 0.13 ms
Ref: 1.07 TFlops
Tile-lang: 1.59 ms
Tile-lang: 0.08 TFlops
triton_time: 0.172ms
tilelang_time: 0.671ms
speedup: 0.26x
Torch Latency: 0.010536 ms
TileLang Latency: 0.0073 ms
Persistent GEMM Latency: 1.84
tensor([1.0, 2.0])
"""
    found = tool.measurements(text)
    assert [(m["label"], m["value"], m["unit"]) for m in found] == [
        ("Ref", 0.13, "ms"), ("Ref", 1.07, "TFlops"), ("Tile-lang", 1.59, "ms"), ("Tile-lang", 0.08, "TFlops"),
        ("triton_time", 0.172, "ms"), ("tilelang_time", 0.671, "ms"), ("speedup", 0.26, "x"),
        ("Torch Latency", 0.010536, "ms"), ("TileLang Latency", 0.0073, "ms"), ("Persistent GEMM Latency", 1.84, "ms")]
    pairs = tool.ratios(found)
    assert [(p["reference"], p["tilelang"]) for p in pairs] == [
        ("Ref", "Tile-lang"), ("triton_time", "tilelang_time"), ("Torch Latency", "TileLang Latency")]
    assert [round(p["ratio"], 3) for p in pairs] == [round(0.13 / 1.59, 3), round(0.172 / 0.671, 3),
                                                     round(0.010536 / 0.0073, 3)]


def test_a_tilelang_time_without_a_reference_before_it_gives_no_ratio():
    assert tool.ratios(tool.measurements("Tilelang latency: 0.09\nTorch: 2.0 ms\n")) == []


def test_a_run_over_scripts_keeps_status_timings_and_the_failure(tmp_path):
    (tmp_path / "fast").mkdir()
    (tmp_path / "fast" / "example_fast.py").write_text(
        'import helper\nif __name__ == "__main__":\n    print("All checks pass.")\n'
        '    print(f"torch: {helper.REF} ms")\n    print("tilelang: 1.0 ms")\n')
    (tmp_path / "fast" / "helper.py").write_text("REF = 2.0\n")  # imported from the script's folder
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "example_broken.py").write_text(
        'if __name__ == "__main__":\n    raise ModuleNotFoundError("No module named \'flash_attn\'")\n')
    out = tmp_path / "out.json"
    code = tool.main(["--examples", str(tmp_path), "--all", "--json", str(out), "--markdown",
                      str(tmp_path / "out.md"), "--timeout", "60"])
    assert code == 1  # one script failed
    results = json.loads(out.read_text())
    fast, broken = results["fast/example_fast.py"], results["broken/example_broken.py"]
    assert fast["status"] == "ok" and [p["ratio"] for p in fast["ratios"]] == [2.0]
    assert fast["checks"] == ["All checks pass."]
    assert broken["status"] == "exit 1" and "flash_attn" in broken["last_lines"][-1]
    table = (tmp_path / "out.md").read_text()
    assert "| fast/example_fast.py | ok | torch 2 ms / tilelang 1 ms = 2.00 |" in table
    assert "| broken/example_broken.py | exit 1: ModuleNotFoundError" in table

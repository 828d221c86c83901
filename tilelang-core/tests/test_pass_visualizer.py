"""python -m tilelang.tools.pass_visualizer.viewer: a kernel file's lowering, pass by pass
(upstream's pass visualizer, docs/tutorials/debug_tools_for_tilelang.md)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tilelang.errors import ArgumentError
from tilelang.tools.pass_visualizer import viewer

EXAMPLE = Path(viewer.__file__).parent / "examples" / "gemm_relu.py"
SMALL = {"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32}


def test_build_pass_data_traces_every_pass_even_when_the_kernel_is_cached() -> None:
    for _ in range(2):  # the second compilation would be a kernel-cache hit without the override
        name, stages = viewer.build_pass_data(EXAMPLE, target="cpu", kwargs=SMALL)
        assert name == "gemm_relu"
        assert [st["flag"] for st in stages[:2]] == ["source", "input"]
        assert stages[0]["rows"] == EXAMPLE.read_text().splitlines()
        passes = stages[2:]
        assert len(passes) > 10 and passes[-1]["name"].endswith("] codegen")
        assert {st["flag"] for st in passes} == {"changed", "no-op"}
        assert [st["name"].split("]")[0] for st in passes] == [f"[{i:02d}" for i in range(1, len(passes) + 1)]
        first_change = next(st for st in passes if st["flag"] == "changed")
        assert first_change["added"] + first_change["removed"] > 0 and first_change["before"] != first_change["after"]
    page, text = viewer.emit_html(name, stages), viewer.emit_txt(name, stages)
    assert "kernel &#x27;gemm_relu&#x27;" in page and "source code" in page and "T.gemm" in page
    assert text.startswith(f"# kernel: gemm_relu ({len(passes)} passes)")
    assert text.count("\n==== ") == len(stages)
    from tilelang.tools import pass_visualizer

    assert pass_visualizer.emit_txt is viewer.emit_txt


def test_the_command_line_writes_the_page_and_the_text_dump(tmp_path: Path) -> None:
    kernel = tmp_path / "gemm_relu.py"
    shutil.copy(EXAMPLE, kernel)
    args = [f"--set={k}={v}" for k, v in SMALL.items()] + ["--set", "dtype='float32'", "--target", "cpu"]
    done = subprocess.run([sys.executable, "-m", "tilelang.tools.pass_visualizer.viewer", str(kernel), *args],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    page, dump = tmp_path / "gemm_relu_passes.html", tmp_path / "gemm_relu_passes.txt"
    assert page.read_text().startswith("<!doctype html>") and "float32" in dump.read_text()
    assert f"-> {page}" in done.stdout


def test_a_missing_kernel_is_named(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match=r"has no @tilelang.jit kernel named 'nope'; it has: gemm_relu"):
        viewer.build_pass_data(EXAMPLE, factory="nope", target="cpu", kwargs=SMALL)
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(ArgumentError, match="defines no @tilelang.jit kernel at module level"):
        viewer.build_pass_data(empty)

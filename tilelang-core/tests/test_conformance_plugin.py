"""The conformance suite as a pytest plugin: ``--tilelang-backend`` collects it next to
whatever else the run collects, without the option nothing of it runs, and a backend that
cannot compile a case fails it (what a vendor sees from a broken pipeline)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tilelang.testing.conformance import CASES

OPS = {op.split()[0] for case in CASES for op in case.ops}


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_here.py").write_text("def test_own():\n    pass\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           *args, str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, check=False)


def test_the_suite_covers_every_tile_op_and_loop_construct() -> None:
    assert {"T.copy", "T.fill", "T.clear", "T.gemm", "T.cumsum", "T.Parallel", "T.Pipelined", "T.serial",
            "T.unroll", "T.vectorized", "T.atomic_add", "T.atomic_max", "T.atomic_min"} <= OPS
    assert {f"T.reduce_{k}" for k in ("max", "min", "sum", "abssum", "absmax", "bitand", "bitor", "bitxor")} <= OPS


def test_backend_option_adds_the_suite_to_the_run(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "--tilelang-backend=cpu", "-k", "own or parallel_elementwise or cumsum_reverse")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout


def test_without_the_option_the_suite_is_not_collected(tmp_path: Path) -> None:
    result = run_pytest(tmp_path)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout


@pytest.mark.parametrize(("args", "expected"), [
    (("--tilelang-backend=nonesuch",), "BackendNotFoundError"),
    (("--tilelang-backend=cpu", "--tilelang-execution-backend=nonesuch"), "nonesuch"),
])
def test_a_backend_that_cannot_run_the_cases_fails_them(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    result = run_pytest(tmp_path, *args, "-k", "parallel_elementwise")
    assert result.returncode == 1 and "1 failed" in result.stdout and expected in result.stdout, result.stdout

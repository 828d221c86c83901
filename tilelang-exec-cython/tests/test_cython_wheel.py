"""The wheel ships only ``tilelang/jit/adapter/cython`` with its C/Cython templates (core
owns the namespace packages on the way down), registers the entry point, and pins
tilelang-core to the repository version."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import tilelang

DIST_DIR = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_contents(tmp_path: Path) -> None:
    if not (DIST_DIR / "pyproject.toml").is_file():
        pytest.skip("needs the source tree (tests copied elsewhere)")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(DIST_DIR)], check=True)
    (wheel,) = tmp_path.glob("tilelang_exec_cython-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = archive.read(info).decode()
        entry_points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    package = [n for n in names if ".dist-info/" not in n]
    assert package and all(n.startswith("tilelang/jit/adapter/cython/") for n in package), package
    for module in ("__init__.py", "plugin.py", "backend.py", "codegen.py", "c_expr.py", "launcher.py",
                   "toolchain.py", "py.typed", "templates/launcher.pyx", "templates/tl_runtime.h",
                   "templates/tl_cuda.h"):
        assert f"tilelang/jit/adapter/cython/{module}" in names
    assert "[tilelang.plugins]\ncython = tilelang.jit.adapter.cython.plugin" in entry_points
    assert f"Requires-Dist: tilelang-core=={tilelang.__version__}" in metadata
    assert "requires-dist: cython>=3.0" in metadata.lower()  # hatchling normalizes the name
    assert "Requires-Dist: filelock>=3.12" in metadata

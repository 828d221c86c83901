"""The wheel ships only ``tilelang/jit/adapter/cython`` with its C/Cython templates (core
owns the namespace packages on the way down), registers the entry point, and pins
tilelang-core to the repository version."""

from __future__ import annotations

from pathlib import Path

import pytest
import tilelang
from tilelang.testing.wheels import build_wheel

DIST_DIR = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_contents(tmp_path: Path) -> None:
    if not (DIST_DIR / "pyproject.toml").is_file():
        pytest.skip("needs the source tree (tests copied elsewhere)")
    wheel = build_wheel(DIST_DIR, tmp_path)
    names, metadata, entry_points = wheel.names, wheel.metadata, wheel.entry_points
    package = wheel.package_files
    assert package and all(n.startswith("tilelang/jit/adapter/cython/") for n in package), package
    for module in ("__init__.py", "plugin.py", "backend.py", "codegen.py", "c_expr.py", "launcher.py",
                   "toolchain.py", "py.typed", "templates/launcher.pyx", "templates/tl_runtime.h",
                   "templates/tl_cuda.h"):
        assert f"tilelang/jit/adapter/cython/{module}" in names
    assert "[tilelang.plugins]\ncython = tilelang.jit.adapter.cython.plugin" in entry_points
    assert f"Requires-Dist: tilelang-core=={tilelang.__version__}" in metadata
    assert "requires-dist: cython>=3.0" in metadata.lower()  # hatchling normalizes the name
    assert "Requires-Dist: filelock>=3.12" in metadata

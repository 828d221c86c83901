"""The wheel ships only ``tilelang/jit/adapter/nvrtc`` (core owns the namespace packages on
the way down), registers the entry point, and pins tilelang-core to the repository version."""

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
    assert package and all(n.startswith("tilelang/jit/adapter/nvrtc/") for n in package), package
    for module in ("__init__.py", "plugin.py", "backend.py", "launcher.py", "driver.py", "launch_plan.py", "py.typed"):
        assert f"tilelang/jit/adapter/nvrtc/{module}" in names
    assert "[tilelang.plugins]\nnvrtc = tilelang.jit.adapter.nvrtc.plugin" in entry_points
    assert f"Requires-Dist: tilelang-core=={tilelang.__version__}" in metadata
    assert "Requires-Dist: cuda-bindings>=12.8" in metadata

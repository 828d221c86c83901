"""Shared fixtures: every test gets a private kernel cache directory."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # registered here too, so that a copy of these tests run against an installed wheel
    # (nox -s wheel_tests) knows the markers without the source tree's pyproject.toml
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU")
    config.addinivalue_line("markers", "slow: builds distributions in a temporary venv")


@pytest.fixture(autouse=True)
def _private_kernel_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("kernel-cache")))

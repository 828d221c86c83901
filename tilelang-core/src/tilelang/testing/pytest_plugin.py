"""pytest hooks and fixtures every distribution's tests share. A ``conftest.py`` imports
them (pytest picks hooks and fixtures up from the conftest's namespace):

    from tilelang.testing.pytest_plugin import (  # noqa: F401
        private_kernel_cache, pytest_collection_modifyitems, pytest_configure)

- markers ``gpu`` (needs a CUDA GPU: skipped, with the reason, where torch sees none) and
  ``slow`` (builds distributions or wheels);
- an autouse fixture giving every test a private kernel cache directory.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # registered here rather than in a pyproject, so that copies of the tests run against
    # installed wheels (nox -s wheel_tests) know them too
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU")
    config.addinivalue_line("markers", "slow: builds distributions or wheels")


def gpu_skip_reason() -> str | None:
    """None when torch sees a CUDA GPU, else why GPU tests cannot run."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    why = gpu_skip_reason() if gpu_items else None
    if why is not None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(autouse=True)
def private_kernel_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test compiles into its own kernel cache (no cross-test or user-cache hits)."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("kernel-cache")))

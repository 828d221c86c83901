"""Shared fixtures: a private kernel cache per test, the ``gpu`` marker (skipped without a
CUDA GPU).

Built launcher extensions live next to the kernel cache (``<cache>/../cython``), so tests
of one session share them: a launcher whose sources did not change is compiled once.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # registered here too, so that a copy of these tests outside the source tree (or a run
    # from the repository root) knows the markers without this folder's pyproject.toml
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU")
    config.addinivalue_line("markers", "slow: builds a wheel")


def _gpu_skip_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is false)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    why = _gpu_skip_reason() if gpu_items else None
    for item in gpu_items if why is not None else ():
        item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(autouse=True)
def _private_kernel_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("kernel-cache")))


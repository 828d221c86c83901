"""Shared fixtures: every test gets a private kernel cache directory."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_kernel_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("kernel-cache")))

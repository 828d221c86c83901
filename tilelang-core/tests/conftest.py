"""Shared hooks and fixtures (see tilelang.testing.pytest_plugin)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest
from tilelang.testing.pytest_plugin import (  # noqa: F401 - hooks and fixtures for pytest
    private_kernel_cache,
    pytest_collection_modifyitems,
    pytest_configure,
)


@pytest.fixture(scope="session", autouse=True)
def session_kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A kernel cache for module- and session-scoped fixtures: pytest sets those up before
    a test's function-scoped ``private_kernel_cache``, so without this they compiled into
    the user's own cache (and hit kernels left there by other runs)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("session-kernel-cache")))
        yield


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every PrimFunc compiled by kernels decorated after this fixture ran."""
    seen = []
    module = importlib.import_module("tilelang.jit")  # the package; tilelang.jit is the decorator
    original = module.compile

    def counting(func, **options):
        seen.append(func)
        return original(func, **options)

    monkeypatch.setattr(module, "compile", counting)
    return seen

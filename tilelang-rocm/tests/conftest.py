"""Shared hooks and fixtures (see tilelang.testing.pytest_plugin), and ``needs_hipcc``:
tests that compile with hipcc skip where it is missing, except in CI (``CI=true``), where
a missing hipcc is a failure: noxfile.py's tests session installs it."""

from __future__ import annotations

import os

import pytest
from tilelang.rocm import toolchain
from tilelang.testing.pytest_plugin import (  # noqa: F401 - hooks and fixtures for pytest
    private_kernel_cache,
    pytest_collection_modifyitems,
    pytest_configure,
)


@pytest.fixture
def needs_hipcc() -> None:
    if toolchain.hipcc_path() is not None:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("hipcc is missing in CI: the nox tests session installs it (apt-get install hipcc)")
    pytest.skip("hipcc is not installed (apt-get install hipcc); CI runs these tests")

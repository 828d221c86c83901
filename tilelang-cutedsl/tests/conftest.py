"""Shared hooks and fixtures (see tilelang.testing.pytest_plugin): GPU tests are marked
`gpu` and skipped where torch sees no CUDA device."""

from __future__ import annotations

from tilelang.testing.pytest_plugin import (  # noqa: F401 - hooks and fixtures for pytest
    private_kernel_cache,
    pytest_collection_modifyitems,
    pytest_configure,
)

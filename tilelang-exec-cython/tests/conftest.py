"""Shared fixtures: a private kernel cache per test, the ``gpu`` marker (skipped without a
CUDA GPU).

Built launcher extensions live next to the kernel cache (``<cache>/../cython``), so tests
of one session share them: a launcher whose sources did not change is compiled once.
"""

from __future__ import annotations

from tilelang.testing.pytest_plugin import (  # noqa: F401 - hooks and fixtures for pytest
    private_kernel_cache,
    pytest_collection_modifyitems,
    pytest_configure,
)

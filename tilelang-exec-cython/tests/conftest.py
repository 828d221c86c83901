"""Shared fixtures: a private kernel cache per test, the ``gpu`` marker (skipped without a
CUDA GPU).

Built launcher extensions live under the kernel cache's root (``<cache>/cython``), so each
test builds the launchers it needs in its own private cache.
"""

from __future__ import annotations

from tilelang.testing.pytest_plugin import (  # noqa: F401 - hooks and fixtures for pytest
    private_kernel_cache,
    pytest_collection_modifyitems,
    pytest_configure,
)

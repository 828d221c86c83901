"""Every test compiles into a private kernel cache (tilelang's shared test fixtures)."""

from tilelang.testing.pytest_plugin import private_kernel_cache  # noqa: F401 - an autouse fixture

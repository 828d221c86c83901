"""Upstream's module path of the kernel cache (``from tilelang.cache.kernel_cache import
KernelCache``, as its compile-speed benchmark imports it): the same class."""

from . import KernelCache

__all__ = ["KernelCache"]

"""The cutedsl dialect: the common language plus this backend's extensions, which kernels
reach as ``T.ext.<name>`` (so that ordinary imports never import this package)."""

from tilelang.language import *

from ..extensions import swizzled_shared  # noqa: F401

"""Shared, backend-neutral passes that backends place in their pipelines."""

from ..backend.pass_configs import (
    PassConfigKey,  # upstream's tilelang.transform.PassConfigKey
)
from . import gpu  # the GPU-neutral passes that GPU backends compose
from .global_layouts import ApplyGlobalLayouts
from .lower_tile_ops import LowerTileOps
from .simplify import (  # upstream's tilelang.transform.simplify
    Simplify,
    apply_simplify,
    simplify_prim_func,
)
from .subbyte import LowerSubByteAccess


def LegalizeNegativeIndex():
    """Upstream's pass: every index certain to be negative counts from the end of its axis
    (``A[-1]`` -> ``A[15]`` on 16 elements). Kernels get it when they are parsed
    (tilelang.language.bounds.legalize_negative_indices); this runs it on a module."""
    from ..backend.pass_pipeline import prim_func_pass
    from ..language.bounds import legalize_negative_indices

    return prim_func_pass(lambda func, mod, ctx: legalize_negative_indices(func), "tl.LegalizeNegativeIndex")


__all__ = ["ApplyGlobalLayouts", "LegalizeNegativeIndex", "LowerSubByteAccess", "LowerTileOps", "PassConfigKey",
           "Simplify", "apply_simplify", "gpu", "simplify_prim_func"]

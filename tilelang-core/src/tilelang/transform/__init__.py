"""Shared, backend-neutral passes that backends place in their pipelines."""

from ..backend.pass_configs import (
    PassConfigKey,  # upstream's tilelang.transform.PassConfigKey
)
from . import gpu  # the GPU-neutral passes that GPU backends compose
from .global_layouts import ApplyGlobalLayouts
from .lower_tile_ops import LowerTileOps

__all__ = ["ApplyGlobalLayouts", "LowerTileOps", "PassConfigKey", "gpu"]

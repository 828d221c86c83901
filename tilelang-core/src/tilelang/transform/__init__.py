"""Shared, backend-neutral passes that backends place in their pipelines."""

from ..backend.pass_configs import PassConfigKey  # upstream's tilelang.transform.PassConfigKey
from .lower_tile_ops import LowerTileOps

__all__ = ["LowerTileOps", "PassConfigKey"]

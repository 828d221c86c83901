"""Shared, backend-neutral passes that backends place in their pipelines."""

from .lower_tile_ops import LowerTileOps

__all__ = ["LowerTileOps"]

"""Tile-configuration hints (upstream's ``tilelang.carver.roller`` names): ``Hint`` and
``IntrinInfo``, the rasterization plans, the graph nodes (``PrimFuncNode``, ``OutputNode``,
``Edge``) and the searches (``DefaultPolicy``, ``TensorCorePolicy``) — small searches with
a roofline ranking, not upstream's roller (see ``policy``)."""

from .hint import Hint, IntrinInfo
from .node import Edge, OutputNode, PrimFuncNode
from .policy import DefaultPolicy, TensorCorePolicy
from .rasterization import (
    NoRasterization,
    Rasterization,
    Rasterization2DColumn,
    Rasterization2DRow,
)

__all__ = ["DefaultPolicy", "Edge", "Hint", "IntrinInfo", "NoRasterization", "OutputNode", "PrimFuncNode",
           "Rasterization", "Rasterization2DColumn", "Rasterization2DRow", "TensorCorePolicy"]

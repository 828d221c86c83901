"""Upstream TileLang's ``tilelang.tileop`` import path (``from tilelang.tileop.base import
GemmWarpPolicy``, as its AMD examples write): the tile operators' policies, which live in
``tilelang.language`` here."""

from .base import GemmWarpPolicy

__all__ = ["GemmWarpPolicy"]

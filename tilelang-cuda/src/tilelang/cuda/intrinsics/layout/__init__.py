"""``tilelang.cuda.intrinsics.layout``: upstream TileLang's module of mma.sync operand
layouts (``.mma_layout``), micro-tile sizes (``.utils``) and shared-tile swizzles."""

from .mma_layout import get_swizzle_layout, make_mma_swizzle_layout
from .utils import get_mma_micro_size

__all__ = ["get_mma_micro_size", "get_swizzle_layout", "make_mma_swizzle_layout"]

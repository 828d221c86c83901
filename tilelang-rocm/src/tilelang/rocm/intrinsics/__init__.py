"""``tilelang.rocm.intrinsics``: upstream TileLang's module of MFMA operand layouts
(``.mfma_layout``), micro-tile sizes (``.utils``) and ``make_mfma_swizzle_layout``.
``T.gemm`` chooses and emits the MFMA instructions itself; upstream's hand-driven emitters
(``MatrixCoreIntrinEmitter`` and its preshuffle and WMMA siblings) are not provided."""

from .mfma_layout import make_mfma_swizzle_layout
from .utils import get_mma_micro_size

__all__ = ["get_mma_micro_size", "make_mfma_swizzle_layout"]

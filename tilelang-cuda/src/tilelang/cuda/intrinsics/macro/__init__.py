"""``tilelang.cuda.intrinsics.macro``: upstream TileLang's warp-level tensor-core emitters,
with which a kernel drives ``ldmatrix`` / ``mma.sync`` by hand (``mma_macro_generator``)."""

from .mma_macro_generator import TensorCoreIntrinEmitter

__all__ = ["TensorCoreIntrinEmitter"]

"""``tilelang.cuda.intrinsics``: upstream TileLang's module of that name: the shared-memory
layout helpers (``make_mma_swizzle_layout``, ``get_swizzle_layout``; mma.sync's operand
layouts in ``.layout.mma_layout``) and, in ``.macro``,
the warp-level tensor-core emitter (``TensorCoreIntrinEmitter``) with which a kernel drives
ldmatrix / mma.sync by hand. ``T.gemm`` chooses and emits the tensor-core instructions
itself (mma.sync, wgmma); the emitter is for kernels written against upstream's.
``.sparse_layout`` names T.gemm_sp's metadata format as upstream's sparse GEMM example
imports it. Upstream's other emitters (the ladder-transform, WGMMA, sparse and tcgen05 ones)
are not provided.
"""

from .layout import get_mma_micro_size
from .layout.mma_layout import get_swizzle_layout, make_mma_swizzle_layout

__all__ = ["get_mma_micro_size", "get_swizzle_layout", "make_mma_swizzle_layout"]

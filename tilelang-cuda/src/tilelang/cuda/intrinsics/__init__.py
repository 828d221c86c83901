"""``tilelang.cuda.intrinsics``: the shared-memory layout helpers of upstream TileLang's
module of that name (``make_mma_swizzle_layout``, ``get_swizzle_layout``).

Upstream's module also holds its MMA/WGMMA macro emitters (``TensorCoreIntrinEmitter``
and friends), with which a kernel drives ldmatrix/mma by hand. They are not provided: here
``T.gemm`` chooses and emits the tensor-core instructions itself (mma.sync, wgmma), and the
emitters' contract is upstream's layout/fragment machinery, which this project does not
expose to kernels.
"""

from .mma_layout import get_swizzle_layout, make_mma_swizzle_layout

__all__ = ["get_swizzle_layout", "make_mma_swizzle_layout"]

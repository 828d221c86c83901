"""CUDA-only passes: tensor-core GEMMs (mma.sync, wgmma), cp.async and TMA pipelines, warp
specialization, CUDA's atomic and warp functions. The GPU-neutral passes the CUDA pipeline also runs live in core
(``tilelang.transform.gpu``)."""

from . import fastmath  # noqa: F401  (registers CUDA's rules for T.__exp, T.ieee_add ...)
from .atomics import LowerAtomics
from .tensor_core import LowerTensorCoreGemm
from .warp_ops import LowerWarpOps
from .warp_specialize import SpecializeWarps

__all__ = ["LowerAtomics", "LowerTensorCoreGemm", "LowerWarpOps", "SpecializeWarps"]

"""ROCm instruction selection: MFMA GEMMs, HIP's atomic and warp functions. The GPU-neutral
passes the pipeline also runs live in core (``tilelang.transform.gpu``)."""

from .atomics import LowerAtomics
from .mfma import LowerMfmaGemm
from .warp_ops import FindFirstSet, LowerWarpOps

__all__ = ["FindFirstSet", "LowerAtomics", "LowerMfmaGemm", "LowerWarpOps"]

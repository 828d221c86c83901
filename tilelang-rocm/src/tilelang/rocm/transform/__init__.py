"""ROCm instruction selection: MFMA GEMMs and HIP's atomic functions. The GPU-neutral
passes the pipeline also runs live in core (``tilelang.transform.gpu``)."""

from .atomics import LowerAtomics
from .mfma import LowerMfmaGemm

__all__ = ["LowerAtomics", "LowerMfmaGemm"]

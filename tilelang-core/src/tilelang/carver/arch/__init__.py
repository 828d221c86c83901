"""Device descriptions for tiling decisions: ``CUDA(target)``, ``CDNA(target)``, and
upstream's predicates (``is_hopper_arch(arch)``, ...). ``driver`` queries the current GPU."""

from . import driver
from .arch_base import TileDevice
from .cdna import CDNA, is_cdna_arch
from .cuda import (
    CUDA,
    has_mma_support,
    is_ada_arch,
    is_ampere_arch,
    is_cuda_arch,
    is_hopper_arch,
    is_volta_arch,
)

__all__ = ["CDNA", "CUDA", "TileDevice", "driver", "has_mma_support", "is_ada_arch", "is_ampere_arch",
           "is_cdna_arch", "is_cuda_arch", "is_hopper_arch", "is_volta_arch"]

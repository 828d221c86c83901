"""Operator templates that recommend tile configurations (upstream's names)."""

from .base import BaseTemplate
from .conv import ConvTemplate
from .elementwise import ElementwiseTemplate
from .flashattention import FlashAttentionTemplate
from .gemv import GEMVTemplate
from .general_reduce import GeneralReductionTemplate
from .matmul import MatmulTemplate

__all__ = ["BaseTemplate", "ConvTemplate", "ElementwiseTemplate", "FlashAttentionTemplate", "GEMVTemplate",
           "GeneralReductionTemplate", "MatmulTemplate"]

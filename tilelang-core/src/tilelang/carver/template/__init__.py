"""Operator templates that recommend tile configurations (upstream's names)."""

from .matmul import MatmulTemplate

__all__ = ["MatmulTemplate"]

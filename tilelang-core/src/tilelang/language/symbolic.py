"""Symbolic (dynamic) dimensions."""

from __future__ import annotations

from tvm import tirx


def symbolic(name: str, dtype: str = "int32") -> tirx.Var:
    """A named dynamic dimension: ``M = T.symbolic("M")`` then ``T.Tensor((M, 64), ...)``.
    Its value is taken from the shapes of the arguments at each call."""
    return tirx.Var(name, dtype)


dynamic = symbolic

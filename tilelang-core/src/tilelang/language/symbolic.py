"""Symbolic (dynamic) dimensions."""

from __future__ import annotations

from typing import Any

from tvm import tirx

from .dtypes import as_dtype_str
from .eager import split_names


def dynamic(name: str, dtype: str = "int32") -> Any:
    """A named dynamic dimension: ``M = T.dynamic("M")`` then ``T.Tensor((M, 64), ...)``.
    Its value is taken from the shapes of the arguments at each call, so new sizes do not
    recompile the kernel. ``T.dynamic("M, N")`` gives several."""
    variables = tuple(tirx.Var(n, as_dtype_str(dtype)) for n in split_names(name, "T.dynamic"))
    return variables[0] if len(variables) == 1 else variables


symbolic = dynamic

"""``T.reinterpret`` in upstream's argument order: ``T.reinterpret(value, dtype)``.

TVMScript's own ``T.reinterpret(dtype, value)`` puts the dtype first; both orders are
accepted (the dtype is the argument that is a dtype), so kernels written for either work.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx

from .dtypes import dtype as _dtype


def _is_dtype(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, type) and value in (int, float, bool))


def reinterpret(value: Any, dtype: Any, span: Any = None) -> Any:
    """The bits of ``value`` read as ``dtype`` (same total width)."""
    if _is_dtype(value) and not _is_dtype(dtype):
        value, dtype = dtype, value
    return tirx.reinterpret(str.__str__(_dtype(dtype)), value, span)

"""``T.annotate_safe_value({A: value})`` (upstream's): inside a kernel, an element read of
global tensor ``A`` outside its shape gives ``value`` instead of reading past it.

Each read of an annotated tensor becomes ``value`` unless every index is inside its axis
(``apply_safe_values``, run in the frontend normalization before the bounds check, which
then sees the reads guarded). A tile copy out of such a tensor already reads zero outside
it (``T.copy``); a copy out of a tensor whose safe value is not zero becomes the element
loop it stands for (a ``T.Parallel`` nest over the tile, each read guarded), so its elements
outside read the value given. Writes are not changed: a write outside a tensor is still an
error where it is certain.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad, TensorRegion

from ..errors import LanguageError
from .ops import TILE_OPS

#: (buffer, value) pairs of the kernel being parsed, consumed by apply_safe_values
_PENDING: list[tuple[Any, Any]] = []


def annotate_safe_value(mapping: dict[Any, Any]) -> None:
    """Reads of each tensor of ``mapping`` outside its shape give the value it maps to."""
    from .kernel import _ACTIVE

    if not _ACTIVE:
        raise LanguageError("T.annotate_safe_value is only valid inside a T.Kernel frame")
    if not isinstance(mapping, dict) or not mapping:
        raise LanguageError(f"T.annotate_safe_value takes a dict {{tensor: value}}, got {mapping!r}")
    for buffer, value in mapping.items():
        if not isinstance(buffer, tirx.Buffer) or buffer.scope() != "global":
            raise LanguageError(f"T.annotate_safe_value: {getattr(buffer, 'name', buffer)!r} is not a global "
                                "tensor (a kernel parameter); only reads of those can leave their shape")
        dtype = str(buffer.dtype)
        if isinstance(value, (bool, int, float)):
            value = tirx.const(value, dtype)
        elif not isinstance(value, tirx.PrimExpr):
            raise LanguageError(f"T.annotate_safe_value: the value for {buffer.name!r} must be a number or an "
                                f"expression, got {value!r}")
        elif str(value.ty.dtype) != dtype:
            value = tirx.Cast(dtype, value)
        earlier = next((v for b, v in _PENDING if b.same_as(buffer)), None)
        if earlier is not None and not tvm_ffi.structural_equal(earlier, value):
            raise LanguageError(f"T.annotate_safe_value: {buffer.name!r} already reads "
                                f"{getattr(earlier, 'value', earlier)} outside its shape in this kernel; a tensor has "
                                f"one safe value per kernel (here {getattr(value, 'value', value)} too): annotate "
                                "it once")
        _PENDING.append((buffer, value))


def apply_safe_values(func: Any) -> Any:
    """Guard every read of an annotated tensor (see the module docstring)."""
    if not _PENDING:
        return func
    safe = list(_PENDING)  # (pairs a kernel whose parse failed left behind match no buffer here)
    _PENDING.clear()

    def value_of(buffer: Any) -> Any | None:
        return next((v for b, v in safe if b.same_as(buffer)), None)

    refused: list[Any] = []  # raised after the walk: FFI callbacks lose the exception type

    def on_load(load: Any) -> Any:
        value = value_of(load.source) if isinstance(load.source, tirx.Buffer) else None
        if value is None:
            return load
        if any(isinstance(i, tirx.Ramp) for i in load.indices):
            refused.append(("vector", load.source))
            return load
        inside = None
        for index, extent in zip(load.indices, load.source.shape):
            axis = tirx.And(index >= 0, index < tirx.Cast(str(index.ty), extent)) if str(extent.ty) != str(index.ty) \
                else tirx.And(index >= 0, index < extent)
            inside = axis if inside is None else tirx.And(inside, axis)
        return tirx.if_then_else(inside, load, value) if inside is not None else load

    def padded(region: Any) -> bool:
        value = value_of(region.source) if isinstance(region.source, tirx.Buffer) else None
        return value is not None and not (isinstance(value, (tirx.IntImm, tirx.FloatImm)) and value.value == 0)

    def on_evaluate(stmt: Any) -> Any:
        call = stmt.value
        if getattr(getattr(call, "op", None), "name", None) != TILE_OPS["copy"] or not padded(call.args[0]):
            return stmt
        nest = _element_copy(call.args[0], call.args[1])  # its reads are guarded by the pass below
        if nest is None:
            refused.append(("copy", call.args[0].source))
            return stmt
        return nest

    def on_region(region: Any) -> Any:
        if padded(region):  # any other tile op reading such a tensor
            refused.append(("tile", region.source))
        return region

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post")
    body = tvm_ffi.structural_map(body, [(TensorLoad, on_load), (TensorRegion, on_region)], order="post")
    if refused:
        kind, buffer = refused[0]
        if kind == "vector":
            raise LanguageError(f"T.annotate_safe_value: {buffer.name!r} is read as a vector (T.Ramp indices); "
                                "its reads outside the tensor are guarded element by element only: read it "
                                "one element at a time")
        what = "a T.copy whose source and destination tiles differ" if kind == "copy" else "a tile op"
        raise LanguageError(f"T.annotate_safe_value: {what} reads {buffer.name!r}, whose safe value is "
                            f"{getattr(value_of(buffer), 'value', value_of(buffer))}; a tile op reads zero outside "
                            "a tensor. Read it element by element (for i, j in T.Parallel(...)) to get the safe "
                            "value, or make it 0")
    return func if body.same_as(func.body) else func.with_body(body)


def _tile_axes(region: Any) -> list[int]:
    return [a for a, r in enumerate(region.region) if not (isinstance(r.extent, tirx.IntImm) and r.extent.value == 1)]


def _element_copy(src: Any, dst: Any) -> Any | None:
    """``T.copy(src, dst)`` as the T.Parallel nest it stands for; None where the tiles'
    extents are not the same constants."""
    s_axes, d_axes = _tile_axes(src), _tile_axes(dst)
    extents = [src.region[a].extent for a in s_axes]
    if len(s_axes) != len(d_axes) or not all(
            isinstance(e, tirx.IntImm) and isinstance(dst.region[d].extent, tirx.IntImm)
            and e.value == dst.region[d].extent.value for e, d in zip(extents, d_axes)):
        return None
    loop_vars = [tirx.Var(f"i{n}", "int32") for n in range(len(extents))]

    def at(region: Any, axes: list[int]) -> list[Any]:
        indices = [r.min for r in region.region]
        for axis, var in zip(axes, loop_vars):
            indices[axis] = indices[axis] + tirx.Cast(str(indices[axis].ty), var) \
                if str(indices[axis].ty) != "int32" else indices[axis] + var
        return indices

    value = tirx.BufferLoad(src.source, at(src, s_axes))
    if str(src.source.dtype) != str(dst.source.dtype):
        value = tirx.Cast(str(dst.source.dtype), value)
    stmt = tirx.BufferStore(dst.source, value, at(dst, d_axes))
    for var, extent in reversed(list(zip(loop_vars, extents))):
        stmt = tirx.For(var, tirx.IntImm("int32", 0), tirx.IntImm("int32", extent.value), tirx.ForKind.PARALLEL,
                        stmt, annotations={"tilelang.parallel": 1})
    return stmt

"""Sub-byte tensors (``T.float4_e2m1fn``, ``T.int4``, ``T.uint4``): two elements per byte.

Upstream TileLang's convention, which torch shares: a tensor of logical shape ``(m, k)``
in fp4 is stored as bytes of shape ``(m, k // 2)`` (torch ``uint8``, ``int8`` or
``float4_e2m1fn_x2``), element ``2j`` in the low nibble of byte ``j`` and ``2j + 1`` in
the high one. Strides of the other axes are in elements logically and in bytes in storage
(half as many); the last axis has stride 1.

Two steps, both target-neutral:

- ``pack_params`` (before lowering): each sub-byte tensor parameter becomes a ``uint8``
  parameter of the storage shape, and the kernel body sees the logical tensor as a view of
  its bytes. A symbolic last dimension ``n`` (or stride ``s``) that only this tensor
  determines becomes the storage symbol ``n_bytes`` with ``n = n_bytes * 2``. The
  parameter's logical dtype is recorded (``PACKED_ATTR``) so that argument binding accepts
  the storage dtypes and allocates outputs as upstream does.
- ``LowerSubByteAccess`` (once the tile ops are element accesses): every access of a
  sub-byte buffer (a parameter's view, a ``T.view`` as fp4, a ``T.alloc_*`` of fp4) becomes
  a byte access. A load is the element's nibble decoded to float32 (fp4) or int32 (int4,
  uint4), so fp4 arithmetic is float32 arithmetic; a store writes its nibble into the byte
  and keeps the other one (a copy between buffers of the same sub-byte type moves the
  nibble unchanged). float32 -> e2m1 rounds to nearest, ties to even, and saturates at
  +-6, as CUDA's ``__nv_cvt_float_to_fp4(.., cudaRoundNearest)``; the sign of -0.0 is kept.

Two threads that store the two halves of one byte at the same time would race; a
``T.Parallel`` loop whose last index is its innermost variable therefore gives each thread
both elements of a byte (the loop is split by two), and a store anywhere else in a
parallel loop is refused with the way out.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad
from tvm.sym.analyzer import Analyzer

from ..backend.pass_pipeline import prim_func_pass
from ..errors import LanguageError

#: sub-byte dtype -> its bits per element (what a byte holds 8 // bits of)
SUBBYTE_BITS = {"float4_e2m1fn": 4, "int4": 4, "uint4": 4}
#: function attribute: {parameter name: logical sub-byte dtype} of the packed parameters
PACKED_ATTR = "tilelang.packed_params"
STORAGE_DTYPE = "uint8"


def is_subbyte(dtype: Any) -> bool:
    return str(dtype) in SUBBYTE_BITS


# -- parameters -------------------------------------------------------------------------

def _plain_vars(func: Any) -> list[Any]:
    """Variables that the parameters give otherwise than as a sub-byte count: scalars, and
    dimensions or strides that are exactly a variable, except the last dimension and the
    strides of sub-byte tensors (those become byte counts)."""
    found = []
    for param in func.params:
        ty = param.ty
        if not isinstance(ty, tirx.BufferType):
            found.append(param)
            continue
        dims = list(ty.shape)[:-1] if is_subbyte(ty.dtype) else list(ty.shape) + list(ty.strides)
        found.extend(d for d in dims if isinstance(d, tirx.Var))
    return found


class _Storage:
    """Byte counts of sub-byte extents; a variable no other dimension gives is replaced by
    ``<name>_bytes`` (with ``name = <name>_bytes * pack``), shared by every tensor using it."""

    def __init__(self, func: Any) -> None:
        self.bound = _plain_vars(func)
        self.replaced: list[tuple[Any, Any, int]] = []  # (variable, its byte count, pack)
        self.binds: list[Any] = []
        self.analyzer = Analyzer()

    def extent(self, extent: Any, pack: int, where: str, what: str | None) -> Any:
        """The byte count of a logical last dimension (``what`` None: rounded up; an odd
        count ends in half a byte) or of a stride (``what`` names it: whole bytes only)."""
        if isinstance(extent, tirx.Var) and not any(extent.same_as(v) for v in self.bound):
            for var, stored, factor in self.replaced:
                if var.same_as(extent) and factor == pack:
                    return stored
            if not any(var.same_as(extent) for var, _, _ in self.replaced):
                stored = tirx.Var(f"{extent.name}_bytes", extent.ty)
                self.binds.append(tirx.Bind(extent, stored * pack))
                self.replaced.append((extent, stored, pack))
                return stored
        analyzer = self.analyzer
        stored = analyzer.simplify(tirx.floordiv(extent, pack))
        if analyzer.can_prove_equal(stored * pack, extent):
            return stored
        if what is None:
            return analyzer.simplify(tirx.floordiv(extent + (pack - 1), pack))
        raise LanguageError(f"{where}: {what} is {extent}, not a whole number of bytes ({pack} elements each); "
                            f"make it a multiple of {pack}")


def pack_params(func: Any, name: str) -> Any:
    """``func`` with its sub-byte tensor parameters as byte tensors (see the module doc)."""
    packed = [p for p in func.params if isinstance(p.ty, tirx.BufferType) and is_subbyte(p.ty.dtype)]
    if not packed:
        return func
    storage = _Storage(func)
    params, prologue, logical = [], [], {}
    for param in func.params:
        if not any(param.same_as(p) for p in packed):
            params.append(param)
            continue
        ty, dtype = param.ty, str(param.ty.dtype)
        pack = 8 // SUBBYTE_BITS[dtype]
        where = f"kernel {name!r}, parameter {param.name!r} ({dtype}, {pack} per byte)"
        shape, strides = list(ty.shape), list(ty.strides)
        if not shape:
            raise LanguageError(f"{where}: a sub-byte tensor needs at least one dimension")
        if strides and not (isinstance(strides[-1], tirx.IntImm) and strides[-1].value == 1):
            raise LanguageError(f"{where}: the last stride is {strides[-1]}; the elements of a sub-byte "
                                "tensor's last axis are packed into bytes, so that stride must be 1")
        storage_shape = shape[:-1] + [storage.extent(shape[-1], pack, where, None)]
        storage_strides = [storage.extent(s, pack, where, f"stride {i}")
                           for i, s in enumerate(strides[:-1])] + strides[-1:]
        stored = tirx.decl_buffer(storage_shape, STORAGE_DTYPE, name=param.name, strides=storage_strides or None)
        params.append(stored)
        prologue.append(tirx.DeclBuffer(param, data=tirx.buffer_data(stored)))
        logical[param.name] = dtype
    body = tirx.SeqStmt([*storage.binds, *prologue, func.body])
    packed_func = tirx.PrimFunc(params, body, func.ret_type, func.attrs, func.span)
    return packed_func.with_attr(PACKED_ATTR, logical)


def packed_params(func: Any) -> dict[str, str]:
    attrs = func.attrs
    found = attrs.get(PACKED_ATTR) if attrs is not None else None
    return {str(k): str(v) for k, v in found.items()} if found is not None else {}


# -- values -----------------------------------------------------------------------------

def _i32(value: int) -> Any:
    return tirx.const(value, "int32")


def _f32(value: float) -> Any:
    return tirx.const(value, "float32")


def decode(code: Any, dtype: str) -> Any:
    """The value of a sub-byte code (int32 in [0, 2**bits)): float32 for fp4, int32 else."""
    if dtype == "uint4":
        return code
    nibble = tirx.Var("code", "int32")
    return tirx.Let(nibble, code, _decode(nibble, dtype))


def _decode(nibble: Any, dtype: str) -> Any:
    if dtype == "int4":
        return tirx.bitwise_xor(nibble, _i32(8)) - _i32(8)
    # e2m1: sign, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0 is subnormal (0, 0.5)
    exponent = tirx.bitwise_and(tirx.shift_right(nibble, _i32(1)), _i32(3))
    mantissa = tirx.bitwise_and(nibble, _i32(1))
    normal = tirx.Cast("float32", tirx.shift_left(mantissa + _i32(2), exponent)) * _f32(0.25)
    magnitude = tirx.Select(exponent == _i32(0), tirx.Cast("float32", mantissa) * _f32(0.5), normal)
    return tirx.Select(tirx.bitwise_and(nibble, _i32(8)) != _i32(0), -magnitude, magnitude)


#: e2m1 magnitudes' rounding thresholds: (bound, strict); a magnitude past a bound moves up
#: one code. Ties go to the even code (mantissa 0), so those bounds are strict (x > b).
_E2M1_STEPS = ((0.25, True), (0.75, False), (1.25, True), (1.75, False), (2.5, True), (3.5, False),
               (5.0, True))


def encode(value: Any, dtype: str) -> Any:
    """The code (int32 in [0, 2**bits)) of ``value`` in sub-byte ``dtype``."""
    if dtype in ("int4", "uint4"):
        whole = value if str(value.ty.dtype).startswith(("int", "uint")) else tirx.Cast("int32", value)
        return tirx.bitwise_and(tirx.Cast("int32", whole), _i32(15))
    x = tirx.Var("x", "float32")
    return tirx.Let(x, value if str(value.ty.dtype) == "float32" else tirx.Cast("float32", value), _encode(x))


def _encode(x: Any) -> Any:
    magnitude = tirx.abs(x)
    code = _i32(0)
    for bound, strict in _E2M1_STEPS:
        up = magnitude > _f32(bound) if strict else magnitude >= _f32(bound)
        code = code + tirx.Cast("int32", up)
    code = tirx.Select(tirx.isnan(x), _i32(7), code)  # NaN: the largest code (no fp4 value is NaN)
    negative = tirx.reinterpret("int32", x) < _i32(0)  # the sign bit (-0.0 too)
    return tirx.bitwise_or(code, tirx.Select(negative, _i32(8), _i32(0)))


# -- accesses ---------------------------------------------------------------------------

class _Packed:
    """A sub-byte buffer and the byte buffer its accesses go through."""

    def __init__(self, buffer: Any, data: Any, analyzer: Analyzer) -> None:
        self.buffer = buffer
        self.dtype = str(buffer.dtype)
        self.bits = SUBBYTE_BITS[self.dtype]
        self.pack = 8 // self.bits
        shape = list(buffer.shape)
        strides = list(buffer.strides)
        if not strides:
            step: Any = tirx.const(1, shape[-1].ty.dtype if shape else "int32")
            for dim in reversed(shape):
                strides.append(step)
                step = step * dim
            strides.reverse()
        self.strides = strides
        span = sum(((d - 1) * s for d, s in zip(shape, strides)), tirx.const(1, "int32")) + buffer.elem_offset
        count = analyzer.simplify(tirx.floordiv(span + (self.pack - 1), self.pack))
        if data is None:  # an allocation: a byte array of its own
            self.bytes = tirx.decl_buffer((count,), STORAGE_DTYPE, name=f"{buffer.name}_bytes",
                                          scope=buffer.scope())
        else:
            self.bytes = tirx.decl_buffer((count,), STORAGE_DTYPE, name=f"{buffer.name}_bytes", data=data)

    def locate(self, indices: Any, analyzer: Analyzer) -> tuple[Any, Any]:
        """(byte index, bit shift) of the element at ``indices``."""
        offset = sum((i * s for i, s in zip(indices, self.strides)), self.buffer.elem_offset)
        offset = analyzer.simplify(offset)
        byte = analyzer.simplify(tirx.floordiv(offset, self.pack))
        shift = analyzer.simplify(tirx.Cast("int32", tirx.floormod(offset, self.pack)) * self.bits)
        return byte, shift

    def nibble(self, indices: Any, analyzer: Analyzer) -> Any:
        byte, shift = self.locate(indices, analyzer)
        word = tirx.Cast("int32", tirx.BufferLoad(self.bytes, [byte]))
        return tirx.bitwise_and(tirx.shift_right(word, shift), _i32((1 << self.bits) - 1))

    def store(self, indices: Any, code: Any, analyzer: Analyzer, span: Any) -> Any:
        byte, shift = self.locate(indices, analyzer)
        mask = (1 << self.bits) - 1
        old = tirx.Cast("int32", tirx.BufferLoad(self.bytes, [byte]))
        kept = tirx.bitwise_and(old, tirx.bitwise_xor(tirx.shift_left(_i32(mask), shift), _i32(255)))
        new = tirx.bitwise_or(kept, tirx.shift_left(tirx.bitwise_and(code, _i32(mask)), shift))
        return tirx.BufferStore(self.bytes, tirx.Cast(STORAGE_DTYPE, new), [byte], span=span)


def _split_parallel(func: Any, packed: list[_Packed], analyzer: Analyzer) -> Any:
    """T.Parallel nests that store to sub-byte buffers: each thread gets whole bytes (the
    module doc). Raises LanguageError for a store whose byte other iterations may share."""
    from ..language.ops import substitute, uses_var
    from .gpu.fragments import parallel_nest
    from .gpu.ir_util import unrolled

    def stores_in(body: Any) -> list[tuple[Any, _Packed]]:
        found: list[tuple[Any, _Packed]] = []

        def visit(store: Any) -> None:
            target = next((p for p in packed if p.buffer.same_as(store.buffer)), None)
            if target is not None:
                found.append((store, target))

        tvm_ffi.structural_walk(body, (tirx.BufferStore, visit))
        return found

    refusals: list[str] = []
    split_loops: list[Any] = []  # the loops made here (the map visits them again: left as they are)

    def on_for(loop: Any) -> Any:
        if loop.kind != tirx.ForKind.PARALLEL or any(loop.same_as(done) for done in split_loops):
            return loop
        nest, body = parallel_nest(loop)
        stores = stores_in(body)
        if not stores:
            return loop
        inner = nest[-1]
        variables = [l.loop_var for l in nest]
        split = False
        for store, target in stores:
            last = store.indices[-1]
            uses = [v for v in variables if uses_var(last, v)]
            if not uses:
                continue  # one byte column per iteration of the other axes' (whole-byte) strides
            rest = analyzer.simplify(last - inner.loop_var)
            if uses == [inner.loop_var] and not uses_var(rest, inner.loop_var) and analyzer.can_prove(
                    tirx.floormod(rest, target.pack) == 0) and analyzer.can_prove(
                    tirx.floormod(inner.extent, target.pack) == 0) and analyzer.can_prove(inner.min == 0):
                split = True
                continue
            refusals.append(f"{target.buffer.name}[{', '.join(str(i) for i in store.indices)}]")
            return loop
        if not split:
            return loop
        pack = stores[0][1].pack
        outer = tirx.Var(f"{inner.loop_var.name}_byte", inner.loop_var.ty)
        lane = tirx.Var(f"{inner.loop_var.name}_half", inner.loop_var.ty)
        lanes = unrolled(lane, tirx.const(pack, inner.extent.ty.dtype),
                         substitute(inner.body, [(inner.loop_var, outer * pack + lane)]))
        new_inner = tirx.For(outer, inner.min, analyzer.simplify(tirx.floordiv(inner.extent, pack)),
                             tirx.ForKind.PARALLEL, lanes, annotations=inner.annotations)
        split_loops.append(new_inner)
        result = new_inner
        for l in reversed(nest[:-1]):
            result = tirx.For(l.loop_var, l.min, l.extent, l.kind, result, annotations=l.annotations)
        return result

    body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="pre")
    if refusals:
        raise LanguageError(
            f"T.Parallel store to the sub-byte element {refusals[0]}: two threads could write the two halves "
            "of one byte at once; index the last axis by the innermost T.Parallel variable (plus an even "
            "offset), or store from a T.serial loop in one thread")
    return func.with_body(body)


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    analyzer = Analyzer()
    packed: list[_Packed] = []

    def on_decl(node: Any) -> None:
        if is_subbyte(node.buffer.dtype):
            packed.append(_Packed(node.buffer, node.data, analyzer))

    def on_alloc(node: Any) -> None:
        if is_subbyte(node.buffer.dtype):
            packed.append(_Packed(node.buffer, None, analyzer))

    tvm_ffi.structural_walk(func.body, [(tirx.DeclBuffer, on_decl), (tirx.AllocBuffer, on_alloc)])
    if not packed:
        return func
    func = _split_parallel(func, packed, analyzer)

    def find(buffer: Any) -> _Packed | None:
        return next((p for p in packed if p.buffer.same_as(buffer)), None) if isinstance(buffer, tirx.Buffer) \
            else None

    codes: list[tuple[Any, Any, str]] = []  # (decoded value, its code, dtype): stores reuse the code
    refusals: list[str] = []

    def on_load(load: Any) -> Any:
        target = find(load.source)
        if target is None:
            return load
        code = target.nibble(list(load.indices), analyzer)
        value = decode(code, target.dtype)
        codes.append((value, code, target.dtype))
        return value

    def on_cast(cast: Any) -> Any:
        dtype = str(cast.ty.dtype)
        if not is_subbyte(dtype):
            return cast
        code = encode(cast.value, dtype)
        value = decode(code, dtype)
        codes.append((value, code, dtype))
        return value

    def on_store(store: Any) -> Any:
        target = find(store.buffer)
        if target is None:
            return store
        value = store.value
        code = next((c for v, c, d in codes if v.same_as(value) and d == target.dtype), None)
        if code is None and isinstance(value, (tirx.IntImm, tirx.FloatImm)) and is_subbyte(value.ty.dtype):
            # a constant of the sub-byte type (``T.int4(1)``; TVM folds ``T.cast(0.0, fp4)``
            # into one): its code is that of the same number in the compute type
            wide = tirx.IntImm("int32", value.value) if isinstance(value, tirx.IntImm) \
                else tirx.FloatImm("float32", value.value)
            code = encode(wide, target.dtype)
        if code is None:
            if is_subbyte(value.ty.dtype):
                refusals.append(f"a store to {target.buffer.name!r} of {value}")
                return store
            code = encode(value, target.dtype)
        return target.store(list(store.indices), code, analyzer, store.span)

    def on_decl_rewrite(node: Any) -> Any:
        target = find(node.buffer)
        return node if target is None else tirx.DeclBuffer(target.bytes, data=node.data)

    def on_alloc_rewrite(node: Any) -> Any:
        target = find(node.buffer)
        return node if target is None else tirx.AllocBuffer(target.bytes)

    body = tvm_ffi.structural_map(func.body, [(TensorLoad, on_load), (tirx.Cast, on_cast),
                                              (tirx.BufferStore, on_store),
                                              (tirx.DeclBuffer, on_decl_rewrite),
                                              (tirx.AllocBuffer, on_alloc_rewrite)], order="post")
    if refusals:
        raise LanguageError(f"sub-byte buffer: {refusals[0]} cannot be lowered; cast the value to float32 "
                            "(fp4) or int32 (int4) first")
    return func.with_body(body)


def LowerSubByteAccess() -> Any:
    return prim_func_pass(_run, "tl.LowerSubByteAccess")

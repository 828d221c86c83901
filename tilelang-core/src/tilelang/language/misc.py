"""Small backend-neutral helpers upstream kernels use: ``T.clamp``, ``T.round``,
``T.align_up``, ``T.any_of`` / ``T.all_of``, ``T.extract_lane``, ``T.GemmWarpPolicy``,
``T.sync_threads``, ``T.import_source``, ``T.print`` and ``T.device_assert``.

Each is plain TIR that every backend already maps: a barrier is TVM's
``tvm_storage_sync("shared")`` (``__syncthreads()`` on CUDA), printing is a ``printf`` call
(device printf on CUDA, the C library's on the CPU).
"""

from __future__ import annotations

import contextlib
import enum
from typing import Any

import tvm
from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .kernel import _ACTIVE
from .ops import BLOCK_BARRIER, NAMED_BARRIER_ARRIVE, block_barrier


def clamp(value: Any, min_val: Any = None, max_val: Any = None) -> Any:
    """``min(max(value, min_val), max_val)``: ``value`` limited to [min_val, max_val]
    (upstream's T.clamp and its keyword names); a bound left None does not limit."""
    if min_val is not None:
        value = tirx.max(value, min_val)
    if max_val is not None:
        value = tirx.min(value, max_val)
    return value


def _dp4a_operand(value: Any, what: str, dtype: str) -> tuple[Any, list[Any]]:
    """(buffer, indices of its first element) of a ``T.dp4a`` operand: an element
    (``A_local[k]``), a slice (``A[k:k + 4]``) or a whole buffer, of ``dtype``."""
    from tvm.ir import TensorLoad, TensorRegion

    if isinstance(value, TensorLoad) and isinstance(value.source, tirx.Buffer):
        buffer, indices = value.source, list(value.indices)
    elif isinstance(value, TensorRegion):
        buffer, indices = value.source, [r.min for r in value.region]
    elif tirx.is_buffer_var(value) or isinstance(value, tirx.Buffer):
        buffer, indices = value, [tirx.IntImm("int32", 0)] * len(value.shape)
    else:
        raise LanguageError(f"T.dp4a: {what} must be a buffer element (A_local[k]), a slice or a buffer, "
                            f"got {type(value).__name__}")
    if str(buffer.dtype) != dtype:
        raise LanguageError(f"dp4a requires {'an int32 accumulator' if dtype == 'int32' else 'int8 inputs'}, "
                            f"got {what}.dtype='{buffer.dtype}'")
    return buffer, indices


def dp4a(A: Any, B: Any, C: Any) -> None:
    """Upstream's ``T.dp4a(A, B, C)``: ``C += A[0] * B[0] + ... + A[3] * B[3]`` over four
    consecutive int8 elements of ``A`` and ``B`` (from the element, slice or buffer given),
    into an int32 element of ``C``, products and sums in int32 (CUDA's ``__dp4a``). It is
    written as those four multiply-adds, which every backend runs."""
    (a, a_at), (b, b_at) = _dp4a_operand(A, "A", "int8"), _dp4a_operand(B, "B", "int8")
    c, c_at = _dp4a_operand(C, "C", "int32")
    total = tirx.BufferLoad(c, c_at)
    for i in range(4):
        ai, bi = [*a_at[:-1], a_at[-1] + i], [*b_at[:-1], b_at[-1] + i]
        total = total + tirx.Cast("int32", tirx.BufferLoad(a, ai)) * tirx.Cast("int32", tirx.BufferLoad(b, bi))
    _ib.buffer_store(c, total, c_at)


def align_up(x: Any, align: Any) -> Any:
    """``x`` rounded up to a multiple of ``align``: ``T.ceildiv(x, align) * align``, as
    upstream's (so -1 aligns up to 0)."""
    x, align = tirx.convert(x), tirx.convert(align)
    return tirx.floordiv(x + align - 1, align) * align


#: the most elements T.any_of / T.all_of combine (each is one load in the condition)
MAX_LOGICAL_ELEMENTS = 256


def _elements(region: Any, what: str) -> list[Any]:
    """A load of every element of ``region`` (a buffer, a slice ``B[i, 0:4]`` or an element)."""
    import itertools

    from .tile import _region

    tile = _region(region, None, what)
    buffer = tile.source
    extents = []
    for r in tile.region:
        if not isinstance(r.extent, tirx.IntImm):
            raise LanguageError(f"{what}: the extent {r.extent} of {buffer.name} is not a constant; "
                                f"it combines at most {MAX_LOGICAL_ELEMENTS} elements named by constant "
                                "slices (B[i, 0:4]); test a symbolic range with a loop and T.alloc_var")
        extents.append(int(r.extent.value))
    count = 1
    for e in extents:
        count *= e
    if count > MAX_LOGICAL_ELEMENTS:
        raise LanguageError(f"{what}: {buffer.name}'s region has {count} elements, more than the "
                            f"{MAX_LOGICAL_ELEMENTS} it combines in one condition; reduce it first "
                            "(T.reduce_max of a 0/1 tile) or test a smaller slice")
    loads = []
    for offsets in itertools.product(*(range(e) for e in extents)):
        indices = [r.min + o for r, o in zip(tile.region, offsets)]
        load = tirx.BufferLoad(buffer, indices)
        loads.append(load if str(buffer.dtype) == "bool" else load != tirx.const(0, str(buffer.dtype)))
    return loads


def any_of(region: Any) -> Any:
    """True where some element of ``region`` is true (non-zero): upstream's T.any_of, as
    ``a[0] or a[1] or ...`` over a constant region (``if T.any_of(mask[by, bx, k, :]):``)."""
    loads = _elements(region, "T.any_of")
    result = loads[0]
    for load in loads[1:]:
        result = tirx.Or(result, load)
    return result


def all_of(region: Any) -> Any:
    """True where every element of ``region`` is true (non-zero): upstream's T.all_of."""
    loads = _elements(region, "T.all_of")
    result = loads[0]
    for load in loads[1:]:
        result = tirx.And(result, load)
    return result


def extract_lane(vector: Any, lane: Any) -> Any:
    """Lane ``lane`` of a vector value (``T.extract_lane(packed, 1)``: upstream's name for
    TIR's one-lane ``Shuffle``)."""
    from ..errors import LanguageIndexError, LanguageTypeError

    if not isinstance(vector, tirx.PrimExpr):
        raise LanguageTypeError(f"T.extract_lane expects a PrimExpr vector, got {type(vector).__name__}")
    lanes = tvm.DataType(str(vector.ty)).lanes
    if lanes == 1:
        raise LanguageError(f"T.extract_lane expects a vector expression, got {vector} of dtype {vector.ty}")
    if isinstance(lane, tirx.IntImm):
        lane = int(lane.value)
    if not isinstance(lane, int) or isinstance(lane, bool):
        raise LanguageTypeError(f"T.extract_lane: the lane must be a compile-time integer, got {lane!r}")
    if not 0 <= lane < lanes:
        raise LanguageIndexError(f"T.extract_lane: lane {lane} is out of bounds for a vector of {lanes} lanes")
    return tirx.Shuffle([vector], [tirx.const(lane, "int32")])


def infinity(dtype: Any, span: Any = None) -> Any:
    """Positive infinity of a floating type. TVM's own knows float16/32/64 only; bfloat16
    and the fp8 types with an infinity (e5m2) are encoded here too. Types without one
    (e4m3fn and the other finite fp8/fp4 formats) are refused with what to use instead."""
    from .dtypes import as_dtype_str

    name = as_dtype_str(dtype)
    kind = tvm.DataType(name)
    if not name.startswith(("float", "bfloat")) or kind.lanes != 1:
        raise LanguageError(f"T.infinity: {name} is not a scalar floating type; infinity needs one (T.float32 ...)")
    if name.endswith(("fn", "fnu")) or name.startswith(("float4_", "float6_")) or "e8m0" in name:
        raise LanguageError(f"T.infinity: {name} has no infinity (a finite format); use T.max_value({name!r})")
    if name.startswith("float8"):
        # the encoding itself: CUDA's float -> fp8 conversion saturates (inf became 57344)
        return tirx.reinterpret(name, tirx.const(0x7C, "uint8"))  # e5m2: sign 0, exponent all ones
    return tirx.FloatImm(name, float("inf"), span)


ROUNDING_MODES = ("ties-to-even", "ties-away-from-zero")


def round(x: Any, rounding_mode: Any = "ties-to-even", span: Any = None) -> Any:
    """``x`` rounded to the nearest integer; a tie goes to the even neighbour (TVM's
    ``round``, the default) or away from zero (``rounding_mode="ties-away-from-zero"``, C's
    ``round``), as upstream's T.round. The second is ``t + (|x - t| >= 0.5 ? sign(x) : 0)``
    with ``t = trunc(x)``: ``x - t`` is exact, where ``floor(|x| + 0.5)`` would round
    0.49999997 up. Types narrower than float32 are rounded in float32 (exact: every value
    of theirs is a float32 and the result an integer they hold)."""
    if rounding_mode is None:
        rounding_mode = "ties-to-even"
    elif not isinstance(rounding_mode, str):  # TVM's positional span
        span, rounding_mode = rounding_mode, "ties-to-even"
    if rounding_mode not in ROUNDING_MODES:
        raise LanguageError(f"T.round: rounding_mode must be one of {list(ROUNDING_MODES)}, got {rounding_mode!r}")
    x = tirx.convert(x) if not isinstance(x, tirx.PrimExpr) else x
    if rounding_mode == "ties-to-even":
        return tirx.round(x, span)
    dtype = str(x.ty)
    wide = dtype if dtype in ("float32", "float64") else "float32"
    value = x if wide == dtype else tirx.Cast(wide, x)
    whole = tirx.trunc(value)
    step = tirx.Select(value < tirx.const(0, wide), tirx.const(-1, wide), tirx.const(1, wide))
    rounded = whole + tirx.Select(tirx.abs(value - whole) >= tirx.const(0.5, wide), step, tirx.const(0, wide))
    return rounded if wide == dtype else tirx.Cast(dtype, rounded)


class GemmWarpPolicy(enum.IntEnum):
    """How upstream TileLang splits a T.gemm's warps over the tile: ``T.gemm(..., policy=
    T.GemmWarpPolicy.FullRow)``. Accepted for source compatibility; the backends here pick
    the warp layout from the instruction they select (results never depend on it)."""

    Square = 0
    FullRow = 1
    FullCol = 2

    def is_square(self) -> bool:
        return self is GemmWarpPolicy.Square

    def is_full_row(self) -> bool:
        return self is GemmWarpPolicy.FullRow

    def is_full_col(self) -> bool:
        return self is GemmWarpPolicy.FullCol

    @classmethod
    def from_warp_partition(cls, m_warp: int, n_warp: int) -> GemmWarpPolicy:
        """The policy of an (m_warp x n_warp) split: every warp along M is FullRow, along N
        FullCol, anything else Square (upstream's reading of carver hints)."""
        if m_warp > 1 and n_warp == 1:
            return cls.FullRow
        if m_warp == 1 and n_warp > 1:
            return cls.FullCol
        return cls.Square


def sync_threads(barrier_id: Any = None, arrive_count: Any = None) -> None:
    """A barrier for every thread of the block (``__syncthreads()`` on CUDA). With
    ``barrier_id`` (and ``arrive_count``, the threads that meet there; default: the block's),
    a named barrier, as upstream's: ``tvm_storage_sync("shared", id, count)``, which a
    backend with named barriers lowers (CUDA: PTX ``bar.sync id, count``) and any other
    refuses (engine.semantic_check)."""
    if barrier_id is None and arrive_count is not None:
        raise LanguageError("T.sync_threads(arrive_count=...) needs a barrier_id too: "
                            "T.sync_threads(barrier_id, arrive_count)")
    if barrier_id is None:
        _ib.evaluate(block_barrier().value)
        return
    args = [barrier_id] + ([] if arrive_count is None else [arrive_count])
    _ib.evaluate(tirx.call_intrin("int32", BLOCK_BARRIER, "shared", *args))


def named_barrier_arrive(barrier_id: Any, thread_count: Any) -> None:
    """Arrive at named barrier ``barrier_id`` without waiting (upstream's spelling of PTX
    ``bar.arrive id, count``): the other side waits with ``T.sync_threads(barrier_id,
    thread_count)``; ``thread_count`` counts the threads of both sides, a multiple of 32.
    Writes before the arrive are visible to the threads that waited."""
    for what, value in (("barrier_id", barrier_id), ("thread_count", thread_count)):
        if isinstance(value, bool) or not isinstance(value, (int, tirx.PrimExpr)):
            raise LanguageError(f"T.named_barrier_arrive: {what} must be an integer, got {value!r}")
    if isinstance(barrier_id, int) and not 0 <= barrier_id < 16:
        raise LanguageError(f"T.named_barrier_arrive: barrier_id must be 0-15 (a block has 16 named barriers), "
                            f"got {barrier_id}")
    if isinstance(thread_count, int) and (thread_count <= 0 or thread_count % 32):
        raise LanguageError(f"T.named_barrier_arrive: thread_count must be a positive multiple of 32 (whole "
                            f"warps), got {thread_count}")
    _ib.evaluate(tirx.call_intrin("void", NAMED_BARRIER_ARRIVE, barrier_id, thread_count))


def ptx_commit_group() -> None:
    """Upstream's end of a group of asynchronous copies (``cp.async.commit_group``). The
    copies a kernel writes itself are synchronous in this TileLang (``T.Parallel(...,
    prefer_async=True)`` is a plain loop; the compiler makes T.copy in a T.Pipelined loop
    asynchronous on its own and orders those itself), so there is no group to close: this
    emits nothing, and the barrier pass orders the shared-memory writes before their reads."""


def ptx_wait_group(count: Any = 0) -> None:
    """Upstream's wait for all but ``count`` groups of asynchronous copies. Nothing a kernel
    writes is in flight here (see ``T.ptx_commit_group``): this emits nothing."""
    del count


def _access_pointer(what: str, pointer: Any) -> tuple[Any, Any, str]:
    """(buffer, flat element offset, element dtype) of a ``T.access_ptr(...)`` address."""
    call = pointer if isinstance(pointer, tvm.ir.Call) else None
    if call is None or str(getattr(call.op, "name", "")) != "tirx.tvm_access_ptr" or \
            str(getattr(call.args[1].op, "name", "")) != "tirx.buffer_data":
        raise LanguageError(f"{what}: expected an address written T.access_ptr(buffer[...], access, extent) "
                            f"in the call itself, got {pointer!r}")
    return call.args[1].args[0], call.args[2], str(call.args[0].ty.dtype)


def ptx_cp_async(dst: Any, src: Any, num_elems: Any, predicate: Any = None) -> None:
    """Upstream's ``cp.async`` of ``num_elems`` elements from global to shared memory, between
    two ``T.access_ptr`` addresses (4, 8 or 16 bytes). The copies a kernel writes itself are
    synchronous in this TileLang (see ``T.ptx_commit_group``): this is the copy, one vector
    access of the elements, landed before the thread goes on, so every wait for it
    (``T.ptx_wait_group``, ``T.cp_async_barrier_noinc``'s barrier) is already satisfied.
    A backend may issue it asynchronously where the kernel waits for it through
    ``T.cp_async_barrier_noinc`` (CUDA does, for 16-byte copies from global memory).
    A false ``predicate`` writes zeros, as cp.async with a source size of 0 does."""
    what = "T.ptx_cp_async"
    (dst_buf, dst_at, dst_dtype), (src_buf, src_at, src_dtype) = (_access_pointer(what, dst),
                                                                   _access_pointer(what, src))
    if dst_dtype != src_dtype:
        raise LanguageError(f"{what}: the destination holds {dst_dtype} and the source {src_dtype}; "
                            "cp.async copies bytes between addresses of one element type")
    if not isinstance(num_elems, int) or num_elems < 1 or \
            num_elems * tvm.DataType(dst_dtype).bits not in (32, 64, 128):
        raise LanguageError(f"{what}: num_elems={num_elems!r} {dst_dtype} elements is not 4, 8 or 16 bytes, "
                            "the widths cp.async copies")

    def flat(buffer: Any, at: Any) -> tuple[Any, Any]:  # a 1-d view of the whole storage (views.py)
        at = tirx.IntImm("int32", at) if isinstance(at, int) else at
        size = 1
        for dim in buffer.shape:
            size = size * dim
        view = _ib.decl_buffer((size,), dst_dtype, data=buffer.data, scope=buffer.scope())
        return view, tirx.Ramp(at, tirx.const(1, str(at.ty.dtype)), num_elems) if num_elems > 1 else at

    src_view, src_index = flat(src_buf, src_at)
    dst_view, dst_index = flat(dst_buf, dst_at)
    value: Any = tirx.BufferLoad(src_view, [src_index])
    if predicate is not None:
        zero = tirx.const(0, dst_dtype)
        value = tirx.Select(predicate, value, tirx.Broadcast(zero, num_elems) if num_elems > 1 else zero)
    _ib.buffer_store(dst_view, value, [dst_index])


def wait_wgmma(count: Any = 0) -> None:
    """Upstream's wait until at most ``count`` groups of ``T.wgmma_gemm`` are in flight. A GEMM
    has completed before the next statement here (``T.wgmma_gemm``), so this emits nothing."""
    del count


IMPORT_SOURCE_ATTR = "pragma_import_c"  # TVM's C-family codegens copy it to the source's top


def import_source(source: str | None = None) -> None:
    """Put ``source`` (device functions, e.g. inline-PTX helpers that ``T.call_extern``
    calls) at the top of the kernel's generated source, as upstream's ``T.import_source``.
    It is TVM's ``pragma_import_c`` attribute, which the CUDA, HIP and C code generators
    copy there; ``None`` does nothing (upstream's behaviour)."""
    if source is None:
        return
    if not isinstance(source, str):
        raise LanguageError(f"T.import_source takes the source code as a str, got {type(source).__name__}")
    # TVM writes the code as it is: a newline keeps the generated code that follows apart
    text = source if source.endswith("\n") else source + "\n"
    with _ib.attr(tirx.IntImm("int32", 0), IMPORT_SOURCE_ATTR, tvm.ir.StringImm(text)):
        _ib.evaluate(tirx.IntImm("int32", 0))


# printf conversions by dtype class; values are widened to what C's variadic calls pass
# (ISO C 7.16.1.1 default argument promotions: float -> double), so every backend's printf
# reads them the same way
_CONVERSIONS = {"float": ("%f", "float64"), "bfloat": ("%f", "float64"), "int": ("%lld", "int64"),
                "uint": ("%llu", "uint64"), "bool": ("%d", "int32")}


def _conversion(value: Any) -> tuple[str, Any]:
    dtype = str(value.ty.dtype) if hasattr(value, "ty") and hasattr(value.ty, "dtype") else None
    if dtype is None:
        raise LanguageError(f"T.print: cannot print {type(value).__name__} {value!r}; pass a scalar "
                            "expression or a buffer")
    for prefix in ("bfloat", "float", "uint", "int", "bool"):
        if dtype.startswith(prefix) and "x" not in dtype:  # not a vector (float32x4)
            spec, wide = _CONVERSIONS[prefix]
            return spec, tirx.Cast(wide, value)
    raise LanguageError(f"T.print: values of dtype {dtype} cannot be printed; cast to float32 or int32 first")


def _check_message(msg: str) -> str:
    """Messages go into a C string literal that some codegens print without escaping, so
    quotes, backslashes and newlines are refused; ``%`` is escaped for printf."""
    if not isinstance(msg, str):
        raise LanguageError(f"T.print / T.device_assert: msg must be a str, got {type(msg).__name__}")
    bad = sorted({c for c in msg if c in '"\\\n\r'})
    if bad:
        raise LanguageError(f"T.print / T.device_assert: msg {msg!r} contains {bad}; use plain text "
                            "without quotes, backslashes or newlines")
    return msg.replace("%", "%%")


def _printf(fmt: str, *values: Any) -> Any:
    # the line ends with "%c" of a newline (10) rather than "\n": the codegens differ on
    # escaping a newline inside a string literal, a char argument needs none
    return tirx.call_extern("int32", "printf", tvm.ir.StringImm(fmt + "%c"), *values, tirx.const(10, "int32"))


def _first_thread() -> Any:
    """The condition that holds on one thread of the block (always true on backends that
    run a block's threads one at a time, and outside any T.Kernel)."""
    if not _ACTIVE:
        return None
    cond = None
    for var in _ACTIVE[-1].thread_vars:
        term = var == 0
        cond = term if cond is None else tirx.And(cond, term)
    return cond


def print(obj: Any = None, msg: str = "", warp_group_id: int = 0, warp_id: int = 0) -> None:
    """``T.print(x, msg="")``: printf from the kernel (device printf on CUDA). A scalar
    expression prints ``msg: value`` from every thread that executes it; a buffer prints
    one line per element (``msg name[i] = value``) from the block's first thread; with no
    object, the message alone. ``warp_group_id``/``warp_id`` are accepted for source
    compatibility (the first thread prints). Messages are plain text without quotes,
    backslashes or newlines."""
    del warp_group_id, warp_id
    text = _check_message(msg)
    if obj is None:
        if not text:
            raise LanguageError("T.print(): give an object to print or a msg")
        _ib.evaluate(_printf(text))
        return
    if isinstance(obj, tirx.Buffer):
        _print_buffer(obj, text)
        return
    if isinstance(obj, (int, float, bool)):
        obj = tirx.const(obj)
    spec, value = _conversion(obj)
    _ib.evaluate(_printf(f"{text}: {spec}" if text else spec, value))


def _print_buffer(buffer: Any, text: str) -> None:
    label = f"{text} {buffer.name}" if text else buffer.name
    shape = list(buffer.shape)
    cond = _first_thread()
    with contextlib.ExitStack() as stack:
        if cond is not None:
            stack.enter_context(_ib.If(cond))
            stack.enter_context(_ib.Then())
        with _ib.grid(*shape) as indices:
            indices = [indices] if isinstance(indices, tirx.Var) else list(indices)
            spec, value = _conversion(tirx.BufferLoad(buffer, indices))
            index_specs = ", ".join(["%d"] * len(indices))
            _ib.evaluate(_printf(f"{label}[{index_specs}] = {spec}", *indices, value))


def device_assert(condition: Any, msg: str = "") -> None:
    """``T.device_assert(cond, msg)``: where ``cond`` is false, print
    ``device_assert failed: msg`` (with the block's first failing thread's values left to
    the printf). The kernel then carries on: no backend here can abort a kernel portably,
    so a failed assertion is reported, not fatal."""
    text = _check_message(msg)
    with _ib.If(tirx.Not(condition)):
        with _ib.Then():
            _ib.evaluate(_printf(f"device_assert failed: {text}" if text else "device_assert failed"))

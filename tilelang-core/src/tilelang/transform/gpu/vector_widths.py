"""How wide the vectors of a T.Parallel nest may be (PartitionParallelLoops): the target's
rule (its widest access; whether it has 8-bit float types), the width that keeps every
global/shared access of a nest aligned, and the width of a nest that only converts the
thread's own register elements."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad  # what T.Buffer[...] loads are in apache-tvm 0.27
from tvm.sym.analyzer import Analyzer

from ...language.ops import uses_var
from .ir_util import buffer_accesses, substitute


@dataclasses.dataclass(frozen=True)
class VectorRule:
    """What the backend's vectors may be: at most ``max_bytes`` wide, and of 8-bit floats
    only where ``fp8`` (a target without them legalizes fp8 into integer bit arithmetic,
    which TVM vectorizes into code that does not compile: CUDA before sm_89)."""

    max_bytes: int
    fp8: bool = False


def _fp8(dtypes: list[Any]) -> bool:
    """Whether any of ``dtypes`` is an 8-bit float (TVM's float8_*)."""
    return any(str(dtype).startswith("float8") for dtype in dtypes)


def dtype_bytes(dtype: Any) -> int:
    """Bytes of one element (lane). bool counts as 4 (at most 4 lanes, as before 8-bit floats
    were sized by their bits); sub-byte types as the widest access, so that a nest over them
    stays scalar (LowerSubByteAccess made their elements nibbles of bytes before this)."""
    if str(dtype).startswith("bool"):
        return 4
    bits = tvm.DataType(str(dtype)).bits
    return 16 if bits < 8 else bits // 8


def _accesses(body: Any) -> tuple[list[tuple[Any, list[Any]]], bool]:
    """(buffer, indices) of every load/store, and whether the body is vectorizable at all
    (straight-line code: no inner loops, allocations or external calls)."""
    found: list[tuple[Any, list[Any]]] = []
    simple = [True]

    blockers = (tirx.For, tirx.AllocBuffer, tirx.While)

    def visit(node: Any) -> None:
        if isinstance(node, tirx.BufferStore):
            found.append((node.buffer, list(node.indices)))
        elif isinstance(node, TensorLoad) and isinstance(node.source, tirx.Buffer):
            found.append((node.source, list(node.indices)))
        elif isinstance(node, blockers):
            simple[0] = False
        elif isinstance(node, tvm.ir.Call):
            name = getattr(node.op, "name", "")
            if name in ("tirx.call_extern", "tirx.call_pure_extern", "tirx.tvm_storage_sync",
                        "tirx.address_of") or name.startswith("tl."):
                simple[0] = False

    tvm_ffi.structural_walk(body, visit)
    return found, simple[0]


def _flat_offset(buffer: Any, indices: list[Any]) -> Any:
    """The element offset of ``indices`` in ``buffer``: by its explicit strides where it has
    them (a T.StridedTensor's row stride may be a run-time symbol, which proves no
    alignment), else row-major by its shape."""
    if len(buffer.strides):
        terms = [index * stride for index, stride in zip(indices, buffer.strides)]
        offset = terms[0]
        for term in terms[1:]:
            offset = offset + term
        return offset
    offset, stride = None, None
    for dim, index in reversed(list(zip(buffer.shape, indices))):
        term = index if stride is None else index * stride
        offset = term if offset is None else offset + term
        stride = dim if stride is None else stride * dim
    return offset if offset is not None else tirx.IntImm("int32", 0)


def _cast_types(body: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.Cast, lambda c: found.append(c.ty.dtype)))
    return found


def _aligned(inner_var: Any, memory: list[tuple[Any, list[Any]]], v: int, analyzer: Analyzer,
             loaded: list[Any] = ()) -> bool:
    """Whether every access's flat offset is a multiple of ``v`` when the innermost loop
    variable is (TVM's modular-set analysis). Accesses of ``loaded`` (buffers the nest only
    reads) whose offset does not involve that variable count too: every lane reads the
    same element (a row's factor beside the row)."""
    probe = tirx.Var("vector_index", inner_var.ty)
    for buffer, indices in memory:
        offset = _flat_offset(buffer, indices)
        if any(buffer.same_as(b) for b in loaded) and not uses_var(offset, inner_var):
            continue
        mod = analyzer.modular_set(substitute(offset, [(inner_var, probe * v)]))
        if mod.coeff % v != 0 or mod.base % v != 0:
            return False
    return True


def vector_width(loops: list[Any], body: Any, rule: VectorRule, lanes: int | None = None) -> tuple[int, int]:
    """(v, alignment bytes). v = 1 when the nest cannot be vectorized. ``lanes``: the nest's
    width is fixed (it touches register fragments dealt in vectors of that many points,
    ``register_lanes``); (lanes, bytes) where its lanes can be one vector access each,
    else (1, 0) and they run one after another."""
    extents = [loop.extent for loop in loops]
    if not all(isinstance(e, tirx.IntImm) for e in extents):
        return 1, 0
    inner = int(extents[-1].value)
    points = 1
    for e in extents:
        points *= int(e.value)
    accesses, simple = _accesses(body)
    memory = [(b, i) for b, i in accesses if b.scope() in ("global", "shared", "shared.dyn")]
    # A per-thread (local) array indexed by the nest only works if every nest over it
    # deals the same points to the same thread: register fragments are dealt at their
    # ``lanes`` in every nest over them; any other such array keeps the nest scalar.
    # The other per-thread arrays of a nest over register fragments (a reduction's partial
    # per row, which every lane would update at once) keep its lanes one after another.
    per_thread = any(b.scope().startswith("local") and (lanes is None or b.scope() != "local.fragment")
                     and any(not isinstance(i, tirx.IntImm) for i in idx)
                     for b, idx in accesses)
    types = [b.dtype for b, _ in accesses] + _cast_types(body)
    # (a nest over register fragments alone, a conversion say, is vectors of registers)
    if not simple or (not memory and lanes is None) or per_thread or (not rule.fp8 and _fp8(types)):
        return 1, 0
    # the widest element anywhere in the body, not only in memory: an fp16 load cast to
    # float32 at 8 lanes is a float32x8 value, which TVM's CUDA-C codegen cannot construct
    # (it prints make_ulonglong4 of 8 floats); vectors stay within 16 bytes of every type
    widest = max(dtype_bytes(t) for t in types)
    inner_var = loops[-1].loop_var
    analyzer = Analyzer()
    if lanes is not None:
        stored = [b for b, _, is_store in buffer_accesses(body) if is_store]
        loaded = [b for b, _ in memory if not any(b.same_as(x) for x in stored)]
        if lanes * widest <= rule.max_bytes and _aligned(inner_var, memory, lanes, analyzer, loaded):
            return lanes, max((lanes * dtype_bytes(b.dtype) for b, _ in memory), default=0)
        return 1, 0
    v = max(1, rule.max_bytes // widest)
    while v > 1:
        if inner % v == 0 and points % v == 0 and _aligned(inner_var, memory, v, analyzer):
            return v, max(v * dtype_bytes(b.dtype) for b, _ in memory)
        v //= 2
    return 1, 0


def register_lanes(shape: list[int], dtypes: list[Any], threads: int, rule: VectorRule) -> int:
    """Points of a register fragment a thread holds side by side: its points are dealt to
    the threads in vectors of this many consecutive points along the innermost axis (thread
    t holds vectors t, t + T, ...), so that a nest over it loads and stores whole vectors.
    The widest power of two within the target's widest access for every element type of
    fragments of this shape, dividing the innermost axis, and dealing evenly; 1 (point by
    point) otherwise, and for 8-bit floats where the target has no such vectors.
    Where the threads' points one by one leave every thread the same rows (the threads
    divide a row), the vectors do too: a round of T vectors stays within one row. Else a
    thread's rows would follow its index, and a row reduction would index its partial sums
    by the thread (local memory), each thread adding zeros for rows it lacks (the families'
    rmsnorm of 4 rows of 1024 in 512 threads: 0.87x torch against 1.05x point by point)."""
    if not shape or (not rule.fp8 and _fp8(dtypes)):
        return 1
    v = max(1, rule.max_bytes // max(dtype_bytes(t) for t in dtypes))
    same_rows = math.prod(shape[:-1]) > 1 and shape[-1] % threads == 0
    while v > 1 and (shape[-1] % v or math.prod(shape) % (v * threads) or (same_rows and shape[-1] % (v * threads))):
        v //= 2
    return v


def register_vector_width(stmt: Any, k: Any, arrays: list[Any], iterations: Any, rule: VectorRule) -> int:
    """Lanes for the thread's own elements of a nest that converts between register
    fragments only (``B_local[i] = A_local[i]`` of another dtype, each array at index k):
    its k loop as vectors (2 or 4 lanes, within 16 bytes), which a target converts a pair at
    a time (CUDA's cvt.rn.f16x2.f32). 1 where the nest reads or writes anything else, calls
    anything, branches, or converts nothing."""
    if not isinstance(iterations, tirx.IntImm) or not arrays:
        return 1
    ok, casts, types = [True], [0], []

    def visit(node: Any) -> None:
        if isinstance(node, (tirx.BufferStore, TensorLoad)):
            buffer = node.buffer if isinstance(node, tirx.BufferStore) else node.source
            if not any(buffer.same_as(a) for a in arrays) or len(node.indices) != 1 or \
                    not node.indices[0].same_as(k):
                ok[0] = False
            else:
                types.append(buffer.dtype)
        elif isinstance(node, tirx.Cast):
            casts[0] += 1
            types.append(node.ty.dtype)
        elif isinstance(node, (tirx.For, tirx.IfThenElse, tirx.While, tirx.AllocBuffer, tvm.ir.Call)):
            ok[0] = False

    tvm_ffi.structural_walk(stmt, visit)
    if not ok[0] or not casts[0] or (not rule.fp8 and _fp8(types)):
        return 1
    widest = max(dtype_bytes(t) for t in types)
    width = 4
    while width > 1 and (int(iterations.value) % width or width * widest > rule.max_bytes):
        width //= 2
    return width

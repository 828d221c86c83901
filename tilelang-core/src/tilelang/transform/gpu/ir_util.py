"""Small IR helpers shared by the GPU passes (core's and the GPU backends')."""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad
from tvm_ffi.structural import WalkResult

from ...language.ops import TILE_OPS, block_barrier, substitute, uses_var  # noqa: F401 (re-exported)

_OPS = {op: name for name, op in TILE_OPS.items()}


def dtype_bytes(dtype: Any) -> int:
    return tvm.DataType(str(dtype)).bits // 8


def static_ints(values: Any) -> list[int] | None:
    out = []
    for v in values:
        if not isinstance(v, tirx.IntImm):
            return None
        out.append(int(v.value))
    return out


def matrix_extents(region: Any) -> tuple[int, int] | None:
    """(rows, cols) of a region whose leading axes (if any) are single indices and whose
    last two have constant extents (``KV_shared[stage, :, 0:256]``), else None."""
    extents = [r.extent for r in region.region]
    if len(extents) < 2 or not all(isinstance(e, tirx.IntImm) for e in extents) or \
            any(int(e.value) != 1 for e in extents[:-2]):
        return None
    return int(extents[-2].value), int(extents[-1].value)


def gemm_mnk(a: Any, b: Any, c: Any, trans_a: bool, trans_b: bool,
             slices: bool = False) -> tuple[int, int, int] | None:
    """(M, N, K) of a GEMM on 2-d tiles of static shapes that agree (A M x K or, transposed,
    K x M; B K x N or N x K; C M x N), else None. ``slices``: of the regions' matrices
    (``matrix_extents``), not of the whole buffers."""
    shapes = [matrix_extents(r) if slices else static_ints(r.source.shape) for r in (a, b, c)]
    if any(s is None or len(s) != 2 for s in shapes):
        return None
    (a0, a1), (b0, b1), (m, n) = shapes
    ma, ka = (a1, a0) if trans_a else (a0, a1)
    kb, nb = (b1, b0) if trans_b else (b0, b1)
    return (m, n, ka) if ma == m and nb == n and ka == kb else None


def is_full_region(region: Any) -> bool:
    buffer = region.source
    return all(isinstance(r.min, tirx.IntImm) and r.min.value == 0 and
               tvm_ffi.structural_equal(r.extent, d) for r, d in zip(region.region, buffer.shape))


def tile_op_name(stmt: Any) -> str | None:
    if not isinstance(stmt, tirx.Evaluate):
        return None
    return _OPS.get(getattr(getattr(stmt.value, "op", None), "name", None))


def buffer_accesses(node: Any) -> list[tuple[Any, list[Any], bool]]:
    """(buffer, indices, is_store) of every element access (store or load) under ``node``,
    in walk order; tile ops' regions are not element accesses."""
    found: list[tuple[Any, list[Any], bool]] = []

    def visit(item: Any) -> None:
        if isinstance(item, tirx.BufferStore):
            found.append((item.buffer, list(item.indices), True))
        elif isinstance(item.source, tirx.Buffer):
            found.append((item.source, list(item.indices), False))

    tvm_ffi.structural_walk(node, [(tirx.BufferStore, visit), (TensorLoad, visit)])
    return found


def extern_call(name: str, *args: Any) -> Any:
    return tirx.Evaluate(tirx.call_extern("int32", name, *args))


def seq(stmts: list[Any]) -> Any:
    stmts = [s for s in stmts if s is not None]
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def unrolled(var: Any, extent: Any, body: Any, kind: Any = tirx.ForKind.UNROLLED) -> Any:
    return tirx.For(var, 0, extent, kind, body)


def kernels_of(body: Any) -> list[Any]:
    """The kernels a function launches: its outermost ``thread_extent`` statements."""
    found: list[Any] = []

    def visit(node: Any) -> Any:
        if isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent":
            found.append(node)
            return WalkResult.SKIP
        return WalkResult.ADVANCE

    tvm_ffi.structural_walk(body, visit, order="pre")
    return found


def _names(value: Any) -> list[str] | None:
    """``value`` as a list of strings, where it is an array of them; else None."""
    if isinstance(value, str) or not hasattr(value, "__len__"):
        return None
    items = list(value)
    return [str(v) for v in items] if all(isinstance(v, str) for v in items) else None


def each_kernel(run: Any) -> Any:
    """``run`` (a PrimFunc -> PrimFunc rewrite that looks at one kernel) for functions that
    launch several, as upstream's split-KV decoding does (a split kernel, then a combine
    kernel, sharing a ``T.alloc_global`` workspace): each kernel becomes a function of its
    own (same parameters and attributes), and its rewritten body goes back in its place,
    host statements the run put before the kernel included. Attributes the runs set are
    merged: integers take the largest value, lists of names their union, other values must
    agree."""

    def apply(func: Any) -> Any:
        kernels = kernels_of(func.body)
        if len(kernels) < 2:
            return run(func)
        bodies, attrs = [], {}
        for kernel in kernels:
            done = run(func.with_body(kernel))
            bodies.append(done.body)
            for key, value in (dict(done.attrs) if done.attrs else {}).items():
                if key in attrs and not tvm_ffi.structural_equal(attrs[key], value):
                    names = _names(attrs[key]), _names(value)
                    if None not in names:  # lists of names (tiles, buffers): every kernel's
                        value = sorted(set(names[0]) | set(names[1]))
                    elif not (isinstance(value, tirx.IntImm) and isinstance(attrs[key], tirx.IntImm)):
                        raise ValueError(f"kernels of one function set {key!r} to {attrs[key]} and {value}")
                    else:
                        value = value if value.value > attrs[key].value else attrs[key]
                attrs[key] = value

        def on_attr(node: Any) -> Any:
            return next((b for k, b in zip(kernels, bodies) if node.same_as(k)), node)

        # after its children (left as they are): a result that holds the kernel it replaces
        # (host statements put before an unchanged kernel) is not visited again
        func = func.with_body(tvm_ffi.structural_map(func.body, (tirx.AttrStmt, on_attr), order="post"))
        for key, value in attrs.items():
            func = func.with_attr(key, value)
        return func

    return apply

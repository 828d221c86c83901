"""``T.alloc_reducer`` / ``T.finalize_reducer`` (and upstream's reducer v2:
``T.reducer_init`` / ``T.reducer_update`` / ``T.finalize_reducer(r, dst)``): a tile that the
block's threads reduce into.

Upstream gives each thread its own replica of the reducer (``replication="all"``), lets
T.Parallel loops update their thread's replica (``r[i] += v``) without synchronisation, and
combines the replicas across threads in ``T.finalize_reducer``. Here the reducer is one
shared-memory tile and each update ``r[i] += v`` (``sum``) / ``r[i] = T.max(r[i], v)``
(``max``) / ``r[i] = T.min(r[i], v)`` (``min``) becomes an atomic element update, which
every backend lowers (CUDA: shared-memory atomics; CPU: plain updates on one thread, see
the atomics note in docs/architecture-notes.md). A barrier follows the tile op that
initialises the reducer (T.clear / T.fill), and ``T.finalize_reducer`` is the barrier after
which the block's threads all see the combined values. The results are upstream's;
the cost differs (contended atomics instead of private replicas), so ``replication`` is
accepted and does not change the storage.

The rewrite runs in the frontend normalization (``rewrite_reducer_updates``), which reads
the reducers ``T.alloc_reducer`` recorded while the kernel was parsed.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad, TensorRegion
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .atomic import rmw_element
from .misc import sync_threads
from .ops import block_barrier

_OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")
_BITWISE = ("bitand", "bitor", "bitxor")
_KIND = {"sum": "add", "max": "max", "min": "min", "bitand": "and", "bitor": "or", "bitxor": "xor"}
_FORMS = {"sum": "r[i] += v", "max": "r[i] = T.max(r[i], v)", "min": "r[i] = T.min(r[i], v)",
          "bitand": "r[i] = r[i] & v", "bitor": "r[i] = r[i] | v", "bitxor": "r[i] = r[i] ^ v"}
#: reducers allocated since the last normalization: (buffer, op)
_PENDING: list[tuple[Any, str]] = []


def alloc_reducer(shape: Any, dtype: Any, op: str = "sum", replication: Any = None) -> Any:
    """A reducer tile of ``shape`` and ``dtype`` combined with ``op`` ("sum", "max", "min";
    on integers also "bitand", "bitor", "bitxor").
    Clear or fill it first (``T.clear(r)``), update it in T.Parallel loops, then call
    ``T.finalize_reducer(r)`` before reading it."""
    if op not in _OPS:
        raise LanguageError(f"T.alloc_reducer: op must be one of {list(_OPS)}, got {op!r}")
    if op in _BITWISE and not str(dtype).startswith(("int", "uint")):
        raise LanguageError(f"T.alloc_reducer(op={op!r}) combines bits, so needs an integer dtype, got {dtype}")
    if replication not in (None, "all", "none"):
        raise LanguageError(f"T.alloc_reducer: replication must be 'all' or 'none', got {replication!r}")
    shape = shape if isinstance(shape, (list, tuple)) else (shape,)
    buffer = _ib.alloc_buffer(shape, str(dtype), scope="shared.dyn")
    _PENDING.append((buffer, op))
    return buffer


def _op_of(reducer: Any, what: str) -> str:
    for buffer, op in _PENDING:
        if reducer.same_as(buffer):
            return op
    raise LanguageError(f"{what}: {getattr(reducer, 'name', reducer)!r} was not allocated with T.alloc_reducer")


def reducer_init(reducer: Any, init: Any = None) -> None:
    """Open a reduction (upstream's reducer v2): the reducer starts from its combine's
    identity (sum: 0, max: the lowest value, min: the highest), or from ``init``, a value
    combined once into every output. Here the reducer is one shared tile, so starting from
    ``init`` is filling it with ``init``."""
    from .tile import fill

    op = _op_of(reducer, "T.reducer_init")
    dtype = str(reducer.dtype)
    if init is None:
        from ..transform.reduce_kinds import reduce_identity

        init = reduce_identity(op, dtype)
    fill(reducer, init)


def reducer_update(target: Any, value: Any) -> None:
    """Combine ``value`` into one output of a reducer: ``T.reducer_update(acc[i], v)``."""
    if not isinstance(target, TensorLoad):
        raise LanguageError(f"T.reducer_update takes the output as `acc[indices]` (a reducer element), "
                            f"got {type(target).__name__}")
    op = _op_of(target.source, "T.reducer_update")
    _ib.evaluate(rmw_element(_KIND[op], target, value, tirx.const(0, "int32")))


def finalize_reducer(reducer: Any, dst: Any = None, batch: int = 1, annotations: Any = None) -> None:
    """Close a reduction: make the combined values of ``reducer`` visible to every thread of
    the block, and with ``dst`` (upstream's reducer v2) copy them into that tile. ``batch``
    and ``annotations`` are upstream's grouping hints (same result)."""
    del annotations
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise LanguageError(f"T.finalize_reducer: batch must be an int >= 1, got {batch!r}")
    _op_of(reducer, "T.finalize_reducer")
    sync_threads()
    if dst is not None:
        from .tile import copy

        copy(reducer, dst)


def _update_operand(store: Any, op: str) -> Any | None:
    """``v`` of ``r[i] = r[i] + v`` (sum) / ``r[i] = max(r[i], v)`` (max, min), else None."""
    value, target = store.value, store.buffer

    def is_self(expr: Any) -> bool:
        return (isinstance(expr, TensorLoad) and expr.source.same_as(target)
                and len(expr.indices) == len(store.indices)
                and all(tvm_ffi.structural_equal(a, b) for a, b in zip(expr.indices, store.indices)))

    node = {"sum": tirx.Add, "max": tirx.Max, "min": tirx.Min, "bitand": tirx.BitwiseAnd,
            "bitor": tirx.BitwiseOr, "bitxor": tirx.BitwiseXor}[op]
    if isinstance(value, node):
        if is_self(value.a):
            return value.b
        if is_self(value.b):
            return value.a
    return None


def rewrite_reducer_updates(func: Any) -> Any:
    """Turn updates of reducer tiles into atomic element updates (see the module doc)."""
    if not _PENDING:
        return func
    reducers = list(_PENDING)
    _PENDING.clear()

    def on_store(store: Any) -> Any:
        for buffer, op in reducers:
            if not store.buffer.same_as(buffer):
                continue
            operand = _update_operand(store, op)
            if operand is None:
                # raised after the walk: an exception inside a tvm_ffi callback comes back
                # as a plain RuntimeError
                bad.append((buffer, op, store))
                return store
            element = buffer[tuple(store.indices)] if len(store.indices) > 1 else buffer[store.indices[0]]
            return tirx.Evaluate(rmw_element(_KIND[op], element, operand, tirx.const(0, "int32")))
        return store

    def on_eval(stmt: Any) -> Any:
        # A tile op that writes the reducer (T.clear / T.fill) must be complete in every
        # thread before any thread's atomic update lands: the backends' barrier analysis
        # does not see atomics as writes, so the barrier is placed here.
        args = getattr(stmt.value, "args", None) or ()
        regions = [a for a in args if isinstance(a, TensorRegion)]
        if regions and any(regions[-1].source.same_as(buffer) for buffer, _ in reducers):  # its destination
            return tirx.SeqStmt([stmt, block_barrier()])
        return stmt

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_eval), order="post")
    bad: list[tuple[Any, str, Any]] = []
    body = tvm_ffi.structural_map(body, (tirx.BufferStore, on_store), order="post")
    if bad:
        buffer, op, store = bad[0]
        name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "kernel"
        written = f"{buffer.name}[{', '.join(str(i) for i in store.indices)}] = {store.value}"
        raise LanguageError(f"{name}: the {op} reducer {str(buffer.name)!r} is written as `{written}`; "
                            f"a reducer is only updated as `{_FORMS[op]}` (initialise it with T.clear / T.fill)")
    return func.with_body(body) if not body.same_as(func.body) else func

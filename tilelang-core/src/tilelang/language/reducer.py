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

Misuse that would give a wrong result here is refused, as upstream's reducer v2 refuses it:
an update before the reducer was initialised (its memory holds garbage), a second
``T.reducer_init`` before the reduction was finalized, a starting value of another dtype,
a reducer updated and never finalized (no thread is certain to see the combined values),
an update outside any T.Parallel loop or ``if`` (every thread of the block would
combine the same value: a sum counted once per thread), a read of the reducer between its
initialisation and its finalize (a partial value, racing with the updates), and a finalize
in other loops than its initialisation (``_check_order``), and the two forms mixed in one
reducer (``T.reducer_update`` of a reduction T.clear / T.fill opened, ``r[i] += v`` on one
T.reducer_init opened), which upstream refuses too. The parser calls these functions
in source order, a loop's body once, so the order checks follow the text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import tvm_ffi
from tvm import tirx
from tvm.ir import TensorLoad, TensorRegion
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageAssertionError, LanguageError
from .atomic import rmw_element
from .bounds import source_location
from .dtypes import as_dtype_str
from .ops import block_barrier

_OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")
_BITWISE = ("bitand", "bitor", "bitxor")
_KIND = {"sum": "add", "max": "max", "min": "min", "bitand": "and", "bitor": "or", "bitxor": "xor"}
_FORMS = {"sum": "r[i] += v", "max": "r[i] = T.max(r[i], v)", "min": "r[i] = T.min(r[i], v)",
          "bitand": "r[i] = r[i] & v", "bitor": "r[i] = r[i] | v", "bitxor": "r[i] = r[i] ^ v"}


@dataclass
class _Reducer:
    buffer: Any
    op: str
    state: str = "new"  # "open" after an initialisation, "final" after T.finalize_reducer
    updated: bool = False  # by T.reducer_update since it was opened
    #: how the open reduction was started: "fill" (T.clear / T.fill, upstream's first form,
    #: updated as ``r[i] += v``) or "init" (T.reducer_init, updated with T.reducer_update)
    opened_by: str = ""
    ever_init: bool = False  # some reduction of it was opened by T.reducer_init
    #: the barrier call each T.finalize_reducer emitted (the order check finds them by identity)
    closers: list[Any] = field(default_factory=list)


#: reducers allocated since the last normalization
_PENDING: list[_Reducer] = []


def alloc_reducer(shape: Any, dtype: Any, op: str = "sum", replication: Any = None) -> Any:
    """A reducer tile of ``shape`` and ``dtype`` combined with ``op`` ("sum", "max", "min";
    on integers also "bitand", "bitor", "bitxor").
    Clear or fill it first (``T.clear(r)``), update it in T.Parallel loops, then call
    ``T.finalize_reducer(r)`` before reading it."""
    if op not in _OPS:
        raise LanguageError(f"T.alloc_reducer: op must be one of {list(_OPS)}, got {op!r}")
    dtype = as_dtype_str(dtype)  # T.float32, "float32" or torch.float32
    if op in _BITWISE and not dtype.startswith(("int", "uint")):
        raise LanguageAssertionError(f"T.alloc_reducer(op={op!r}) combines bits, so needs an integer dtype, got {dtype}")
    if replication not in (None, "all", "none"):
        raise LanguageError(f"T.alloc_reducer: replication must be 'all' or 'none', got {replication!r}")
    shape = shape if isinstance(shape, (list, tuple)) else (shape,)
    buffer = _ib.alloc_buffer(shape, dtype, scope="shared.dyn")
    _PENDING.append(_Reducer(buffer, op))
    return buffer


def _find(buffer: Any) -> _Reducer | None:
    return next((r for r in _PENDING if buffer.same_as(r.buffer)), None)


def _reducer_of(reducer: Any, what: str) -> _Reducer:
    found = _find(reducer) if isinstance(reducer, tirx.Buffer) else None
    if found is None:
        raise LanguageError(f"{what}: {getattr(reducer, 'name', reducer)!r} was not allocated with T.alloc_reducer")
    return found


def opened_by_fill(buffer: Any) -> None:
    """``T.clear`` / ``T.fill`` of a reducer (upstream's first reducer form) initialise it."""
    found = _find(buffer)
    if found is not None:
        found.state, found.updated, found.opened_by = "open", False, "fill"


def reducer_init(reducer: Any, init: Any = None) -> None:
    """Open a reduction (upstream's reducer v2): the reducer starts from its combine's
    identity (sum: 0, max: the lowest value, min: the highest), or from ``init``, a value
    combined once into every output. Here the reducer is one shared tile, so starting from
    ``init`` is filling it with ``init``."""
    from .tile import fill

    found = _reducer_of(reducer, "T.reducer_init")
    name, dtype = str(reducer.name), str(reducer.dtype)
    if found.state == "open":
        raise LanguageError(f"double T.reducer_init of reducer {name!r}: the reduction the first one opened "
                            f"was not finalized; call T.finalize_reducer({name}, ...) in between, or drop "
                            "one of them")
    init_dtype = str(getattr(getattr(init, "ty", None), "dtype", "") or "")
    if init is not None and init_dtype and init_dtype != dtype:
        raise LanguageError(f"T.reducer_init: the starting value's dtype {init_dtype} does not match reducer "
                            f"{name!r} ({dtype}); write T.cast(value, {dtype!r})")
    if init is None:
        from ..transform.reduce_kinds import reduce_identity

        init = reduce_identity(found.op, dtype)
    fill(reducer, init)  # opens it (tile.fill -> opened_by_fill)
    found.opened_by, found.ever_init = "init", True


def reducer_update(target: Any, value: Any) -> None:
    """Combine ``value`` into one output of a reducer: ``T.reducer_update(acc[i], v)``."""
    if not isinstance(target, TensorLoad):
        raise LanguageError(f"T.reducer_update takes the output as `acc[indices]` (a reducer element), "
                            f"got {type(target).__name__}")
    found = _reducer_of(target.source, "T.reducer_update")
    if found.state != "open":
        name = str(found.buffer.name)
        when = "after T.finalize_reducer closed its reduction" if found.state == "final" else "before T.reducer_init"
        raise LanguageError(f"T.reducer_update of reducer {name!r} {when}: it holds no started value; "
                            f"call T.reducer_init({name}) first")
    if found.opened_by == "fill":
        name = str(found.buffer.name)
        raise LanguageError(f"T.reducer_update of reducer {name!r}, whose reduction T.clear / T.fill opened (the "
                            f"first reducer form, updated as `{_FORMS[found.op]}`); the two forms do not mix: "
                            f"open it with T.reducer_init({name}) instead of T.clear / T.fill")
    found.updated = True
    _ib.evaluate(rmw_element(_KIND[found.op], target, value, tirx.const(0, "int32")))


def finalize_reducer(reducer: Any, dst: Any = None, batch: int = 1, annotations: Any = None) -> None:
    """Close a reduction: make the combined values of ``reducer`` visible to every thread of
    the block, and with ``dst`` (upstream's reducer v2) copy them into that tile. ``batch``
    and ``annotations`` are upstream's grouping hints (same result)."""
    del annotations
    if not isinstance(batch, int) or isinstance(batch, bool) or batch < 1:
        raise LanguageError(f"T.finalize_reducer: batch must be >= 1 (an int), got {batch!r}")
    found = _reducer_of(reducer, "T.finalize_reducer")
    extents = [e.value if isinstance(e, tirx.IntImm) else None for e in reducer.shape]
    total = None if None in extents else math.prod(extents)
    # upstream's limits on the grouping: the same kernels are refused here (the result
    # would not depend on it)
    if total is not None and batch > total:
        raise LanguageError(f"T.finalize_reducer: batch {batch} exceeds total output elements ({total}) of "
                            f"reducer {str(reducer.name)!r}; use a batch that divides {total}")
    if total is not None and total % batch:
        raise LanguageError(f"T.finalize_reducer: batch {batch} must evenly divide the {total} output "
                            f"elements of reducer {str(reducer.name)!r}")
    if found.state == "new":
        raise LanguageError(f"T.finalize_reducer of reducer {str(reducer.name)!r}, which was never initialised: "
                            f"call T.reducer_init({reducer.name}) (or T.clear) and update it first")
    found.state = "final"
    barrier = block_barrier().value
    found.closers.append(barrier)
    _ib.evaluate(barrier)
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
    # this kernel's: a kernel whose parse failed may have left its reducers behind
    allocated: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, lambda alloc: allocated.append(alloc.buffer)))
    pending = [r for r in _PENDING if any(r.buffer.same_as(b) for b in allocated)]
    _PENDING.clear()
    reducers = [(r.buffer, r.op) for r in pending]
    name = str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "kernel"
    _check_update_sites(func.body, reducers, name)

    def on_store(store: Any) -> Any:
        for r in pending:
            buffer, op = r.buffer, r.op
            if not store.buffer.same_as(buffer):
                continue
            operand = _update_operand(store, op)
            if operand is None or r.ever_init:
                # raised after the walk: an exception inside a tvm_ffi callback comes back
                # as a plain RuntimeError
                bad.append((buffer, op, store))
                return store
            v1_updates.append(store)
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
    v1_updates: list[Any] = []
    body = tvm_ffi.structural_map(body, (tirx.BufferStore, on_store), order="post")
    if bad:
        buffer, op, store = bad[0]
        written = f"{buffer.name}[{', '.join(str(i) for i in store.indices)}] = {store.value}"
        if any(r.ever_init and r.buffer.same_as(buffer) for r in pending):
            element = f"{buffer.name}[{', '.join(str(i) for i in store.indices)}]"
            raise LanguageError(f"{name}: illegal store to reducer {str(buffer.name)!r} (`{written}`): T.reducer_init "
                                f"opens it, so it is updated only with T.reducer_update({element}, v), "
                                "and read after T.finalize_reducer" + source_location(getattr(store, "span", None)))
        raise LanguageError(f"{name}: the {op} reducer {str(buffer.name)!r} is written as `{written}`; "
                            f"a reducer is only updated as `{_FORMS[op]}` (initialise it with T.clear / T.fill)"
                         + source_location(getattr(store, "span", None)))
    for r in pending:
        if r.state == "open" and (r.updated or any(store.buffer.same_as(r.buffer) for store in v1_updates)):
            raise LanguageError(f"{name}: reducer {str(r.buffer.name)!r} is updated and never finalized: the block's "
                                f"threads see its combined values only after T.finalize_reducer("
                                f"{r.buffer.name}[, dst]); call it after the last update")
    _check_order(func.body, pending, name)
    return func.with_body(body) if not body.same_as(func.body) else func


def _check_update_sites(body: Any, reducers: list[tuple[Any, str]], kernel: str) -> None:
    """Refuse an update that every thread of the block runs (see the module doc)."""
    from .ops import ATOMIC_RMW_ELEMENT, is_call_to

    def target(stmt: Any) -> Any:
        if isinstance(stmt, tirx.BufferStore):
            return stmt.buffer
        value = stmt.value if isinstance(stmt, tirx.Evaluate) else None
        if value is not None and is_call_to(value, ATOMIC_RMW_ELEMENT):
            return value.args[1].source
        return None

    def visit(stmt: Any, per_thread: bool) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                visit(s, per_thread)
        elif isinstance(stmt, tirx.For):
            visit(stmt.body, per_thread or stmt.kind in (tirx.ForKind.PARALLEL, tirx.ForKind.THREAD_BINDING))
        elif isinstance(stmt, tirx.IfThenElse):  # a guard may pick the thread (if tx == 0)
            visit(stmt.then_case, True)
            if stmt.else_case is not None:
                visit(stmt.else_case, True)
        elif isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)):
            buffer = target(stmt)
            if per_thread or buffer is None:
                return
            for reducer, _ in reducers:
                if buffer.same_as(reducer):
                    raise LanguageError(
                        f"{kernel}: reducer {str(reducer.name)!r} is updated outside any T.Parallel loop "
                        f"(`{str(stmt).strip()}`): every thread of the block would combine the same "
                        "value; update it inside `for i in T.Parallel(...)`, or guard the update "
                        "(if T.get_thread_binding() == 0:)" + source_location(getattr(stmt, "span", None)))
        else:
            inner = getattr(stmt, "body", None)
            if isinstance(inner, tirx.Stmt):
                visit(inner, per_thread)

    visit(body, False)


def _check_order(body: Any, reducers: list[_Reducer], kernel: str) -> None:
    """In program order (a loop's body once): no read of a reducer between its
    initialisation and its T.finalize_reducer (a partial, racing value here), and the
    finalize in the loops of the initialisation (conditionals in between are fine). Inside
    another loop the next initialisation would race with the last updates, or the finalize
    would close an already closed reduction: upstream's reducer v2 refuses both."""
    from .ops import ATOMIC_RMW_ELEMENT, is_call_to

    opened: dict[int, tuple[Any, ...]] = {}  # reducer index -> the loops around its initialisation

    def index_of(buffer: Any) -> int | None:
        return next((i for i, r in enumerate(reducers) if buffer.same_as(r.buffer)), None)

    def read_in(node: Any, skip: Any = None) -> int | None:
        """An open reducer that ``node`` reads (``skip``: the reducer it updates)."""
        found: list[int] = []

        def on_source(source: Any) -> None:
            i = index_of(source)
            if i is not None and i in opened and (skip is None or not source.same_as(skip)):
                found.append(i)

        tvm_ffi.structural_walk(node, [(TensorLoad, lambda x: on_source(x.source)),
                                       (TensorRegion, lambda x: on_source(x.source))])
        return found[0] if found else None

    def refuse_read(i: int, stmt: Any) -> None:
        r = reducers[i]
        raise LanguageError(
            f"{kernel}: illegal read of reducer {str(r.buffer.name)!r} before T.finalize_reducer: until "
            f"then it holds the threads' partial values; read it, or the "
            f"tile T.finalize_reducer({r.buffer.name}, dst) copies it into, after the finalize"
            + source_location(getattr(stmt, "span", None)))

    def on_evaluate(stmt: Any, loops: tuple[Any, ...]) -> None:
        value = stmt.value
        for i, r in enumerate(reducers):
            if any(value.same_as(c) for c in r.closers):
                if i in opened and not _same_loops(opened[i], loops):
                    raise LanguageError(
                        f"{kernel}: T.finalize_reducer({r.buffer.name}) is not in the scope of its "
                        "T.reducer_init: the two must be inside the same loops (an `if` between them is "
                        "fine), so that each reduction is initialised, updated and finalized once"
                        + source_location(getattr(stmt, "span", None)))
                opened.pop(i, None)
                return
        args = getattr(value, "args", None) or ()
        regions = [a for a in args if isinstance(a, TensorRegion)]
        i = index_of(regions[-1].source) if regions else None
        if i is not None:  # T.clear / T.fill / T.reducer_init: a tile op into the reducer
            opened[i] = loops
            return
        if is_call_to(value, ATOMIC_RMW_ELEMENT):  # T.reducer_update(r[i], v)
            hit = read_in(value, skip=value.args[1].source)
        else:
            hit = read_in(value)
        if hit is not None:
            refuse_read(hit, stmt)

    def visit(stmt: Any, loops: tuple[Any, ...]) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                visit(s, loops)
        elif isinstance(stmt, tirx.For):
            visit(stmt.body, (*loops, stmt))
        elif isinstance(stmt, tirx.IfThenElse):
            hit = read_in(stmt.condition)
            if hit is not None:
                refuse_read(hit, stmt)
            visit(stmt.then_case, loops)
            if stmt.else_case is not None:
                visit(stmt.else_case, loops)
        elif isinstance(stmt, tirx.Evaluate):
            on_evaluate(stmt, loops)
        elif isinstance(stmt, tirx.BufferStore):
            updated = index_of(stmt.buffer)
            hit = read_in(stmt.value, skip=stmt.buffer if updated is not None else None)
            if hit is not None:
                refuse_read(hit, stmt)
        else:
            inner = getattr(stmt, "body", None)
            if isinstance(inner, tirx.Stmt):
                visit(inner, loops)

    visit(body, ())


def _same_loops(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x.same_as(y) for x, y in zip(a, b))

"""Upstream TileLang's explicit producer/consumer language: ``T.alloc_barrier``,
``T.mbarrier_*`` / ``T.barrier_*``, ``T.tma_copy``, ``T.ws``, ``T.set_max_nreg`` and
``T.get_warp_group_idx``.

Kernels written this way manage their own synchronization: a producer warpgroup copies
tiles and signals a barrier, a consumer warpgroup waits on it, computes and signals back.
The spelling here is backend-neutral IR: each call is one registered ``tl.*`` op, and
``T.ws(k)`` is a condition on the thread index around a ``tl.warp_role`` attribute. A
backend whose hardware has these mechanisms (mbarriers, asynchronous bulk copies, warp
groups) lists :data:`FEATURE` in its manifest's ``language_features`` and lowers them; the
engine refuses a kernel that uses them for any other backend before lowering
(:func:`check_lowerable`), naming the op and its source line.

Semantics (as upstream defines them):

* ``T.alloc_barrier(arrive_count)``: one barrier (an int) or an indexable array of them (a
  list of counts), each completing a phase once ``arrive_count`` threads arrived and the
  bytes it expects were delivered; initialized once, before any thread uses it.
* ``T.mbarrier_wait_parity(mbarrier, parity)`` / ``T.barrier_wait``: every calling thread
  waits until the phase of parity ``parity`` has completed.
* ``T.mbarrier_arrive(mbarrier)`` / ``T.barrier_arrive``: every calling thread arrives.
* ``T.mbarrier_expect_tx(mbarrier, tx)``: the current phase also waits for ``tx`` bytes
  (no arrival); ``T.mbarrier_arrive_expect_tx``: the same, plus an arrival.
* ``T.tma_copy(global_tile, shared_tile, barrier=bar)``: one thread of the calling warp
  role makes ``bar`` expect the tile's bytes and starts the copy; the copy completes on
  ``bar`` (no arrival: the role's threads arrive themselves).
* ``T.ws(k, ...)``: the body runs on warpgroups k, ... alone (threads [128 k, 128 k + 128));
  tile operations inside it (a ``T.gemm``'s accumulator too) are spread over those threads.
* ``T.set_max_nreg(n, is_inc)``: the calling warpgroup's register budget (a hint).
* ``T.get_warp_group_idx()``: the calling thread's warpgroup.
* ``T.fence_proxy_async()``: the calling thread's earlier shared-memory stores are seen by
  the asynchronous operations (a warpgroup MMA's operand reads, bulk copies) ordered after
  it, as a barrier then orders them for other threads.
"""

from __future__ import annotations

import contextlib
from typing import Any

import tvm
from tvm import tirx
from tvm.ir import Range, TensorLoad
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .kernel import _ACTIVE

WARP_GROUP_THREADS = 128  # upstream's T.ws unit: four warps of 32 threads

BARRIER_INIT = "tl.barrier_init"  # (barriers region, count_0, ..., count_n-1)
MBARRIER_WAIT = "tl.mbarrier_wait_parity"  # (barrier element, parity)
MBARRIER_ARRIVE = "tl.mbarrier_arrive"  # (barrier element[, 1: once the thread's earlier T.ptx_cp_async land])
#: (barrier element, block rank): an arrival on that barrier of the cluster's block ``rank``
#: (release at cluster scope: the calling thread's earlier writes are seen by its waiters)
MBARRIER_ARRIVE_CLUSTER = "tl.mbarrier_arrive_cluster"
MBARRIER_EXPECT_TX = "tl.mbarrier_expect_tx"  # (barrier element, bytes)
MBARRIER_ARRIVE_EXPECT_TX = "tl.mbarrier_arrive_expect_tx"  # (barrier element, bytes)
#: (global region, shared region, barrier element[, leader scope: one issuing thread per this many])
TMA_COPY = "tl.tma_copy"
SET_MAX_NREG = "tl.set_max_nreg"  # (registers, is_inc)
WARP_GROUP_IDX = "tl.get_warp_group_idx"  # () -> int32
FENCE_PROXY_ASYNC = "tl.fence_proxy_async"  # ()
#: ``T.ws``: AttrStmt(node=0, WARP_ROLE_ATTR, value=tl.warp_role(first thread, end thread))
WARP_ROLE = "tl.warp_role"
WARP_ROLE_ATTR = "tl.warp_role"

#: op -> how a kernel spells it
EXPLICIT_OPS: dict[str, str] = {
    BARRIER_INIT: "T.alloc_barrier", MBARRIER_WAIT: "T.mbarrier_wait_parity / T.barrier_wait",
    MBARRIER_ARRIVE: "T.mbarrier_arrive / T.barrier_arrive", MBARRIER_EXPECT_TX: "T.mbarrier_expect_tx",
    MBARRIER_ARRIVE_CLUSTER: "T.mbarrier_arrive(mbarrier, cta_id) / T.copy_cluster(..., remote_barrier=)",
    MBARRIER_ARRIVE_EXPECT_TX: "T.mbarrier_arrive_expect_tx", TMA_COPY: "T.tma_copy",
    SET_MAX_NREG: "T.set_max_nreg", WARP_GROUP_IDX: "T.get_warp_group_idx", WARP_ROLE: "T.ws",
    FENCE_PROXY_ASYNC: "T.fence_proxy_async",
}

for _op in EXPLICIT_OPS:
    tvm.ir.register_op_attr(_op, "TCallEffectKind", tirx.CallEffectKind.Opaque.value)
    tvm.ir.register_op_attr(_op, "TScriptPrinterName", _op.replace(".", "_"))


#: the name a backend's manifest lists in ``language_features`` when its pipeline lowers them
FEATURE = "explicit_warp_specialization"


def _first_use(func: Any) -> tuple[str, str]:
    """(how the kernel spells the first explicit op it uses, where: "file:line" or "")."""
    import tvm_ffi

    found: list[tuple[str, Any]] = []

    def visit(stmt: Any) -> None:
        calls: list[Any] = []
        value = stmt.value if isinstance(stmt, (tirx.Evaluate, tirx.AttrStmt)) else stmt.condition
        tvm_ffi.structural_walk(value, (tvm.ir.Call, calls.append))
        for call in calls:
            name = str(getattr(call.op, "name", ""))
            if name in EXPLICIT_OPS:
                found.append((EXPLICIT_OPS[name], stmt.span))

    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, visit), (tirx.IfThenElse, visit), (tirx.AttrStmt, visit)])
    if not found:
        return "", ""
    spelling, span = found[0]
    for other, other_span in found:  # T.ws's marker carries no line; its condition does
        if other == spelling and other_span is not None:
            span = other_span
            break
    where = f"{span.source_name.name}:{span.line}" if span is not None else ""
    return spelling, where


def check_lowerable(func: Any, kernel: str, backend: str, features: tuple[str, ...]) -> None:
    """Refuse, before lowering, a kernel that uses these ops when ``backend`` does not list
    :data:`FEATURE` among its manifest's ``language_features``."""
    if FEATURE in features:
        return
    spelling, where = _first_use(func)
    if not spelling:
        return
    from ..backend.registry import REGISTRY

    able = sorted(name for name, module in REGISTRY.backends.items() if FEATURE in module.language_features)
    instead = (f"target backend {' / '.join(repr(a) for a in able)} does: compile it with target={able[0]!r}"
               if able else "no installed target backend does")
    raise LanguageError(
        f"kernel {kernel!r} uses {spelling}{f' ({where})' if where else ''}: upstream's explicit warp-specialized "
        f"language (T.alloc_barrier, T.mbarrier_*, T.tma_copy, T.ws), which target backend {backend!r} does not "
        f"lower; {instead}, or write the kernel without it: T.copy inside T.Pipelined(n, num_stages=s) and "
        "T.gemm, which every backend pipelines its own way")


def _call(op: str, *args: Any, dtype: str = "int32") -> Any:
    return tvm.ir.Call(tvm.ir.Op.get(op), [tirx.const(a, "int32") if isinstance(a, int) else a for a in args],
                       ret_ty=dtype)


def _emit(op: str, *args: Any) -> None:
    _ib.evaluate(_call(op, *args))


def alloc_barrier(arrive_count: int | list[int] | tuple[int, ...]) -> Any:
    """``T.alloc_barrier(128)``: one barrier; ``T.alloc_barrier([128, 128, 1])``: an array
    of them (index it: ``bars[i]``), barrier i completing after ``arrive_count[i]`` arrivals."""
    counts = [arrive_count] if isinstance(arrive_count, int) else list(arrive_count)
    if not counts or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts):
        raise LanguageError(f"T.alloc_barrier({arrive_count!r}): the arrive count is a positive int (the threads "
                            "that arrive per phase) or a non-empty list of them, one per barrier")
    if not _ACTIVE:
        raise LanguageError("T.alloc_barrier is only valid inside a T.Kernel frame")
    barriers = _ib.alloc_buffer((len(counts),), "uint64", scope="shared")
    region = tirx.BufferRegion(barriers, [Range.from_min_extent(0, len(counts))])
    _emit(BARRIER_INIT, region, *counts)
    return barriers


def alloc_cluster_barrier(arrive_count: int | list[int] | tuple[int, ...]) -> Any:
    """Upstream's barriers that other blocks of the cluster arrive on (``T.mbarrier_arrive(bar,
    cta_id)``, ``T.copy_cluster(..., remote_barrier=bar[i])``): ``T.alloc_barrier``'s (a
    backend with clusters places a kernel's barriers at one shared-memory address in every
    block). Its initialization is visible to the other blocks after a ``T.cluster_sync()``,
    which must come before their first arrival."""
    return alloc_barrier(arrive_count)


def _barrier(value: Any, what: str) -> Any:
    """A barrier element ``bars[i]``; a one-barrier buffer stands for its element 0."""
    if isinstance(value, tirx.Buffer) and len(value.shape) == 1 and str(value.dtype) == "uint64":
        return tirx.BufferLoad(value, [tirx.const(0, "int32")])
    if isinstance(value, TensorLoad) and isinstance(value.source, tirx.Buffer) and \
            str(value.source.dtype) == "uint64":
        return value
    raise LanguageError(f"{what}: expected a barrier from T.alloc_barrier (or one element bars[i] of an "
                        f"array of them), got {type(value).__name__}")


def mbarrier_wait_parity(mbarrier: Any, parity: Any) -> None:
    """Every calling thread waits for the phase of parity ``parity`` of ``mbarrier``."""
    _emit(MBARRIER_WAIT, _barrier(mbarrier, "T.mbarrier_wait_parity"), parity)


def barrier_wait(mbarrier: Any, parity: Any) -> None:
    mbarrier_wait_parity(mbarrier, parity)


def mbarrier_arrive(mbarrier: Any, cta_id: Any = None) -> None:
    """Every calling thread arrives on ``mbarrier``; with ``cta_id``, on that barrier of the
    cluster's block of rank ``cta_id`` (T.ClusterKernel; its threads' earlier writes, to
    their own or to that block's shared memory, are then seen by the threads waiting there)."""
    if cta_id is not None:
        from .clusters import ClusterKernel

        if not _ACTIVE or not isinstance(_ACTIVE[-1], ClusterKernel):
            raise LanguageError("T.mbarrier_arrive(mbarrier, cta_id): arriving on another block's barrier needs "
                                "thread-block clusters; write the kernel as T.ClusterKernel(..., cluster_dims=...) "
                                "(cta_id is a rank in the cluster), or leave cta_id out")
        _emit(MBARRIER_ARRIVE_CLUSTER, _barrier(mbarrier, "T.mbarrier_arrive"), cta_id)
        return
    _emit(MBARRIER_ARRIVE, _barrier(mbarrier, "T.mbarrier_arrive"))


def barrier_arrive(mbarrier: Any) -> None:
    mbarrier_arrive(mbarrier)


def cp_async_barrier_noinc(mbarrier: Any) -> None:
    """Upstream's ``cp.async.mbarrier.arrive.noinc``: the calling thread arrives on
    ``mbarrier`` once its earlier ``T.ptx_cp_async`` copies have landed (an arrival the
    barrier's count includes). A backend may keep those copies synchronous, and then this is
    the thread's arrival now, as ``T.mbarrier_arrive``; the CUDA backend issues the copies
    before it as cp.async and arrives when they land."""
    _emit(MBARRIER_ARRIVE, _barrier(mbarrier, "T.cp_async_barrier_noinc"), 1)


def fence_proxy_async() -> None:
    """The calling thread's shared-memory stores so far are visible to the asynchronous
    operations after it (upstream writes it before arriving on a barrier whose waiters
    run a T.gemm on the tile just stored)."""
    _emit(FENCE_PROXY_ASYNC)


def mbarrier_expect_tx(mbarrier: Any, tx: Any) -> None:
    """The current phase of ``mbarrier`` also waits for ``tx`` bytes (no arrival)."""
    _emit(MBARRIER_EXPECT_TX, _barrier(mbarrier, "T.mbarrier_expect_tx"), tx)


def mbarrier_arrive_expect_tx(mbarrier: Any, tx: Any) -> None:
    _emit(MBARRIER_ARRIVE_EXPECT_TX, _barrier(mbarrier, "T.mbarrier_arrive_expect_tx"), tx)


EVICTION_POLICIES = ("evict_normal", "evict_first", "evict_last")


def tma_copy(src: Any, dst: Any, *, barrier: Any = None, cluster_mask: Any = None,
             leader_scope_threads: int | None = None, eviction_policy: str | None = None,
             **unsupported: Any) -> None:
    """One thread of the calling role starts copying global tile ``src`` into shared tile
    ``dst``; ``barrier``'s current phase completes only once the bytes have landed.
    ``cluster_mask=m`` (in a T.ClusterKernel) is upstream's multicast: the blocks of the
    cluster whose rank is in ``m`` all get the tile the lowest of them names, each into its
    own ``dst``, completing its own ``barrier`` (here each such block loads that tile itself).
    ``leader_scope_threads=n`` (a multiple of 32) elects one issuing thread per ``n`` threads
    of the role instead of one per role (upstream's per-warp TMA: each warp loads its own
    tile, into its own barrier). ``eviction_policy`` is upstream's L2 cache hint; it is taken
    and checked, and the loads here carry no hint (the data and its ordering are the same).

    The other direction, shared tile ``src`` into global ``dst`` (upstream's TMA store, which
    T.tma_store_wait() completes), is a T.copy by the calling threads here: the stores have
    landed when it returns, so T.tma_store_arrive / T.tma_store_wait have nothing to wait for."""
    from .tile import copy, copy_regions, not_global_to_shared

    if unsupported:
        raise LanguageError(f"T.tma_copy: keyword(s) {sorted(unsupported)} are not supported; supported: barrier=, "
                            "cluster_mask=, leader_scope_threads=, eviction_policy=")
    if eviction_policy is not None and eviction_policy not in EVICTION_POLICIES:
        raise LanguageError(f"T.tma_copy(eviction_policy={eviction_policy!r}): one of {', '.join(EVICTION_POLICIES)}")
    if leader_scope_threads is not None and (not isinstance(leader_scope_threads, int) or
                                             isinstance(leader_scope_threads, bool) or leader_scope_threads <= 0 or
                                             leader_scope_threads % 32):
        raise LanguageError(f"T.tma_copy(leader_scope_threads={leader_scope_threads!r}): the threads of each "
                            "leader-election scope, a positive multiple of the warp size (32)")
    src_region, dst_region = copy_regions(src, dst, "T.tma_copy")
    if src_region.source.scope().startswith("shared") and dst_region.source.scope() == "global":
        if barrier is not None:
            raise LanguageError("T.tma_copy(shared, global, barrier=...): a TMA store takes no barrier; "
                                "T.tma_store_wait() completes it")
        if cluster_mask is not None:
            raise LanguageError("T.tma_copy(shared, global, cluster_mask=...): a multicast loads a global tile "
                                "into the shared memory of several blocks; a store takes no mask")
        if leader_scope_threads is not None:
            raise LanguageError("T.tma_copy(shared, global, leader_scope_threads=...): the stores here are made by "
                                "all the calling threads; a leader scope elects the threads that issue a load")
        copy(src, dst)
        return
    if barrier is None:
        raise LanguageError("T.tma_copy(src, dst): a global -> shared copy needs barrier= (from "
                            "T.alloc_barrier); its phase completes when the bytes have landed")
    route = not_global_to_shared(src_region, dst_region)
    if route is not None:
        raise LanguageError(f"T.tma_copy: copies a global tile into a shared tile; got {route}; use T.copy for "
                            "other copies")
    if cluster_mask is not None:
        from .clusters import multicast_source

        src_region = multicast_source(src_region, dst_region, cluster_mask, "T.tma_copy")
    scope = [] if leader_scope_threads is None else [leader_scope_threads]
    _emit(TMA_COPY, src_region, dst_region, _barrier(barrier, "T.tma_copy barrier="), *scope)


def tma_store_arrive() -> None:
    """Upstream's commit of the TMA stores issued so far: T.tma_copy's stores are complete
    when issued here (see T.tma_copy), so there is nothing to commit."""


def tma_store_wait(count: int = 0, read: bool = True) -> None:
    """Upstream's wait until at most ``count`` committed TMA stores are in flight (``read``:
    until their shared sources may be overwritten): T.tma_copy's stores are complete when
    issued here, so it waits for nothing. The arguments are checked as upstream takes them."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise LanguageError(f"T.tma_store_wait(count={count!r}): count is the number of TMA store groups "
                            "allowed to stay in flight, an int >= 0")
    if not isinstance(read, bool):
        raise LanguageError(f"T.tma_store_wait(read={read!r}): read is True or False")


def set_max_nreg(reg_count: int, is_inc: int) -> None:
    """The calling warpgroup's register budget: raise it to ``reg_count`` (``is_inc`` = 1) or
    lower it (0). A multiple of 8 in [24, 256]."""
    if not isinstance(reg_count, int) or not 24 <= reg_count <= 256 or reg_count % 8:
        raise LanguageError(f"T.set_max_nreg({reg_count!r}, ...): the register count is a multiple of 8 "
                            "between 24 and 256")
    if is_inc not in (0, 1, True, False):
        raise LanguageError(f"T.set_max_nreg(..., is_inc={is_inc!r}): 1 raises the budget, 0 lowers it")
    _emit(SET_MAX_NREG, reg_count, int(is_inc))


def inc_max_nreg(reg_count: int) -> None:
    set_max_nreg(reg_count, 1)


def dec_max_nreg(reg_count: int) -> None:
    set_max_nreg(reg_count, 0)


def get_warp_group_idx(warp_size: Any = None, warps_per_group: Any = None) -> Any:
    """The calling thread's warpgroup (its linear thread index // 128)."""
    if warp_size is not None or warps_per_group is not None:
        raise LanguageError("T.get_warp_group_idx(warp_size, warps_per_group): only the default warpgroup "
                            "(4 warps of 32 threads) is supported; call it without arguments")
    return _call(WARP_GROUP_IDX)


def _linear_thread(what: str = "T.ws") -> Any:
    """The calling thread's linear index in its block (x fastest)."""
    if not _ACTIVE:
        raise LanguageError(f"{what} is only valid inside a T.Kernel frame")
    kernel = _ACTIVE[-1]
    tid, extent = None, 1
    for var, threads in zip(kernel.thread_vars, kernel.threads):
        tid = var if tid is None else tid + var * extent
        extent = extent * threads
    return tid


class ws:  # upstream's spelling: `with T.ws(1):`
    """``with T.ws(k, ...):`` the body runs on warpgroups k, ... (contiguous) alone."""

    def __init__(self, *warp_group_idx: int) -> None:
        groups = sorted(set(warp_group_idx))
        if not groups or not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in groups):
            raise LanguageError(f"T.ws{tuple(warp_group_idx)!r}: name one or more warpgroups by index "
                                "(non-negative ints), e.g. T.ws(0) or T.ws(1)")
        if groups != list(range(groups[0], groups[-1] + 1)):
            raise LanguageError(f"T.ws{tuple(warp_group_idx)!r}: the warpgroups of one role must be contiguous; "
                                "write one T.ws block per range")
        self.lo, self.hi = groups[0] * WARP_GROUP_THREADS, (groups[-1] + 1) * WARP_GROUP_THREADS
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self) -> None:
        tid = _linear_thread()
        kernel = _ACTIVE[-1]
        total = 1
        for t in kernel.threads:
            total = total * t if isinstance(t, int) else None
        if total is not None and self.hi > total:
            raise LanguageError(f"T.ws: warpgroup {self.hi // WARP_GROUP_THREADS - 1} needs threads up to "
                                f"{self.hi - 1}, but the kernel has {total}; launch T.Kernel(..., threads="
                                f"{self.hi}) or more")
        stack = contextlib.ExitStack()
        stack.enter_context(_ib.If(tirx.And(tid >= self.lo, tid < self.hi)))
        stack.enter_context(_ib.Then())
        stack.enter_context(_ib.attr(tirx.const(0, "int32"), WARP_ROLE_ATTR, _call(WARP_ROLE, self.lo, self.hi)))
        self._stack = stack

    def __exit__(self, *exc: object) -> bool | None:
        stack, self._stack = self._stack, None
        return stack.__exit__(*exc) if stack is not None else None


__all__ = [
    "alloc_barrier", "barrier_arrive", "barrier_wait", "dec_max_nreg", "get_warp_group_idx", "inc_max_nreg",
    "mbarrier_arrive", "mbarrier_arrive_expect_tx", "mbarrier_expect_tx", "mbarrier_wait_parity",
    "set_max_nreg", "tma_copy", "ws",
]

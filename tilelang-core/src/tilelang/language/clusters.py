"""Thread-block clusters, as upstream spells them (sm_90): ``T.ClusterKernel(*grid,
threads=, cluster_dims=(x, y, z))`` launches the grid in clusters of x*y*z blocks that
run at the same time on one GPC; ``T.block_rank_in_cluster()`` is a block's rank in its
cluster, and ``T.cluster_arrive()`` / ``T.cluster_wait()`` (``T.cluster_sync()``, both)
are the cluster-wide barrier. ``T.copy_cluster(src, dst, dst_block=k)`` stores a shared
tile into another block's shared memory (distributed shared memory), optionally arriving
on a barrier there.

The cluster shape is a function attribute (``tl.cluster_dims``) that a backend with
clusters (manifest language feature :data:`FEATURE`) compiles into the kernel; the ops are
lowered by its own functions (transform/clusters.py). Other backends refuse such kernels
before lowering, naming the backends that have clusters. TMA multicast (``cluster_mask=``)
is each receiving block's own load of the leader's tile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tvm import tirx
from tvm.ir import Range
from tvm.script.ir_builder import tirx as _ib
from tvm.sym.analyzer import Analyzer

from ..errors import LanguageError
from .kernel import _ACTIVE, Kernel
from .ops import (
    CLUSTER_ARRIVE,
    CLUSTER_ARRIVE_RELAXED,
    CLUSTER_DIMS_ATTR,
    CLUSTER_OPS,
    CLUSTER_RANK,
    CLUSTER_STORE,
    CLUSTER_WAIT,
)

#: the manifest language feature of a backend that compiles thread-block clusters
FEATURE = "thread_block_clusters"
#: the most blocks a cluster may hold everywhere (CUDA's portable cluster size)
MAX_PORTABLE_CLUSTER = 8


class ClusterKernel(Kernel):
    """``with T.ClusterKernel(*grid, threads=128, cluster_dims=(2, 1, 1)) as bx:``: a
    ``T.Kernel`` whose blocks are launched in clusters of ``cluster_dims``."""

    def __init__(self, *grid: Any, threads: int | Sequence[int] = 128,
                 cluster_dims: int | Sequence[int] = (1, 1, 1), **unsupported: Any) -> None:
        if unsupported:
            raise LanguageError(f"T.ClusterKernel got unsupported keyword(s) {sorted(unsupported)}; supported: "
                                "grid extents as positional arguments, threads= and cluster_dims=")
        super().__init__(*grid, threads=threads)
        dims = [cluster_dims] if isinstance(cluster_dims, int) else list(cluster_dims)
        dims = [int(d.value) if isinstance(d, tirx.IntImm) else d for d in dims]
        if not 1 <= len(dims) <= 3 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1
                                                for d in dims):
            raise LanguageError(f"T.ClusterKernel(cluster_dims={cluster_dims!r}): the cluster shape is one to three "
                                "positive constant ints (blocks along x, y, z)")
        dims += [1] * (3 - len(dims))
        size = dims[0] * dims[1] * dims[2]
        if size > MAX_PORTABLE_CLUSTER:
            raise LanguageError(f"T.ClusterKernel(cluster_dims={tuple(dims)}): {size} blocks per cluster; CUDA "
                                f"guarantees at most {MAX_PORTABLE_CLUSTER}; use a smaller cluster")
        for axis, (extent, cluster) in enumerate(zip(list(self.grid) + [1] * 3, dims)):
            value = int(extent.value) if isinstance(extent, tirx.IntImm) else extent
            if isinstance(value, int) and value % cluster:
                raise LanguageError(f"T.ClusterKernel: grid extent {value} along {'xyz'[axis]} is not a multiple "
                                    f"of the cluster's {cluster}; a grid is launched in whole clusters: pad the "
                                    "grid (and guard the extra blocks) or change cluster_dims")
        self.cluster_dims = tuple(dims)
        self.function_attrs[CLUSTER_DIMS_ATTR] = [tirx.const(d, "int32") for d in dims]


def _emit(op: str, what: str) -> None:
    if not _ACTIVE:
        raise LanguageError(f"{what} is only valid inside a T.ClusterKernel (or T.Kernel) frame")
    _ib.evaluate(tirx.call_intrin("int32", op))


def block_rank_in_cluster() -> Any:
    """This block's rank in its cluster (0 .. cluster size - 1; 0 in a kernel without clusters)."""
    if not _ACTIVE:
        raise LanguageError("T.block_rank_in_cluster() is only valid inside a T.ClusterKernel frame")
    return tirx.call_intrin("int32", CLUSTER_RANK)


def cluster_arrive() -> None:
    """Arrive at the cluster barrier (this thread's earlier writes released to the cluster)."""
    _emit(CLUSTER_ARRIVE, "T.cluster_arrive()")


def cluster_arrive_relaxed() -> None:
    """Arrive at the cluster barrier without ordering this thread's memory accesses."""
    _emit(CLUSTER_ARRIVE_RELAXED, "T.cluster_arrive_relaxed()")


def cluster_wait() -> None:
    """Wait until every thread of every block of the cluster has arrived."""
    _emit(CLUSTER_WAIT, "T.cluster_wait()")


def cluster_sync() -> None:
    """``T.cluster_arrive()`` then ``T.cluster_wait()``: a barrier over the whole cluster."""
    cluster_arrive()
    cluster_wait()


def copy_cluster(src: Any, dst: Any, *, dst_block: Any = None, cluster_mask: Any = None,
                 remote_barrier: Any = None, eviction_policy: Any = None, coalesced_width: Any = None,
                 annotations: Any = None, loop_layout: Any = None) -> None:
    """``T.copy_cluster(s_src, s_dst, dst_block=k[, remote_barrier=bar[i]])``: the calling
    block's shared tile ``src`` into tile ``dst`` of the shared memory of the cluster's
    block of rank ``k`` (distributed shared memory). Without ``remote_barrier`` the stores
    are seen there after a ``T.cluster_sync()``; with it, every thread of the calling block
    has stored when ``bar[i]`` of block ``k`` gets one arrival (wait for it there with
    ``T.mbarrier_wait_parity``). The calling block's threads share the elements, as a
    ``T.Parallel`` nest; call it where all of them run (a condition on the block rank).
    ``eviction_policy``, ``coalesced_width``, ``annotations`` and ``loop_layout`` are hints
    that change no result. ``cluster_mask=m`` instead of ``dst_block`` is upstream's TMA
    multicast of a global tile (see :func:`_multicast`)."""
    del eviction_policy, coalesced_width, annotations, loop_layout
    from .barriers import MBARRIER_ARRIVE_CLUSTER, _barrier, _call
    from .kernel import get_thread_binding
    from .loop import Parallel
    from .ops import block_barrier
    from .tile import copy_regions

    if not _ACTIVE or not isinstance(_ACTIVE[-1], ClusterKernel):
        raise LanguageError("T.copy_cluster is only valid inside a T.ClusterKernel frame (its dst_block and "
                            "cluster_mask name ranks in the cluster)")
    if cluster_mask is not None:
        _multicast(src, dst, cluster_mask, dst_block)
        return
    if dst_block is None:
        raise LanguageError("T.copy_cluster(src, dst): name the block of the cluster that receives the tile, "
                            "dst_block=k (its rank, T.block_rank_in_cluster() there)")
    src_region, dst_region = copy_regions(src, dst, "T.copy_cluster")
    for name, region in (("source", src_region), ("destination", dst_region)):
        if not region.source.scope().startswith("shared"):
            raise LanguageError(f"T.copy_cluster: the {name} {region.source.name!r} is in {region.source.scope()} "
                                "memory; it copies a shared tile into another block's shared tile (T.alloc_shared)")
    if str(src_region.source.dtype) != str(dst_region.source.dtype):
        raise LanguageError(f"T.copy_cluster: {src_region.source.name} is {src_region.source.dtype} and "
                            f"{dst_region.source.name} is {dst_region.source.dtype}; both tiles have one type")
    src_axes = [i for i, r in enumerate(src_region.region) if not _is_one(r.extent)]
    dst_axes = [i for i, r in enumerate(dst_region.region) if not _is_one(r.extent)]
    src_ext = [src_region.region[i].extent for i in src_axes]
    dst_ext = [dst_region.region[i].extent for i in dst_axes]
    analyzer = Analyzer()
    if len(src_ext) != len(dst_ext) or not all(analyzer.can_prove_equal(a, b) for a, b in zip(src_ext, dst_ext)):
        raise LanguageError(f"T.copy_cluster: the source tile is {src_ext} and the destination {dst_ext}; "
                            "copy tiles of one shape")
    barrier = None if remote_barrier is None else _barrier(remote_barrier, "T.copy_cluster remote_barrier=")
    rank = tirx.const(dst_block, "int32") if isinstance(dst_block, int) else dst_block
    def store(loop_vars: list[Any]) -> None:
        target = tirx.address_of(_element(dst_region, dst_axes, loop_vars))
        _ib.evaluate(tirx.call_intrin("int32", CLUSTER_STORE, target, rank, _element(src_region, src_axes, loop_vars)))

    if src_ext:
        with Parallel(*src_ext) as loop_vars:
            store([loop_vars] if isinstance(loop_vars, tirx.Var) else list(loop_vars))
    else:
        store([])
    if barrier is not None:
        # every thread's stores issued, then one arrival that releases them to block `rank`
        _ib.evaluate(block_barrier().value)
        with _ib.If(get_thread_binding(0) == 0), _ib.Then():
            _ib.evaluate(_call(MBARRIER_ARRIVE_CLUSTER, barrier, rank))


def _multicast(src: Any, dst: Any, cluster_mask: Any, dst_block: Any) -> None:
    """``T.copy_cluster(A[...], tile, cluster_mask=m)``, upstream's TMA multicast: the blocks
    of the cluster whose rank is in ``m`` all get the tile of ``A`` that the lowest of them
    (the leader) names; the others load their own tile, as ``T.copy``. Here every block
    loads what it gets itself: the same tiles, without the multicast's saving of L2 reads."""
    from .tile import copy, copy_regions

    if dst_block is not None:
        raise LanguageError("T.copy_cluster: cluster_mask= (a global tile multicast to several blocks) and "
                            "dst_block= (a shared tile into one other block) are two different copies; give one")
    src_region, dst_region = copy_regions(src, dst, "T.copy_cluster")
    copy(multicast_source(src_region, dst_region, cluster_mask, "T.copy_cluster"), dst)


def multicast_source(src_region: Any, dst_region: Any, cluster_mask: Any, what: str) -> Any:
    """The global tile a block of the cluster gets from a multicast of ``src_region`` to the
    blocks of ``cluster_mask``: the one the lowest block of the mask (the leader) names
    for the blocks in it, its own for the others."""
    from .ops import substitute

    if not _ACTIVE or not isinstance(_ACTIVE[-1], ClusterKernel):
        raise LanguageError(f"{what}(..., cluster_mask=...) is only valid inside a T.ClusterKernel frame (the "
                            "mask names ranks in the cluster)")
    kernel = _ACTIVE[-1]
    size = kernel.cluster_dims[0] * kernel.cluster_dims[1] * kernel.cluster_dims[2]
    mask = int(cluster_mask.value) if isinstance(cluster_mask, tirx.IntImm) else cluster_mask
    if isinstance(mask, bool) or not isinstance(mask, int) or not 0 < mask < (1 << size):
        raise LanguageError(f"{what}(..., cluster_mask={cluster_mask!r}): a mask of the cluster's "
                            f"{size} block ranks, an int from 1 to {(1 << size) - 1}")
    if src_region.source.scope() != "global" or not dst_region.source.scope().startswith("shared"):
        raise LanguageError(f"{what}(..., cluster_mask=...): multicasts a global tile into shared tiles; "
                            f"got {src_region.source.name} ({src_region.source.scope()}) -> {dst_region.source.name} "
                            f"({dst_region.source.scope()})")
    mins = [_resolved(r.min, kernel, src_region.source.name) for r in src_region.region]
    leader = (mask & -mask).bit_length() - 1
    rank = tirx.call_intrin("int32", CLUSTER_RANK)
    receives = ((tirx.const(mask, "int32") >> rank) & 1) == 1
    cx, cy, _ = kernel.cluster_dims
    at = (leader % cx, (leader // cx) % cy, leader // (cx * cy))  # the leader's place in the cluster
    pairs = []
    for block, cluster, offset in zip(kernel.block_vars, kernel.cluster_dims, at):
        if cluster > 1:
            pairs.append((block, tirx.if_then_else(receives, block - block % cluster + offset, block)))
    ranges = [Range.from_min_extent(substitute(m, pairs), r.extent) for m, r in zip(mins, src_region.region)]
    return tirx.BufferRegion(src_region.source, ranges)


def _resolved(index: Any, kernel: Any, tensor: str) -> Any:
    """``index`` over the kernel's block indices, loop variables and parameters alone: the
    names bound before (``col = bx * block_n``) replaced by their values, so that the
    leader's block indices can be put in. Anything else it reads (a ``T.alloc_var``, a
    shared value) may differ between blocks in a way that cannot be followed: refused."""
    import tvm
    import tvm_ffi
    from tvm.script.ir_builder import IRBuilder

    from .ops import substitute

    known: set[Any] = set()
    bound: list[tuple[Any, Any]] = []
    for frame in IRBuilder.current().frames:
        known.update(getattr(frame, "args", None) or [])
        if getattr(frame, "iter_var", None) is not None:
            known.add(frame.iter_var.var)
        known.update(getattr(frame, "vars", None) or [])
        bound += [(stmt.var, stmt.value) for stmt in frame.stmts if isinstance(stmt, tirx.Bind)]
    for _ in range(len(bound)):  # a binding may name an earlier one
        resolved = substitute(index, bound)
        if resolved.same_as(index):
            break
        index = resolved
    unknown: list[Any] = []

    def on_var(var: Any) -> None:
        if not any(var.same_as(k) for k in known) and not any(var.same_as(b) for b in kernel.block_vars):
            unknown.append(var)

    def on_load(load: Any) -> None:
        if load.source.scope() != "global":
            unknown.append(load.source)

    tvm_ffi.structural_walk(index, [(tirx.Var, on_var), (tvm.ir.TensorLoad, on_load)])
    if unknown:
        raise LanguageError(f"T.copy_cluster(..., cluster_mask=...): the tile of {tensor!r} is addressed through "
                            f"{unknown[0].name!r}, whose value in the leading block cannot be followed; address it "
                            "with the block indices, loop variables and parameters (A[by * bm, bx * bn])")
    return index


def _is_one(extent: Any) -> bool:
    return isinstance(extent, tirx.IntImm) and extent.value == 1


def _element(region: Any, axes: list[int], loop_vars: list[Any]) -> Any:
    indices = [r.min for r in region.region]
    for axis, var in zip(axes, loop_vars):
        indices[axis] = region.region[axis].min + var
    return tirx.BufferLoad(region.source, indices)


def uses_clusters(func: Any) -> str:
    """How ``func`` uses clusters ("" if it does not), for messages."""
    import tvm_ffi

    from .ops import is_call_to

    attrs = func.attrs
    if attrs is not None and CLUSTER_DIMS_ATTR in attrs:
        return f"T.ClusterKernel(cluster_dims={tuple(int(d) for d in attrs[CLUSTER_DIMS_ATTR])})"
    import tvm

    found: list[str] = []

    def on_call(call: Any) -> None:
        found.extend(_SPELLING[op] for op in CLUSTER_OPS if is_call_to(call, op))

    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, on_call))
    return found[0] if found else ""


_SPELLING = {CLUSTER_RANK: "T.block_rank_in_cluster()", CLUSTER_ARRIVE: "T.cluster_arrive()",
             CLUSTER_STORE: "T.copy_cluster(..., dst_block=...)",
             CLUSTER_ARRIVE_RELAXED: "T.cluster_arrive_relaxed()", CLUSTER_WAIT: "T.cluster_wait()"}


def check_clusters(func: Any, kernel: str, backend: str, features: tuple[str, ...]) -> None:
    """Refuse, before lowering, a kernel with clusters for a backend without them."""
    if FEATURE in features:
        return
    spelling = uses_clusters(func)
    if not spelling:
        return
    from ..backend.registry import REGISTRY

    able = sorted(name for name, module in REGISTRY.backends.items() if FEATURE in module.language_features)
    instead = (f"target backend {' / '.join(repr(a) for a in able)} does (compile it with target={able[0]!r})"
               if able else "no installed target backend does")
    raise LanguageError(f"kernel {kernel!r} uses {spelling}: thread-block clusters, which target backend "
                        f"{backend!r} does not compile; {instead}, or launch independent blocks with T.Kernel")

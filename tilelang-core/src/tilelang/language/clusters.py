"""Thread-block clusters, as upstream spells them (sm_90): ``T.ClusterKernel(*grid,
threads=, cluster_dims=(x, y, z))`` launches the grid in clusters of x*y*z blocks that
run at the same time on one GPC; ``T.block_rank_in_cluster()`` is a block's rank in its
cluster, and ``T.cluster_arrive()`` / ``T.cluster_wait()`` (``T.cluster_sync()``, both)
are the cluster-wide barrier.

The cluster shape is a function attribute (``tl.cluster_dims``) that a backend with
clusters (manifest language feature :data:`FEATURE`) compiles into the kernel; the ops are
lowered by its own functions (transform/clusters.py). Other backends refuse such kernels
before lowering, naming the backends that have clusters. Distributed shared memory,
cluster mbarriers and multicast are not provided (language/unsupported.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tvm import tirx
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .kernel import _ACTIVE, Kernel
from .ops import (
    CLUSTER_ARRIVE,
    CLUSTER_ARRIVE_RELAXED,
    CLUSTER_DIMS_ATTR,
    CLUSTER_OPS,
    CLUSTER_RANK,
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

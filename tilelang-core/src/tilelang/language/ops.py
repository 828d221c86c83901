"""IR ops TileLang registers with TVM (ops are created by registering their attributes)."""

from __future__ import annotations

import tvm
from tvm.tirx import CallEffectKind

#: marks a loop extent written with T.Parallel until the frontend turns the loop parallel
PARALLEL_EXTENT = "tl.parallel_extent"


def _register(name: str, effect: int, printer: str) -> None:
    tvm.ir.register_op_attr(name, "TCallEffectKind", effect)
    tvm.ir.register_op_attr(name, "TScriptPrinterName", printer)


_register(PARALLEL_EXTENT, CallEffectKind.Pure.value, "T.parallel_extent")

#: tile operations (tilelang.language.tile); operands are buffer regions
#: (``tl.atomic_add`` is the tile atomic of every kind: its third operand names the kind)
TILE_OPS = {name: f"tl.{name}" for name in ("copy", "fill", "gemm", "reduce", "cumsum", "use_swizzle",
                                             "atomic_add", "annotate_layout", "transpose")}
for _name, _op in TILE_OPS.items():
    _register(_op, CallEffectKind.Opaque.value, f"tl_{_name}")

#: Atomic element ops: what T.atomic_* on one element, and LowerTileOps of a tile atomic,
#: leave for each backend to lower (an atomic instruction, or a plain access where the
#: backend runs the kernel serially). Each names its element as a load, ``dst[i]``:
#:   tl.atomic_rmw_element(kind, dst[i], value, memory_order) -> the previous value
#:     (kind indexes ATOMIC_RMW_KINDS; as a statement only the update counts)
#:   tl.atomic_load_element(src[i], memory_order) -> the value
#:   tl.atomic_store_element(dst[i], value, memory_order)
#: memory_order indexes MEMORY_ORDERS (C++'s std::memory_order names, as upstream spells them).
ATOMIC_RMW_ELEMENT = "tl.atomic_rmw_element"
ATOMIC_LOAD_ELEMENT = "tl.atomic_load_element"
ATOMIC_STORE_ELEMENT = "tl.atomic_store_element"
ATOMIC_ELEMENT_OPS = (ATOMIC_RMW_ELEMENT, ATOMIC_LOAD_ELEMENT, ATOMIC_STORE_ELEMENT)
ATOMIC_RMW_KINDS = ("add", "max", "min", "or", "and", "xor")
MEMORY_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")
for _op in ATOMIC_ELEMENT_OPS:
    _register(_op, CallEffectKind.Opaque.value, _op.replace(".", "_"))


#: Warp ops (tilelang.language.warp), lowered by each GPU backend with its own functions and
#: warp size (tilelang.transform.gpu.warp_ops). Operands, as upstream orders them:
#:   tl.shfl_{sync,xor_sync,down_sync,up_sync}(mask, value, lane or delta, width) -> value's type
#:   tl.sync_warp(mask); tl.{any,all}_sync(mask, predicate) -> int32
#:   tl.ballot_sync(mask, predicate), tl.activemask() -> uint64
#:   tl.match_{any,all}_sync(mask, value) -> uint32; tl.syncthreads_{count,and,or}(predicate) -> int32
#:   tl.warp_reduce(kind, value) -> value's type (kind indexes WARP_REDUCE_KINDS)
#:   tl.get_lane_idx / tl.get_warp_idx(linear thread index, warp size or 0 = the backend's)
SHFL_SYNC, SHFL_XOR, SHFL_DOWN, SHFL_UP = "tl.shfl_sync", "tl.shfl_xor_sync", "tl.shfl_down_sync", "tl.shfl_up_sync"
SYNC_WARP, ANY_SYNC, ALL_SYNC = "tl.sync_warp", "tl.any_sync", "tl.all_sync"
BALLOT_SYNC, ACTIVEMASK = "tl.ballot_sync", "tl.activemask"
MATCH_ANY_SYNC, MATCH_ALL_SYNC = "tl.match_any_sync", "tl.match_all_sync"
SYNCTHREADS_COUNT, SYNCTHREADS_AND, SYNCTHREADS_OR = "tl.syncthreads_count", "tl.syncthreads_and", "tl.syncthreads_or"
WARP_REDUCE, LANE_IDX, WARP_IDX = "tl.warp_reduce", "tl.get_lane_idx", "tl.get_warp_idx"
#:   tl.fns(mask uint32, base uint32, offset int32) -> uint32: CUDA's __fns, upstream's T.__fns
FNS = "tl.fns"
WARP_REDUCE_KINDS = ("sum", "max", "min", "bitand", "bitor")
#: op -> how a kernel spells it (for error messages)
WARP_OPS: dict[str, str] = {
    SHFL_SYNC: "T.shfl_sync", SHFL_XOR: "T.shfl_xor", SHFL_DOWN: "T.shfl_down", SHFL_UP: "T.shfl_up",
    SYNC_WARP: "T.sync_warp", ANY_SYNC: "T.any_sync", ALL_SYNC: "T.all_sync",
    BALLOT_SYNC: "T.ballot_sync / T.ballot", ACTIVEMASK: "T.activemask",
    MATCH_ANY_SYNC: "T.match_any_sync", MATCH_ALL_SYNC: "T.match_all_sync",
    SYNCTHREADS_COUNT: "T.syncthreads_count", SYNCTHREADS_AND: "T.syncthreads_and",
    SYNCTHREADS_OR: "T.syncthreads_or", WARP_REDUCE: "T.warp_reduce_*",
    LANE_IDX: "T.get_lane_idx", WARP_IDX: "T.get_warp_idx", FNS: "T.__fns",
}
for _op in WARP_OPS:  # opaque: a shuffle's value depends on other lanes, so nothing may move it
    _register(_op, CallEffectKind.Opaque.value, _op.replace(".", "_"))


#: programmatic dependent launch (upstream's T.pdl_trigger / T.pdl_sync): a kernel lets the
#: next kernel of its stream start, or waits for the kernels it depends on to finish; each
#: backend lowers them (transform/grid_dependencies.py)
PDL_TRIGGER, PDL_SYNC = "tl.pdl_trigger", "tl.pdl_sync"
for _op in (PDL_TRIGGER, PDL_SYNC):
    _register(_op, CallEffectKind.Opaque.value, _op.replace(".", "_"))

#: a barrier for every thread of the grid (upstream's T.sync_grid): a backend with
#: cooperative launches lowers it (transform/grid_dependencies.py, LowerGridSync); no other
#: may drop it, so it stays and is refused by name (engine/semantic_check.py)
SYNC_GRID = "tl.sync_grid"
_register(SYNC_GRID, CallEffectKind.Opaque.value, "tl_sync_grid")

#: upstream's T.named_barrier_arrive(id, count): arrive at a named barrier without waiting
#: (PTX bar.arrive); a backend with named barriers lowers it, any other refuses it by name
NAMED_BARRIER_ARRIVE = "tl.named_barrier_arrive"
_register(NAMED_BARRIER_ARRIVE, CallEffectKind.Opaque.value, "tl_named_barrier_arrive")


#: thread-block clusters (upstream's T.ClusterKernel, sm_90): the function attribute
#: holding the cluster's (x, y, z) blocks, and the ops a backend with clusters lowers
#: (transform/clusters.py): tl.cluster_rank() -> int32, the block's rank in its cluster;
#: tl.cluster_arrive / tl.cluster_arrive_relaxed / tl.cluster_wait, the cluster barrier
CLUSTER_DIMS_ATTR = "tl.cluster_dims"
CLUSTER_RANK, CLUSTER_ARRIVE = "tl.cluster_rank", "tl.cluster_arrive"
CLUSTER_ARRIVE_RELAXED, CLUSTER_WAIT = "tl.cluster_arrive_relaxed", "tl.cluster_wait"
#: tl.cluster_store(address_of(shared element), rank, value): the value stored into the
#: same element of the shared memory of the cluster's block ``rank`` (T.copy_cluster)
CLUSTER_STORE = "tl.cluster_store"
CLUSTER_OPS = (CLUSTER_RANK, CLUSTER_ARRIVE, CLUSTER_ARRIVE_RELAXED, CLUSTER_WAIT, CLUSTER_STORE)
for _op in CLUSTER_OPS:
    _register(_op, CallEffectKind.Opaque.value, _op.replace(".", "_"))

#: TVM's function attribute: the tensor parameters do not alias (False: they may overlap,
#: T.annotate_restrict_buffers; its kernels then get it False too, WaitingKernelsMayAlias)
NOALIAS_ATTR = "tirx.noalias"

#: function attribute: the blocks per SM a kernel asked for (T.annotate_min_blocks_per_sm);
#: backend/pass_pipeline/launch_hints.py hands it to the kernels split off the function
MIN_BLOCKS_PER_SM_ATTR = "tl.min_blocks_per_sm"

#: function attribute: {tensor name: L2 hit ratio} of T.annotate_l2_hit_ratio; the engine
#: records it in the artifact (CompiledArtifact.l2_windows), a target backend's launch
#: wrapper (BackendModule.launch_wrapper) applies it around each launch
L2_HIT_RATIO_ATTR = "tl.l2_hit_ratio"

#: function attribute: names of the shared buffers the compiler itself introduced (fragments
#: placed in shared memory, block reductions' per-warp partials). Their barriers are the
#: compiler's to place, also under ``tl.disable_thread_storage_sync``.
COMPILER_SHARED_ATTR = "tl.compiler_shared_buffers"


def with_compiler_shared(func: object, names: list[str]) -> object:
    """``func`` with ``names`` added to its :data:`COMPILER_SHARED_ATTR`."""
    if not names:
        return func
    old = [str(n) for n in (func.attrs.get(COMPILER_SHARED_ATTR, []) if func.attrs else [])]
    return func.with_attr(COMPILER_SHARED_ATTR, sorted({*old, *names}))


def is_call_to(expr: object, op_name: str) -> bool:
    op = getattr(expr, "op", None)
    return op is not None and getattr(op, "name", None) == op_name


#: a barrier for every thread of the block (``__syncthreads()`` on CUDA; the CPU runs a
#: block's threads in phases between these, or drops them where no thread index is read)
BLOCK_BARRIER = "tirx.tvm_storage_sync"


def block_barrier() -> object:
    """The statement every backend lowers to a block-wide barrier."""
    from tvm import tirx

    return tirx.Evaluate(tirx.call_intrin("int32", BLOCK_BARRIER, "shared"))


def is_block_barrier(stmt: object) -> bool:
    """The whole block's barrier; not a named one (``tvm_storage_sync("shared", id,
    count)``: ``is_named_barrier``)."""
    from tvm import tirx

    return isinstance(stmt, tirx.Evaluate) and is_call_to(stmt.value, BLOCK_BARRIER) and len(stmt.value.args) == 1


def is_named_barrier(expr: object) -> bool:
    """``T.sync_threads(barrier_id[, arrive_count])``: a barrier over some of the block's
    threads, which only backends with named barriers lower."""
    return is_call_to(expr, BLOCK_BARRIER) and len(expr.args) > 1


def substitute(node: object, pairs: list[tuple[object, object]]) -> object:
    """``node`` with each variable ``old`` of ``pairs`` replaced by ``new``."""
    import tvm_ffi
    from tvm import tirx

    def on_var(var: object) -> object:
        for old, new in pairs:
            if var.same_as(old):
                return new
        return var

    return tvm_ffi.structural_map(node, (tirx.Var, on_var), order="post")


def let_bindings(node: object) -> list[tuple[object, object]]:
    """(variable, value) of every binding in ``node``: ``Bind`` (``x = expr`` in a kernel,
    ``T.let``) and ``LetStmt`` statements."""
    import tvm_ffi
    from tvm import tirx

    found: list[tuple[object, object]] = []
    tvm_ffi.structural_walk(node, [(tirx.Bind, lambda b: found.append((b.var, b.value))),
                                   (tirx.LetStmt, lambda s: found.append((s.var, s.value)))])
    return found


def inline_lets(node: object, lets: list[tuple[object, object]]) -> object:
    """``node`` with the variables of ``lets`` replaced by their values until none is left
    (a value may name another binding)."""
    for _ in range(len(lets) + 1):
        inlined = substitute(node, lets) if lets else node
        if inlined.same_as(node):
            break
        node = inlined
    return node


def uses_var(node: object, var: object) -> bool:
    """Whether ``node`` (an expression or statement) refers to the variable ``var``."""
    import tvm_ffi
    from tvm import tirx

    found: list[object] = []
    tvm_ffi.structural_walk(node, (tirx.Var, lambda v: found.append(v) if v.same_as(var) else None))
    return bool(found)


def tl_op_names_in(node: object) -> set[str]:
    """Names of every ``tl.*`` op still called somewhere in a PrimFunc or statement."""
    import tvm_ffi

    found: set[str] = set()

    def visit(call: object) -> None:
        name = getattr(getattr(call, "op", None), "name", None)
        if isinstance(name, str) and name.startswith("tl."):
            found.add(name)

    tvm_ffi.structural_walk(node, (tvm.ir.Call, visit))
    return found

#: ``T.annotate_layout`` of a global tensor with a ``tilelang.layout.Layout``: a marker
#: loop nest over the tensor's shape whose body is ``tl.global_layout(view[0], *storage)``
#: (the storage indices of element (i0, i1, ...) as expressions of the loop variables, and
#: a flat view of the tensor's data); ``transform.ApplyGlobalLayouts`` removes it and
#: rewrites every access of the tensor through the map
GLOBAL_LAYOUT = "tl.global_layout"
_register(GLOBAL_LAYOUT, CallEffectKind.Opaque.value, "tl_global_layout")

#: a kernel written in CUDA C++ (upstream's T.CUDASourceCodeKernel): tl.source_kernel(source,
#: entry, *operands) is the whole body of its launch frame; transform/source_kernels.py binds
#: the operands, and a backend that compiles CUDA source runs its LowerSourceKernels and puts
#: the source in place of the kernel (tilelang-cuda); no other may drop it: refused by name
SOURCE_KERNEL = "tl.source_kernel"
_register(SOURCE_KERNEL, CallEffectKind.Opaque.value, "tl_source_kernel")

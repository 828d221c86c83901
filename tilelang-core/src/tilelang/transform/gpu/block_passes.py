"""The run of GPU-neutral passes between a backend's instruction selection and its
host/device split: the same meaning on every GPU, so one list that backends splice in."""

from __future__ import annotations

from typing import Any

# upstream TileLang's key: the kernel places its own barriers (T.sync_threads, named ones
# among them), and TVM's ThreadSync adds none; a backend that composes these passes honours
# it by listing it in its manifest's pass_configs
DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"


def storage_sync(inner: Any) -> Any:
    """TVM's ThreadSync (``inner``), honouring ``tl.disable_thread_storage_sync``, except in
    kernels where the compiler itself staged values through shared memory: upstream keeps
    such fragments in registers, so its users turn the barriers off where, here, the
    compiler's own shared buffers need them (without them the kernel races and returns
    wrong values). Those kernels keep ThreadSync, with a warning that names the buffers."""
    import warnings

    import tvm

    from ...backend.pass_pipeline import pass_config
    from ...language.ops import COMPILER_SHARED_ATTR

    def run(mod: Any, ctx: Any) -> Any:
        if not pass_config(DISABLE_THREAD_STORAGE_SYNC, False):
            return _sync_around_race_free_regions(inner, mod)
        staged = {gv: f for gv, f in mod.functions.items()
                  if f.attrs is not None and f.attrs.get(COMPILER_SHARED_ATTR)}
        if not staged:
            return mod
        for gv, func in staged.items():
            names = ", ".join(str(n) for n in func.attrs[COMPILER_SHARED_ATTR])
            warnings.warn(f"kernel {gv.name_hint!r}: {DISABLE_THREAD_STORAGE_SYNC} is not applied: the compiler "
                          f"placed {names} in shared memory, whose barriers it keeps (upstream holds them in "
                          "registers, where none are needed)", stacklevel=2)
        synced = _sync_around_race_free_regions(inner, tvm.IRModule(dict(staged)))
        out = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)
        for gv in staged:
            out[gv] = synced[gv.name_hint]
        return out

    return tvm.transform.module_pass(run, opt_level=0, name=f"{inner.info.name} (unless {DISABLE_THREAD_STORAGE_SYNC})")


def _sync_around_race_free_regions(inner: Any, mod: Any) -> Any:
    """ThreadSync (``inner``) over ``mod``; where it refuses a barrier inside a branch that
    only some threads take, again with the thread-dependent branches whose shared-memory
    accesses no two threads share standing in as one statement each (race_free.py)."""
    import tvm

    from .race_free import hide_race_free_regions, restore_regions

    try:
        return inner(mod)
    except tvm.error.InternalError as exc:
        if "Cannot insert syncs inside condition" not in str(exc):
            raise
        refused = exc
    hidden, regions = {}, {}
    for gv, func in mod.functions.items():
        if isinstance(func, tvm.tirx.PrimFunc):
            func, regions[gv.name_hint] = hide_race_free_regions(func)
        hidden[gv] = func
    if not any(regions.values()):
        raise refused
    try:
        synced = inner(tvm.IRModule(hidden, attrs=mod.attrs))
    except tvm.error.InternalError:
        raise refused from None
    out = tvm.IRModule(dict(synced.functions.items()), attrs=synced.attrs)
    for gv, func in synced.functions.items():
        if regions.get(gv.name_hint):
            out[gv] = restore_regions(func, regions[gv.name_hint])
    return out


def gpu_block_passes(max_vector_bytes: int, legalize_bf16: bool = True, trap: str = "__trap",
                     named_barriers: bool = False, vector_fp8: bool = False) -> list[Any]:
    """Fragments placed, T.Parallel nests dealt to the block's threads in vectors of at most
    ``max_vector_bytes``, blocks rasterized, TVM's middle end (``flatten_and_vectorize``;
    without its bf16 legalization when ``legalize_bf16`` is False: a backend whose device
    code computes bfloat16 itself), the barriers (ours, then TVM's ThreadSync for static and
    dynamic shared memory), TVM's warp all-reduce (after ThreadSync: it stages through
    shared memory with barriers of its own), and the shared allocations padded and merged.
    With ``tl.bounds_check``, every access is checked before flattening; a failed check
    prints and calls the dialect's ``trap``. ``named_barriers``: the backend lowers
    ``tvm_storage_sync("shared", id, count)``, so a branch that only some warps take gets
    its barriers as named ones over those warps (branch_barriers.py). ``vector_fp8``: the
    target computes with 8-bit floats itself, so T.Parallel nests over them may be vectors
    (PartitionParallelLoops' VectorRule)."""
    from tvm import s_tir

    from ...backend.pass_pipeline import PadTinySharedAllocations, flatten_and_vectorize
    from ...backend.pass_pipeline.bounds_checks import InstrumentBoundsChecks
    from ...backend.pass_pipeline.shared_memory import ScopeLoadingBinds
    from ..assumes import LowerAssumes
    from .branch_barriers import NameBranchBarriers
    from .extern_statements import VoidExternStatements
    from .fragment_views import InlineFragmentViews
    from .fragments import PlaceFragments
    from .hoist_shared_reads import HoistSharedReads
    from .partition_parallel import PartitionParallelLoops
    from .rasterize import RasterizeBlocks
    from .shared_sync import SyncSharedWritesOfSeveralThreads
    from .statement_liveness import KeepReadTilesAlive
    from .thread_loops import BindNestedThreadLoops
    from .vectorized_loops import LegalizeVectorizedLoops
    from .while_sync import LoopAsWhile, WhileAsLoop

    middle = flatten_and_vectorize()
    if not legalize_bf16:
        middle = [p for p in middle if p.info.name != "tirx.BF16ComputeLegalize"]
    return [
        LowerAssumes(),  # T.assume: gone from device code; over parameters only, a host check
        BindNestedThreadLoops(),  # T.thread_binding of the kernel's own thread index: that index
        InlineFragmentViews(),  # T.view / T.reshape of a fragment: accesses of the fragment itself
        PlaceFragments(),
        LegalizeVectorizedLoops(max_vector_bytes),  # T.vectorized(n): aligned vectors of at most that size
        PartitionParallelLoops(max_vector_bytes=max_vector_bytes, vector_fp8=vector_fp8),
        RasterizeBlocks(),
        InstrumentBoundsChecks(trap=trap),  # only with tl.bounds_check / tirx.instrument_bound_checkers
        *middle,
        SyncSharedWritesOfSeveralThreads(),
        HoistSharedReads(),
        WhileAsLoop(),  # a uniform while loop as a counted one, so ThreadSync can place barriers
        NameBranchBarriers(named_barriers),  # barriers inside warp-range branches; their buffers apart
        storage_sync(s_tir.transform.ThreadSync("shared")),
        storage_sync(s_tir.transform.ThreadSync("shared.dyn")),
        LoopAsWhile(),
        s_tir.transform.LowerThreadAllreduce(),
        PadTinySharedAllocations(),
        ScopeLoadingBinds(),  # a binding that loads a buffer of its own scope: one scope in, for the merge
        KeepReadTilesAlive(),  # a tile a statement reads keeps its bytes past it (no reuse by what it writes)
        s_tir.transform.MergeSharedMemoryAllocations(),
        VoidExternStatements(),  # T.call_extern("handle", f, ...) for its effect: f(...); not ((void*)f(...))
    ]

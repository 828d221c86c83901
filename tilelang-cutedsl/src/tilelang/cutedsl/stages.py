"""``T.Pipelined(n, num_stages=s)`` over cp.async tiles and CuTe GEMMs as a stage ring.

After LowerCuteGemm's rewrite a main loop reads ``barrier; g2s...; wait; barrier; gemm...``.
When every statement of the body is one of those (and the trip count is static), each
operand tile gets ``s`` stages and the loop becomes the multistage schedule of CUTLASS's
sm80 mainloop (one commit group per k tile, always committed so the count stays uniform):

    for t in 0 .. s-2:       if t < n: g2s(tile t -> stage t); commit
    for k in 0 .. n-1:       wait until tile k has landed (at most s-2 groups pending); barrier
                             if k+s-1 < n: g2s(tile k+s-1 -> stage (k+s-1) % s)   # freed at k-1
                             commit
                             gemm(stage k % s)

The barrier after the wait both publishes tile k to every thread and tells the copy that
follows that every warp has finished the GEMM of iteration k-1, whose stage it overwrites.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tilelang.plugin import block_barrier, extern_call, substitute

STAGES_KEY = "num_stages"
#: PrimFunc/module attribute: staged tile name -> stage count
STAGES_ATTR = "tilelang.cutedsl.stages"
SYNC_OPS = ("tl_cute_cp_async_commit", "tl_cute_cp_async_wait")


def extern_name(stmt: Any) -> str | None:
    from tvm import tirx

    value = getattr(stmt, "value", None)
    if isinstance(stmt, tirx.Evaluate) and getattr(getattr(value, "op", None), "name", None) == "tirx.call_extern":
        return str(value.args[0].value)
    return None


def _is_barrier(stmt: Any) -> bool:
    value = getattr(stmt, "value", None)
    return getattr(getattr(value, "op", None), "name", None) == "tirx.tvm_storage_sync"


def _staged(stmt: Any, stage: Any) -> Any:
    """A g2s/gemm call that writes/reads its shared tiles' ``stage`` (a last argument)."""
    call = stmt.value
    return extern_call(str(call.args[0].value), *list(call.args[1:]), stage)


class RingLoop(NamedTuple):
    """A T.Pipelined main loop that LowerCuteGemm rewrote into copies, then GEMMs."""

    loop: Any
    stages: int
    trips: int
    copies: list[Any]  # the tl_cute_g2s statements, in order
    gemms: list[Any]  # the tl_cute_gemm statements, in order
    written: set[str]  # the names of the tiles the copies write


def ring_loop(loop: Any, tiles: dict[str, Any]) -> RingLoop | None:
    """``loop`` as a stage ring's main loop (a static trip count from 0, at least 2 stages, a
    body of copies then GEMMs, with the GEMMs reading only tiles the copies fill, and the
    copies writing only ``tiles``), or None."""
    from tvm import tirx

    stages = loop.annotations.get(STAGES_KEY) if loop.annotations is not None else None
    if stages is None or int(stages) < 2 or not isinstance(loop.extent, tirx.IntImm) or \
            not isinstance(loop.min, tirx.IntImm) or int(loop.min.value) != 0:
        return None
    body = list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]
    work = [s for s in body if not _is_barrier(s) and extern_name(s) not in SYNC_OPS]
    names = [extern_name(s) for s in work]
    copies = [s for s, n in zip(work, names) if n == "tl_cute_g2s"]
    gemms = [s for s, n in zip(work, names) if n == "tl_cute_gemm"]
    if not copies or not gemms or len(copies) + len(gemms) != len(work) or names.index("tl_cute_gemm") < len(copies):
        return None
    written = {str(c.value.args[1].source.name) for c in copies}
    read = {str(t.source.name) for g in gemms for t in g.value.args[1:3]}
    if not read <= written or not written <= set(tiles):
        return None  # a GEMM operand that the ring does not fill, or a tile something else uses
    return RingLoop(loop, int(stages), int(loop.extent.value), copies, gemms, written)


def pipeline(loop: Any, tiles: dict[str, Any]) -> tuple[Any, dict[str, int]] | None:
    """The cp.async stage ring of ``loop``, and the stage count of each tile it stages (by
    name); None when the loop is not a ring's main loop (ring_loop)."""
    from tvm import tirx

    main_loop = ring_loop(loop, tiles)
    if main_loop is None:
        return None
    stages, trips, copies, gemms = main_loop.stages, main_loop.trips, main_loop.copies, main_loop.gemms
    k, i32 = loop.loop_var, "int32"

    def at(trip: Any) -> list[Any]:
        # the loop variable first, then the stage (whose expression holds the variable too)
        return [_staged(substitute(c, [(k, trip)]), tirx.floormod(trip, stages)) for c in copies]

    prologue = []
    for t in range(min(stages - 1, trips)):
        prologue += [*at(tirx.const(t, i32)), extern_call("tl_cute_cp_async_commit")]
    for _ in range(max(0, stages - 1 - trips)):  # keep the group count of the schedule
        prologue.append(extern_call("tl_cute_cp_async_commit"))
    ahead = k + (stages - 1)
    main = [extern_call("tl_cute_cp_async_wait", stages - 2), block_barrier(),
            tirx.IfThenElse(ahead < trips, tirx.SeqStmt(at(ahead)) if len(copies) > 1 else at(ahead)[0], None),
            extern_call("tl_cute_cp_async_commit"),
            *[_staged(g, tirx.floormod(k, stages)) for g in gemms]]
    ring = tirx.For(k, loop.min, loop.extent, loop.kind, tirx.SeqStmt(main), loop.thread_binding)
    drain = extern_call("tl_cute_cp_async_wait", 0)  # no copy outlives the loop
    return tirx.SeqStmt([*prologue, ring, drain]), {name: stages for name in main_loop.written}


def extern_only(body: Any, buffer: Any) -> bool:
    """``buffer`` is touched only as the origin operand of ``tl_cute_*`` statements (no
    element access, no tile op left): its storage order is then this backend's choice."""
    import tvm_ffi
    from tvm import tirx
    from tvm.ir import TensorLoad, TensorRegion

    ok = [True]

    def on_store(store: Any) -> None:
        if store.buffer.same_as(buffer):
            ok[0] = False

    def on_load(load: Any) -> None:
        if load.source.same_as(buffer) and not all(isinstance(i, tirx.IntImm) and i.value == 0 for i in load.indices):
            ok[0] = False

    def on_region(region: Any) -> None:
        if region.source.same_as(buffer):
            ok[0] = False

    tvm_ffi.structural_walk(body, [(tirx.BufferStore, on_store), (TensorLoad, on_load), (TensorRegion, on_region)])
    return ok[0]

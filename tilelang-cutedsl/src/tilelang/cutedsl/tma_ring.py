"""A ``T.Pipelined`` main loop of warpgroup-MMA tiles as a TMA stage ring (sm_90).

stages.py turns the loop into an sm80-style cp.async ring; when LowerCuteGemm then puts
every GEMM of the kernel on warpgroup MMA (gemm.py, _choose_wgmma), the tiles live in
CuTe's GMMA layouts, which the Tensor Memory Accelerator writes directly. The loop is then
rebuilt as the schedule of CUTLASS's sm90 TMA mainloop with one issuing warp (warp 0: CuTe
DSL's TMA copy elects one lane with ``elect.sync`` over the full warp, so the whole warp must
reach it; one lane of it arrives with the expected bytes):

    init:      full[s] expects 1 arrival + the stage's bytes, empty[s] one arrival per thread
    warp 0:    for t < s-1: expect_tx(full[t]); TMA boxes of tile t -> stage t
    for k:     wait full[k % s] (parity (k // s) % 2)
               wgmma on stage k % s; commit; wait until at most 1 group is in flight
               k > 0: every thread arrives on empty[(k-1) % s] (tile k-1's GEMM is done)
               warp 0, if k+s-1 < n: wait empty[(k-1) % s]; expect_tx; boxes of tile
               k+s-1 -> stage (k+s-1) % s (the stage tile k-1 freed)
    after:     wait for every wgmma group

No block barrier is left in the loop: the mbarriers order the TMA writes (the async proxy,
as wgmma reads) against the GEMMs that read and free each stage (PTX ISA, "mbarrier" and
"cp.async.bulk.tensor"). A tile qualifies when its global tensor is 2-D with a static shape,
16-byte rows (TMA's stride rule) and the tile's corner provably a multiple of the tile, so
that CuTe's ``local_tile`` names it; else the cp.async ring stays.
"""

from __future__ import annotations

from typing import Any

from tilelang.plugin import extern_call, seq, substitute

from .stages import RingLoop

#: the ring's statements (the printer's half: cute_statements.py)
INIT, EXPECT, COPY, WAIT, ARRIVE = ("tl_cute_tma_init", "tl_cute_tma_expect", "tl_cute_tma_g2s",
                                    "tl_cute_tma_wait", "tl_cute_tma_arrive")
GEMM_ASYNC, WGMMA_WAIT, PRODUCER = "tl_cute_gemm_async", "tl_cute_wgmma_wait", "tl_cute_producer"
FULL, EMPTY = 0, 1
STRIDE_BYTES = 16  # a TMA global stride is a multiple of 16 bytes (cuTensorMapEncodeTiled)


def _divisible(expr: Any, by: int) -> bool:
    from tvm import tirx
    from tvm.sym.analyzer import Analyzer

    return bool(Analyzer().can_prove(tirx.floormod(expr, by) == 0))


def _box(copy: Any, tiles: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Where a ``tl_cute_g2s`` of the loop reads, in CuTe's (M or N, K) coordinates: the
    tile's index along each mode and the global view's shape; None if TMA cannot load it."""
    from tvm import tirx

    dst, src = copy.value.args[1], copy.value.args[2]
    rows, cols = int(copy.value.args[3].value), int(copy.value.args[4].value)
    tile = tiles.get(str(dst.source.name))
    shape = src.source.shape
    if tile is None or len(shape) != 2 or not all(isinstance(d, tirx.IntImm) for d in shape):
        return None
    height, ld = int(shape[0].value), int(shape[1].value)
    r0, c0 = src.indices
    if ld * src.source.dtype.bits // 8 % STRIDE_BYTES or not _divisible(r0, rows) or not _divisible(c0, cols):
        return None
    index = [tirx.floordiv(r0, rows), tirx.floordiv(c0, cols)]
    if not tile["k_major"]:  # stored (K, M or N): CuTe's mode 0 runs along the rows' columns
        index.reverse()
    return {"dst": dst, "src": tirx.BufferLoad(src.source, [tirx.const(0, "int32")] * 2), "index": index,
            "height": height, "ld": ld, "bytes": rows * cols * src.source.dtype.bits // 8}


def tma_ring(main: RingLoop, tiles: dict[str, dict[str, Any]], threads: int, ring: int) -> Any:
    """The TMA stage ring of a ring's main loop (stages.ring_loop, before stages.py staged
    it), or None where a copy does not qualify."""
    from tvm import tirx

    loop, stages, trips, copies, gemms = main.loop, main.stages, main.trips, main.copies, main.gemms
    boxes = [_box(c, tiles) for c in copies]
    if any(b is None for b in boxes):
        return None
    k, i32 = loop.loop_var, "int32"
    stage_bytes = sum(b["bytes"] for b in boxes)
    producer = tirx.call_extern("bool", PRODUCER)

    def issue(trip: Any) -> Any:
        stage = tirx.floormod(trip, stages)
        loads = [extern_call(COPY, b["dst"], b["src"], *[substitute(i, [(k, trip)]) for i in b["index"]],
                             b["height"], b["ld"], ring, stage) for b in boxes]
        return seq([extern_call(EXPECT, ring, stage, stage_bytes), *loads])

    def parity(trip: Any) -> Any:
        return tirx.floormod(tirx.floordiv(trip, stages), 2)

    previous, ahead = k - 1, k + (stages - 1)
    refill = seq([tirx.IfThenElse(k > 0, extern_call(WAIT, ring, EMPTY, tirx.floormod(previous, stages),
                                                     parity(previous)), None), issue(ahead)])
    main = [extern_call(WAIT, ring, FULL, tirx.floormod(k, stages), parity(k)),
            *[extern_call(GEMM_ASYNC, *list(g.value.args[1:]), tirx.floormod(k, stages)) for g in gemms],
            extern_call(WGMMA_WAIT, 1),
            tirx.IfThenElse(k > 0, extern_call(ARRIVE, ring, tirx.floormod(previous, stages)), None),
            tirx.IfThenElse(tirx.And(producer, ahead < trips), refill, None)]
    prologue = [issue(tirx.const(t, i32)) for t in range(min(stages - 1, trips))]
    return seq([extern_call(INIT, ring, stages, threads),
                tirx.IfThenElse(producer, seq(prologue), None),
                tirx.For(k, loop.min, loop.extent, loop.kind, tirx.SeqStmt(main), loop.thread_binding),
                extern_call(WGMMA_WAIT, 0)])

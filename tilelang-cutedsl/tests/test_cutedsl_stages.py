"""The T.Pipelined stage ring of CuTe GEMMs (tilelang.cutedsl.stages), checked by running its
schedule: an interpreter walks the rewritten kernel for block (0, 0) with cp.async's rules
(a copy lands when a ``cp_async_wait_group(n)`` leaves at most n younger groups pending, and
other threads see it after the next barrier) and checks that every GEMM reads the stages
holding its own k tile, landed and published, and that no copy overwrites a stage before
its GEMM has read it. No GPU needed: this is the part of the kernel a wrong index would
break silently."""

from __future__ import annotations

import pytest
import tvm
from tilelang.cutedsl.gemm import LowerCuteGemm
from tilelang.plugin import substitute
from tilelang.testing.kernels import tile_gemm
from tvm import tirx
from tvm.sym.analyzer import Analyzer


class Schedule:
    def __init__(self, func) -> None:
        self.env: list[tuple[object, object]] = []
        self.analyzer = Analyzer()
        self.stage: dict[tuple[str, int], dict] = {}  # (tile, stage) -> {trip, landed, seen, read}
        self.open: list[dict] = []
        self.groups: list[list[dict]] = []
        self.trips_read = 0
        self.walk(func.body)

    def value(self, expr) -> int:
        out = self.analyzer.simplify(substitute(expr, self.env))
        assert isinstance(out, tirx.IntImm), out
        return int(out.value)

    def walk(self, stmt) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.walk(s)
        elif isinstance(stmt, tirx.For):
            start = self.value(stmt.min)
            for i in range(start, start + self.value(stmt.extent)):
                self.env.append((stmt.loop_var, tirx.const(i, "int32")))
                self.walk(stmt.body)
                self.env.pop()
        elif isinstance(stmt, tirx.IfThenElse):
            if self.value(stmt.condition):
                self.walk(stmt.then_case)
            elif stmt.else_case is not None:
                self.walk(stmt.else_case)
        elif isinstance(stmt, tirx.AttrStmt):
            if stmt.attr_key == "thread_extent":
                self.env.append((stmt.node.var, tirx.const(0, "int32")))  # block (0, 0), thread 0
            self.walk(stmt.body)
        elif isinstance(stmt, tirx.Evaluate):
            self.evaluate(stmt.value)

    def evaluate(self, call) -> None:
        op = getattr(getattr(call, "op", None), "name", None)
        if op == "tirx.tvm_storage_sync":
            for slot in self.stage.values():
                slot["seen"] = slot["seen"] or slot["landed"]
            return
        if op != "tirx.call_extern":
            return
        name, args = str(call.args[0].value), list(call.args[1:])
        if name == "tl_cute_g2s":
            tile, rows, cols = str(args[0].source.name), self.value(args[2]), self.value(args[3])
            trip = self.value(args[1].indices[0]) // rows + self.value(args[1].indices[1]) // cols
            stage = self.value(args[6])
            old = self.stage.get((tile, stage))
            assert old is None or old["read"], f"tile {trip} overwrites stage {stage} of {tile} before trip {old['trip']} is read"
            slot = {"trip": trip, "landed": False, "seen": False, "read": False}
            self.stage[(tile, stage)] = slot
            self.open.append(slot)
        elif name == "tl_cute_cp_async_commit":
            self.groups.append(self.open)
            self.open = []
        elif name == "tl_cute_cp_async_wait":
            keep = self.value(args[0])
            for group in self.groups[:len(self.groups) - keep]:
                for slot in group:
                    slot["landed"] = True
        elif name == "tl_cute_gemm":
            for tile in args[:2]:
                slot = self.stage[(str(tile.source.name), self.value(args[8]))]
                assert slot["trip"] == self.trips_read, (tile, slot, self.trips_read)
                assert slot["seen"], f"trip {self.trips_read} reads {tile.source.name} before it landed and a barrier"
                slot["read"] = True
            self.trips_read += 1


@pytest.mark.parametrize("trips", [1, 2, 3, 9])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_every_trip_reads_its_own_landed_tiles(trips: int, stages: int) -> None:
    func = tile_gemm(64, 64, 32 * trips, 64, 64, 32, stages=stages)
    lowered = LowerCuteGemm()(tvm.IRModule({"main": func}))["main"]
    assert "tl_cute_cp_async_wait" in str(lowered.body)
    schedule = Schedule(lowered)
    assert schedule.trips_read == trips
    assert not schedule.open  # every copy committed


def test_the_checker_catches_a_wrong_stage() -> None:
    """The schedule with the prefetch aimed one stage off must fail the checks above."""
    func = tile_gemm(64, 64, 32 * 6, 64, 64, 32, stages=3)
    lowered = LowerCuteGemm()(tvm.IRModule({"main": func}))["main"]

    def skew(call):
        if getattr(call.op, "name", None) == "tirx.call_extern" and str(call.args[0].value) == "tl_cute_g2s":
            # the prologue's stage 1 becomes stage 2, and so on: one stage off
            return tirx.call_extern("int32", str(call.args[0].value), *call.args[1:-1],
                                    tirx.floormod(call.args[-1] + 1, 3))
        return call

    import tvm_ffi

    broken = lowered.with_body(tvm_ffi.structural_map(lowered.body, (tvm.ir.Call, skew), order="post"))
    with pytest.raises(AssertionError, match="overwrites stage|reads|trip"):
        Schedule(broken)


def test_loops_without_stages_keep_the_plain_copies() -> None:
    lowered = LowerCuteGemm()(tvm.IRModule({"main": tile_gemm(64, 64, 128, 64, 64, 32, stages=1)}))["main"]
    text = str(lowered.body)
    assert "tl_cute_cp_async_commit" in text and "tilelang.cutedsl.stages" not in str(lowered.attrs)
    assert text.count("tl_cute_g2s") == 2

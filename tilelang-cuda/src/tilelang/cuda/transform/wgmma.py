"""wgmma GEMMs (sm_90), for the tensor-core pass: which kernels take them, the operand
tiles' layouts (swizzled or core-matrix, mma_layout.py), and the instructions. Mixed into
the pass's kernel state; uses its ``arch``, ``branch_roles``, ``threads``, ``warp``, ``gemms``, ``tiles``,
``accumulators``, ``rows``, ``pipelined``, ``func``, ``_find``, ``_fill_regs`` and
``_shared_allocations``, and sets ``wgmma`` and ``wgmma_pending``.

Why wgmma: mma.sync keeps the A and B fragments in registers next to the accumulators, so
registers bound the warps an SM holds (0.5x cuBLAS on the H200); wgmma reads A and B
from shared memory through descriptors and runs asynchronously (0.85x).
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import (
    block_barrier,
    dtype_bytes,
    extern_call,
    is_full_region,
    pass_config,
    seq,
    tile_op_name,
    unrolled,
)
from tvm import tirx
from tvm.ir import TensorLoad
from tvm_ffi.structural import WalkResult

from ..target import kernel_arch
from .buffer_uses import buffer_uses
from .cp_async import SHARED_SCOPES, SharedTile
from .explicit_sync import ROLE_ATTR
from .mma_layout import (
    WARP,
    Accumulator,
    CoreMatrixLayout,
    SwizzledLayout,
    WGMMALayout,
    choose_wgmma_layout,
)

WGMMA_TYPES = {"float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "int8": "s8",
               "float32": "tf32"}  # (float32 operands: TF32, as on mma.sync: accumulators.py; K-major only here)
# one wgmma's k step: 32 bytes of K
WGMMA_K = {"f16": 16, "bf16": 16, "e4m3": 32, "e5m2": 32, "s8": 32, "tf32": 8}
WGMMA_ARCHS = ("sm_90", "sm_90a")  # wgmma is Hopper's alone (sm_100 has tcgen05 instead)
DISABLE_WGMMA_CONFIG = "tl.disable_wgmma"
DISABLE_SWIZZLE_CONFIG = "tl.disable_wgmma_swizzle"


def on_wgmma(func: Any) -> bool:
    """Whether the kernel's tensor-core GEMMs can take wgmma and the passes built on the
    automatic schedule apply: sm_90, not disabled, and not the user's own schedule (T.ws
    roles: their GEMMs take wgmma only on tiles their T.tma_copy or T.copy fills, role_tiles.py)."""
    roles: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: roles.append(a) if a.attr_key == ROLE_ATTR else None))
    return kernel_arch(func) in WGMMA_ARCHS and not pass_config(DISABLE_WGMMA_CONFIG) and not roles


class WgmmaGemms:
    """The wgmma half of the tensor-core pass (see the module docstring)."""

    def _choose_wgmma(self) -> None:
        """On sm_90, every tensor-core GEMM moves to wgmma when all of them can: operands
        staged by a cp.async pipeline (their only writer) in core-matrix tiles, C split
        into 64-row pieces per warpgroup. Otherwise the kernel stays on mma.sync.

        A row family (row_families.py) qualifies when each warp holds 16 rows: its layout
        then *is* wgmma's accumulator layout, and a fragment A operand is wgmma's register
        A. Its operand tiles may also be unstaged when T.copy is their only writer (the
        pass lowers those copies itself, into the tile layout, fenced for the async proxy).

        In the user's warp roles (role_tiles.py), whole warpgroups without a row family, the
        operand tiles must be whole tiles that T.tma_copy alone fills (swizzled, for its
        boxes) or that T.copy alone fills."""
        if self.arch not in WGMMA_ARCHS or not self.gemms or pass_config(DISABLE_WGMMA_CONFIG):
            return
        if self.roles and (self.rows or self.threads % (4 * WARP)):
            return  # a row family's exchange needs the whole block; wgmma needs whole warpgroups
        warps = self.threads // WARP
        layouts: dict[Any, WGMMALayout] = {}
        row_layout: WGMMALayout | None = None
        if self.rows:
            if warps % 4 or self.outside_family or any(a.layout.wm != 16 for a in self.accumulators.values()):
                return  # (accumulators beside the family: mma.sync)
            # the same registers, wgmma's bookkeeping; a family split over columns takes its
            # rows 64 per warpgroup, and its warpgroups side by side share them
            family = next(iter(self.rows.values())).layout
            m, splits = family.m, family.column_splits
            groups_m = warps // 4 if splits == 1 else m // 64
            if splits > 1 and (m % 64 or (warps // 4) % groups_m):
                return
            groups_n = warps // 4 // groups_m
            for acc in self.accumulators.values():
                if acc.layout.n % (16 * groups_n):
                    return
                layouts[acc.old] = WGMMALayout(acc.layout.m, acc.layout.n, groups_m, groups_n)
            row_layout = WGMMALayout(m, 16 * groups_n, groups_m, groups_n)
        elif any(args[0].source.scope() not in SHARED_SCOPES for args in self.gemms):
            return  # a fragment A outside a row family: mma.sync
        for args in self.gemms:
            acc = self._find(args[2].source, self.accumulators)
            layout = layouts.get(acc.old) or choose_wgmma_layout(acc.layout.m, acc.layout.n, warps)
            kind = WGMMA_TYPES.get(str(args[1].source.dtype))
            if layout is None or layout.wn > 256 or kind is None:
                return
            if WGMMA_K[kind] != 16 and (bool(args[3].value) or not bool(args[4].value)):
                return  # (8- and 32-bit operands: K-major only; MN-major TF32 ones stay on mma.sync)
            layouts[acc.old] = layout
        for acc in self.accumulators.values():  # a family's other fragments (C cast to fp16)
            if not any(acc.old.same_as(f) for f in layouts):
                layout = choose_wgmma_layout(acc.layout.m, acc.layout.n, warps)
                if layout is None:
                    return
                layouts[acc.old] = layout
        operands = [t for t in self.tiles.values() if t.mma_operand]
        if self.roles:  # the user's own schedule: operands its T.tma_copy or T.copy alone fills (role_tiles.py)
            by_tma = {t.old: self.filled_by_tma_alone(t.old) for t in operands}
            if any(by_tma.values()) and not self.tensor_maps:
                return  # (without host-encoded maps, tma_copy.py says what to do)
            if not all(by_tma[t.old] or (not t.raw and self._written_by_copies_only(t.old)) for t in operands):
                return  # (a tile kept as declared, a slice read, stays on mma.sync)
        elif any(t.raw for t in operands):
            return  # descriptors read whole tiles laid out for them (SharedTile.raw)
        for tile in operands:
            rows, cols = (int(d.value) for d in tile.old.shape)
            if not CoreMatrixLayout.fits(rows, cols, dtype_bytes(tile.old.dtype)):
                return
            if not self.roles and not tile.stages and not (self.rows and self._written_by_copies_only(tile.old)):
                return
        swizzled = self._swizzled_layouts(operands, layouts)
        if self.roles:
            tma = [t for t in operands if by_tma[t.old]]
            if any(t.old not in swizzled or not self.boxes_fit(t.old, swizzled[t.old]) for t in tma):
                return  # a TMA box writes the swizzled layout alone
            for tile in tma:
                tile.raw, tile.tma_only = False, True
        self.wgmma = True
        # one group in flight keeps the tensor cores busy across the barrier; it costs a
        # stage of copy lookahead, so only with three stages or more — and only where
        # nothing but GEMMs touches an accumulator inside the pipelined loops (a row
        # family reads them right after each GEMM) — and only over loops of a constant trip
        # count: over a run-time one (T.dynamic K) ptxas serializes every wgmma (note 77)
        quiet = not self.rows and all(self._accumulators_only_in_gemms(loop) and isinstance(loop.extent, tirx.IntImm)
                                      for loop in self.pipelined)
        self.wgmma_pending = 1 if quiet and self.pipelined and all(s >= 3 for s in self.pipelined.values()) else 0
        for fragment, layout in layouts.items():
            self._find(fragment, self.accumulators).layout = layout
        for row in self.rows.values():
            row.layout = row_layout
        for tile in operands:
            rows, cols = (int(d.value) for d in tile.old.shape)
            tile.core = swizzled.get(tile.old) or CoreMatrixLayout(rows, cols, dtype_bytes(tile.old.dtype))

    def fold_clears_into_gemms(self, body: Any) -> Any:
        """``T.clear(C)`` right before ``T.gemm(..., C)`` on wgmma (nothing between, C whole):
        the GEMM with clear_accum instead, whose first k step ignores C's registers, so no
        instruction zeroes them (attention's S = Q K^T each iteration: 64 registers a thread)."""
        def clears(stmt: Any, gemm: Any) -> bool:
            if tile_op_name(stmt) != "fill" or tile_op_name(gemm) != "gemm":
                return False
            region, value = stmt.value.args
            c = gemm.value.args[2]
            acc = self._find(c.source, self.accumulators)
            return acc is not None and region.source.same_as(c.source) and is_full_region(region) and \
                is_full_region(c) and isinstance(value, (tirx.IntImm, tirx.FloatImm)) and value.value == 0

        def on_seq(stmts: Any) -> Any:
            items, out, i = list(stmts), [], 0
            while i < len(items):
                if i + 1 < len(items) and clears(items[i], items[i + 1]):
                    call = items[i + 1].value
                    args = [*call.args[:5], tirx.const(1, "int32"), *call.args[6:]]
                    out.append(tirx.Evaluate(tvm.ir.Call(call.op, args, ret_ty=call.ty)))
                    i += 2
                else:
                    out.append(items[i])
                    i += 1
            return seq(out) if len(out) != len(items) else stmts

        return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq), order="post")

    def _accumulators_only_in_gemms(self, loop: Any) -> bool:
        """No statement of ``loop`` but a T.gemm reads or writes an accumulator (and no
        T.gemm clears one first: the zeroing is a plain write too)."""
        touching = []

        def visit(node: Any) -> Any:
            if tile_op_name(node) == "gemm":
                if bool(node.value.args[5].value):  # clear_accum
                    touching.append(node)
                return WalkResult.SKIP
            buffer = None
            if isinstance(node, tirx.BufferStore):
                buffer = node.buffer
            elif isinstance(node, (TensorLoad, tvm.ir.TensorRegion)):
                buffer = node.source
            if isinstance(buffer, tirx.Buffer) and self._find(buffer, self.accumulators) is not None:
                touching.append(node)
            return WalkResult.ADVANCE

        tvm_ffi.structural_walk(loop.body, visit, order="pre")
        return not touching

    def _written_by_copies_only(self, buffer: Any) -> bool:
        """Every tile op touching ``buffer`` is a T.copy into it or a GEMM reading it (no
        T.tma_copy, role_tiles.py), and no plain store writes it."""
        return all(u.kind in ("load", "address") or
                   u.kind == "region" and (u.op == "copy" and u.position == 1 or u.op == "gemm" and u.position < 2)
                   for u in buffer_uses(self.func.body, [buffer]))

    def _swizzled_layouts(self, operands: list[SharedTile], layouts: dict[Any, WGMMALayout]) -> dict[Any, Any]:
        """Swizzled layouts for every wgmma operand tile, or none: swizzling is applied to
        absolute shared addresses, so it needs every stage on a 1 KiB boundary, which holds
        when the kernel's other shared buffers (a C tile for the epilogue) are multiples of
        1 KiB too (the dynamic shared buffer starts on a 1 KiB boundary; each stage is a
        multiple of 1 KiB; merging places buffers at sums of sizes). Otherwise
        the tiles keep the core-matrix layout (which wgmma reads more slowly)."""
        if pass_config(DISABLE_SWIZZLE_CONFIG) or not self._others_keep_swizzle_alignment(operands):
            return {}
        chosen: dict[Any, Any] = {}
        for args in self.gemms:
            layout = layouts[self._find(args[2].source, self.accumulators).old]
            trans_a, trans_b = bool(args[3].value), bool(args[4].value)
            for region, mn_major, mn_width in ((args[0], trans_a, 64), (args[1], not trans_b, layout.wn)):
                tile = self._find(region.source, self.tiles)
                if tile is None:  # an A operand in registers
                    continue
                rows, cols = (int(d.value) for d in tile.old.shape)
                choice = SwizzledLayout.choose(rows, cols, dtype_bytes(tile.old.dtype), mn_width if mn_major else None)
                previous = chosen.get(tile.old, choice)
                if choice is None or previous != choice or \
                        (choice.size * choice.dtype_bytes) % 1024:
                    return {}
                chosen[tile.old] = choice
        return chosen

    def _wgmma(self, acc: Accumulator, args: Any, after_first_load: Any = None, after_wait: Any = None) -> Any:
        """C += A @ B on wgmma: per k step (16 deep, 32 for 8-bit types) and 64-row piece
        of the warpgroup's tile, one wgmma.m64nNk16 (k32) reading A and B from their core-matrix tiles through
        descriptors; then one commit. ``after_first_load`` (the pipeline's next copies)
        is issued while the tensor cores work; then the wait leaves at most
        ``wgmma_pending`` groups in flight (the previous iteration's are done, so the
        copies the next iteration issues after its barrier may overwrite their stage);
        ``after_wait`` follows the wait (a TMA ring releases that stage there)."""
        a, b = self.tiles_of(args)
        a_regs = self._find(args[0].source, self.accumulators)  # register A (a row family's P)
        trans_a, trans_b = bool(args[3].value), bool(args[4].value)
        layout = acc.layout
        k_total = int((args[0].source.shape[0] if trans_a else args[0].source.shape[1]).value)
        warp_m, group_n = layout.warp_coords(self.warp)
        m_base, n0 = warp_m // 4 * layout.wm, group_n * layout.wn
        # operands whose tile rows are K are MN-major: wgmma's "transpose" flag
        a_mn_major, b_mn_major = trans_a, not trans_b
        kind = WGMMA_TYPES[str(args[1].source.dtype)]
        depth = WGMMA_K[kind]  # (8- and 32-bit operands: K-major A and B, the tensor-core pass's k_depth)
        name = f"tl_wgmma_m64n{layout.wn}k{depth}_{kind}_" + \
            (f"r{int(b_mn_major)}" if a_regs is not None else f"{int(a_mn_major)}{int(b_mn_major)}")
        a_lbo, a_sbo = a.core.strides(k_along_cols=not a_mn_major) if a is not None else (0, 0)
        b_lbo, b_sbo = b.core.strides(k_along_cols=not b_mn_major)

        def descriptor(tile: SharedTile, row: Any, col: Any, lbo: int, sbo: int) -> Any:
            """(row, col)'s descriptor as the stage origin's plus the bytes between them
            (tl_wgmma_desc_add), where those are a multiple of 16: every call of the GEMM
            then shares the origin's, computed once."""
            origin = tirx.call_extern("uint64", "tl_wgmma_desc", tile.address(0, 0, start=True), lbo, sbo,
                                      tile.core.mode)
            distance = self.analyzer.simplify(
                (tile.element(row, col, start=True) - tile.element(0, 0, start=True)) * dtype_bytes(tile.new.dtype))
            if self.analyzer.can_prove(tirx.floormod(distance, 16) == 0):
                return tirx.call_extern("uint64", "tl_wgmma_desc_add", origin, tirx.Cast("uint32", distance))
            return tirx.call_extern("uint64", "tl_wgmma_desc", tile.address(row, col, start=True), lbo, sbo,
                                    tile.core.mode)

        # clear_accum: the first k step's wgmma writes D = A B (codegen.wgmma_helper's "z"
        # form, scale-d off) instead of instructions zeroing the registers first
        zero_first = bool(args[5].value) and k_total >= depth
        calls = []
        for kk in range(k_total // depth):
            mi = self.var("mi")
            m0 = m_base + mi * 64
            if a_regs is not None:  # the 8 halves of pieces 2 kk, 2 kk + 1: wgmma's A registers
                a_desc = tirx.address_of(tirx.BufferLoad(a_regs.regs, [(mi * a_regs.layout.nt + 2 * kk) * 4]))
            else:
                a_desc = descriptor(a, *((kk * depth, m0) if a_mn_major else (m0, kk * depth)), a_lbo, a_sbo)
            b_desc = descriptor(b, *((kk * depth, n0) if b_mn_major else (n0, kk * depth)), b_lbo, b_sbo)
            d = tirx.address_of(tirx.BufferLoad(acc.regs, [mi * (layout.nt * 4)]))
            zero = "z" if zero_first and kk == 0 else ""
            calls.append(unrolled(mi, layout.mt, extern_call(name + zero, d, a_desc, b_desc)))
        compute = seq([extern_call("tl_wgmma_fence"), *calls, extern_call("tl_wgmma_commit"),
                       after_first_load, extern_call("tl_wgmma_wait", self.wgmma_pending), after_wait])
        if bool(args[5].value) and not zero_first:  # clear_accum
            compute = seq([self._fill_regs(acc), compute])
        if any(t is not None and (t.stages or t.tma_only) for t in (a, b)):
            return compute  # the pipelined loop's barrier orders it, or the user's mbarriers
        # unstaged tiles (a row family's): their writers fenced; publish, and keep the
        # next writes behind this GEMM's reads
        return seq([block_barrier(), compute, block_barrier()])

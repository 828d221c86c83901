"""Tensor-core GEMMs whose accumulators are reduced along rows and fed to the next GEMM:
the pattern of flash-attention (S = Q K^T; row max and sum of S; P = exp(S - max) cast to
fp16; O = O * scale + P V), for the tensor-core pass.

The plain accumulator analysis refuses such fragments (a reduction reads across the
layout). Here one layout serves all of a kernel's fragments at once: the warps split the
rows only (warps_n = 1), so each row of every (M, n) fragment lives in one warp, in the
4 lanes of a quad (lanes with equal l // 4); an (M,) fragment — a *row vector* — is held
by those lanes, element (mi, h) at row warp x wm + 16 mi + l // 4 + 8 h, the rows the
thread's accumulator registers cover. Then:

* a row reduction is the thread's own columns, then two xor shuffles within the quad;
* T.Parallel over (M, n) reads row vectors at its row; T.Parallel over (M,) touches row
  vectors only (the 4 lanes of a quad compute the same values);
* an fp16/bf16 (M, K) fragment in this layout *is* the A operand of mma.m16n8k16: the 8
  halves of its pieces 2 kk and 2 kk + 1 of a 16-row block are the A fragment's 4
  registers (PTX ISA, "Matrix Fragments for mma.m16n8k16"), so P never leaves registers.

All or nothing: any use this cannot follow leaves the kernel to the plain analysis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import tvm
import tvm_ffi
from tilelang.plugin import (
    FRAGMENT_SCOPE,
    REDUCE_KINDS,
    block_barrier,
    buffer_accesses,
    dtype_bytes,
    is_full_region,
    is_identity,
    matrix_extents,
    reduce_combine,
    reduce_identity,
    reduce_operand,
    seq,
    static_ints,
    substitute,
    unrolled,
)
from tvm import tirx
from tvm.ir import TensorLoad

from .cp_async import SHARED_SCOPES
from .mma_layout import WARP, Accumulator, MMALayout, WGMMALayout
from .operands import matrix_slice
from .partial_copies import copied_part

QUAD = 4  # lanes holding one row of an mma.m16n8 accumulator


@dataclass
class RowVector:
    """An (M,) fragment held as the rows of the thread's accumulator pieces."""

    old: Any
    layout: MMALayout | WGMMALayout  # any (M, n) layout of the family: rows depend on M and the warps only
    regs: Any = None

    @property
    def per_thread(self) -> int:
        return self.layout.mt * 2

    @staticmethod
    def register(mi: Any, h: Any) -> Any:
        return mi * 2 + h


class RowFamilies:
    """Mixed into the tensor-core pass's kernel state; uses its ``threads``, ``warp``, ``analyzer``,
    ``lane``, ``accumulators``, ``rows``, ``lowering``, ``_find`` and ``var``, and sets its
    ``shared_operands``, ``row_exchanges``, ``block_prologue`` and ``outside_family``."""

    # -- analysis ------------------------------------------------------------------------
    def _plan_row_families(self, ops: list[tuple[str, Any]], nests: list[tuple[list[Any], Any]],
                           fragments: list[Any], mma_dtypes: Any) -> bool:
        warps = self.threads // WARP
        gemms = [args for name, args in ops if name == "gemm"]
        if not gemms or any(args[2].source.scope() != FRAGMENT_SCOPE for args in gemms):
            return False
        m = static_ints(gemms[0][2].source.shape)
        if m is None or len(m) != 2 or m[0] % 16:
            return False
        m = m[0]
        # the warps split the rows as far as 16-row pieces go; the rest split the columns,
        # and a row reduction then meets across them in shared memory (_reduce_rows)
        warps_m = math.gcd(warps, m // 16)
        warps_n = warps // warps_m
        if warps_n > 1 and self.threads != self.block_threads:
            return False  # warp roles: the exchange's barriers would need every thread
        layouts: dict[Any, MMALayout] = {}
        rows: list[Any] = []
        columns: list[Any] = []  # 1-d fragments read at a column (sparse MLA's mask)
        outside: list[Any] = []  # plain accumulators of another M (a backward's dQ): their own layout
        for fragment in fragments:
            shape = static_ints(fragment.shape)
            if not _in_tile_code(fragment, ops, nests):
                continue  # a thread's own array (a producer's prefetched indices): not the family's
            if shape is not None and len(shape) == 2 and shape[0] == m and shape[1] % (16 * warps_n) == 0:
                layouts[fragment] = MMALayout(m, shape[1], warps_m, warps_n)
            elif shape == [m] and not _read_at_columns(fragment, nests):
                rows.append(fragment)
            elif shape is not None and len(shape) == 1:
                columns.append(fragment)
            elif self._find(fragment, self.accumulators) is not None:
                outside.append(fragment)
            else:
                return False

        def is_outside(buffer: Any) -> bool:
            return any(buffer.same_as(f) for f in outside)

        def laid(buffer: Any) -> MMALayout | None:
            return self._find(buffer, layouts)

        def is_row(buffer: Any) -> bool:
            return any(buffer.same_as(r) for r in rows)

        # what the family cannot hold in registers goes to shared memory (shared_operands):
        # vectors over columns, and with warps side by side the fragment A operands (a warp
        # holds only its columns of them)
        to_shared = []
        for vector in columns:
            if any(name not in ("fill", "copy") for name, args in ops
                   if any(isinstance(a, tvm.ir.TensorRegion) and a.source.same_as(vector) for a in args)):
                return False
            to_shared.append(vector)
        operands = [args[0].source for args in gemms if args[0].source.scope() == FRAGMENT_SCOPE]
        if warps_n > 1 and operands:
            copied = _copied_operands(operands, ops, nests)
            if not copied:
                return False
            to_shared += copied
        if to_shared:
            self.shared_operands = to_shared
            return False

        for name, args in ops:
            regions = [a for a in args if isinstance(a, tvm.ir.TensorRegion)]
            ours = [r for r in regions if r.source.scope() == FRAGMENT_SCOPE]
            if any(is_outside(r.source) for r in ours):
                if not all(is_outside(r.source) for r in ours):
                    return False  # an accumulator outside the family meets one of it
                continue  # the plain accumulator analysis laid it out
            if not ours:
                continue
            partial = [r for r in ours if not is_full_region(r)]
            if partial and (name != "copy" or len(ours) != 1 or laid(partial[0].source) is None or
                            copied_part(args, partial[0]) is None):
                return False  # of part of a fragment, only a copy of part of C to memory
            if name == "gemm":
                if not self._family_gemm_ok(args, laid, m, mma_dtypes):
                    return False
            elif name == "fill":
                continue
            elif name == "copy":
                src, dst = args[0].source, args[1].source
                if len(ours) == 2:
                    same = laid(src) is not None and laid(src) == laid(dst)
                    if not same and not (is_row(src) and is_row(dst)):
                        return False
                elif laid(ours[0].source) is None and not is_row(ours[0].source):
                    return False  # a row vector to or from memory is a nest over rows (below)
            elif name == "reduce":
                if laid(args[0].source) is None or not is_row(args[1].source) or int(args[3].value) != 1:
                    return False
            else:
                return False
        handled = 0
        for loops, inner in nests:
            accesses = [a for a in buffer_accesses(inner) if a[0].scope() == FRAGMENT_SCOPE]
            if any(is_outside(a[0]) for a in accesses):
                if not all(is_outside(a[0]) for a in accesses):
                    return False
                continue
            if not accesses:
                continue
            extents = static_ints([loop.extent for loop in loops])
            if extents is None or extents[0] != m or len(loops) > 2:
                return False
            for buffer, indices, _ in accesses:
                if is_row(buffer):
                    if not is_identity(indices, loops[:1]):
                        return False
                elif laid(buffer) is None or len(loops) != 2 or extents != [m, laid(buffer).n] or \
                        not is_identity(indices, loops):
                    return False
            # a nest over rows runs in every lane of a quad: of the fragments it may only write
            # row vectors (a row's four lanes store the same value to shared or global memory)
            if len(loops) == 1 and any(store and buffer.scope() == FRAGMENT_SCOPE and not is_row(buffer)
                                       for buffer, _, store in buffer_accesses(inner)):
                return False
            handled += len(accesses)
        family = [*layouts, *rows]
        total = [a for a in buffer_accesses(self.func.body) if any(a[0].same_as(f) for f in family)]
        if len(total) != handled:
            return False
        kept = {f: self._find(f, self.accumulators) for f in outside}
        self.accumulators = {**kept, **{f: Accumulator(f, layout) for f, layout in layouts.items()}}
        self.rows = {r: RowVector(r, MMALayout(m, 16 * warps_n, warps_m, warps_n)) for r in rows}
        self.outside_family = bool(outside)
        return True

    def _family_gemm_ok(self, args: Any, laid: Any, m: int, mma_dtypes: Any) -> bool:
        a, b, c = args[0], args[1], args[2]
        trans_a, trans_b = bool(args[3].value), bool(args[4].value)
        c_layout = laid(c.source)
        dtype = str(b.source.dtype)
        if c_layout is None or str(c.source.dtype) != "float32" or dtype not in mma_dtypes:
            return False
        if b.source.scope() not in SHARED_SCOPES or not matrix_slice(b, self.analyzer):
            return False
        if a.source.scope() == FRAGMENT_SCOPE:
            a_layout = laid(a.source)
            if a_layout is None or trans_a or str(a.source.dtype) != dtype or a.source.same_as(c.source) or \
                    not is_full_region(a):
                return False
            k = a_layout.n
        elif a.source.scope() in SHARED_SCOPES and str(a.source.dtype) == dtype and matrix_slice(a, self.analyzer):
            shape = matrix_extents(a)
            ma, k = (shape[1], shape[0]) if trans_a else (shape[0], shape[1])
            if ma != m:
                return False
        else:
            return False
        shape = matrix_extents(b)
        kb, nb = (shape[1], shape[0]) if trans_b else (shape[0], shape[1])
        return kb == k and nb == c_layout.n and k % 16 == 0

    # -- rewriting -----------------------------------------------------------------------
    def _row_of(self, mi: Any, h: Any) -> Any:
        layout = next(iter(self.rows.values())).layout
        warp_m, _ = layout.warp_coords(self.warp)
        row, _ = layout.c_position(self.lane, warp_m, 0, mi, 0, h, 0)
        return row

    def _map_rows(self, body: Any, mi: Any, h: Any) -> Any:
        """Row-vector accesses (at the row) -> the thread's register (mi, h)."""
        def on_store(store: Any) -> Any:
            row = self._find(store.buffer, self.rows)
            if row is None:
                return store
            return tirx.BufferStore(row.regs, store.value, [RowVector.register(mi, h)])

        def on_load(load: Any) -> Any:
            row = self._find(load.source, self.rows) if isinstance(load.source, tirx.Buffer) else None
            return load if row is None else tirx.BufferLoad(row.regs, [RowVector.register(mi, h)])

        return tvm_ffi.structural_map(body, [(tirx.BufferStore, on_store), (TensorLoad, on_load)], order="post")

    def _remap_rows(self, loops: list[Any], inner: Any) -> Any:
        """A nest over (M,) or (M, n) touching row vectors -> the thread's rows; the columns
        of an (M, n) nest run in each lane of the row's quad (all four hold the row)."""
        mi, h = self.var("mi"), self.var("h")
        body = self._map_rows(inner, mi, h)
        body = substitute(body, [(loops[0].loop_var, self._row_of(mi, h))])
        for loop in reversed(loops[1:]):
            body = tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, body)
        layout = next(iter(self.rows.values())).layout
        return unrolled(mi, layout.mt, unrolled(h, 2, body))

    def _reduce_rows(self, args: Any) -> Any:
        """T.reduce_*(C, row vector, dim=1): the thread's columns of each of its rows,
        then the quad's 4 lanes combined with xor shuffles (every lane ends with the row's
        value, as every lane holds the row vector)."""
        from tilelang.language import (
            shfl_xor,  # lowered to __shfl_xor_sync by LowerWarpOps, later
        )

        src = self._find(args[0].source, self.accumulators)
        dst = self._find(args[1].source, self.rows)
        kind, clear = REDUCE_KINDS[int(args[2].value)], bool(args[4].value)
        dtype = str(dst.old.dtype)
        layout = src.layout
        init = reduce_identity(kind, dtype)  # the shared lowering's: one result whichever path runs

        def combine(x: Any, y: Any) -> Any:
            return reduce_combine(kind, x, y)

        mi, h, ni, v = (self.var(n) for n in ("mi", "h", "ni", "v"))
        acc = tirx.decl_buffer((1,), dtype, name="row_acc", scope="local")
        value = reduce_operand(kind, tirx.Cast(dtype, tirx.BufferLoad(src.regs, [layout.c_register(mi, ni, h, v)])))
        current = tirx.BufferLoad(acc, [0])
        own = unrolled(ni, layout.nt, unrolled(v, 2, tirx.BufferStore(acc, combine(current, value), [0])))
        # the shuffled value is stored first: a combine may read it twice and under a
        # select, and every lane of the quad has to execute the shuffle
        other = tirx.decl_buffer((1,), dtype, name="row_other", scope="local")
        shuffles = [tirx.AllocBuffer(other)]
        for lanes in (1, 2):
            shuffles += [tirx.BufferStore(other, shfl_xor(current, lanes), [0]),
                         tirx.BufferStore(acc, combine(current, tirx.BufferLoad(other, [0])), [0])]
        target = RowVector.register(mi, h)
        partial = seq([tirx.AllocBuffer(acc), tirx.BufferStore(acc, init, [0]), own, *shuffles])
        split = dst.layout  # the row vectors' warp grid: which warps share a row
        if split.column_splits == 1:
            result = current if clear else combine(tirx.BufferLoad(dst.regs, [target]), current)
            return unrolled(mi, layout.mt, unrolled(h, 2, seq([partial, tirx.BufferStore(dst.regs, result, [target])])))
        # the warps that share the rows meet in shared memory: each quad's first lane leaves
        # its warp's value of the row, then every lane combines them in warp order (so the
        # warps end with the same value)
        exchange = self._row_exchange(split, dtype)
        _, warp_n = split.warp_coords(self.warp)
        row = self._row_of(mi, h)
        leave = tirx.IfThenElse(tirx.floormod(self.lane, QUAD) == 0,
                                tirx.BufferStore(exchange, current, [warp_n * split.m + row]), None)
        met = tirx.BufferLoad(exchange, [row])
        for other in range(1, split.column_splits):
            met = combine(met, tirx.BufferLoad(exchange, [other * split.m + row]))
        result = met if clear else combine(tirx.BufferLoad(dst.regs, [target]), met)
        return seq([unrolled(mi, layout.mt, unrolled(h, 2, seq([partial, leave]))), block_barrier(),
                    unrolled(mi, layout.mt, unrolled(h, 2, tirx.BufferStore(dst.regs, result, [target]))),
                    block_barrier()])  # before the next exchange writes it again

    def _row_exchange(self, split: Any, dtype: str) -> Any:
        """The kernel's one exchange tile of ``dtype``, [column splits x m] flattened
        (every reduction ends with a barrier, so the next may write it again), allocated
        at the top of the block. Static shared memory, padded to a multiple of 1 KiB: CUDA
        places the dynamic buffer after it, and wgmma's swizzled tiles there need their
        1 KiB alignment (a 512-byte exchange broke every split wgmma kernel on the H200)."""
        if dtype not in self.row_exchanges:
            size = split.column_splits * split.m
            per_kib = 1024 // dtype_bytes(dtype)
            size = -(-size // per_kib) * per_kib
            self.row_exchanges[dtype] = tirx.decl_buffer((size,), dtype, name="row_exchange", scope="shared")
            self.block_prologue.append(tirx.AllocBuffer(self.row_exchanges[dtype]))
        return self.row_exchanges[dtype]


def _read_at_columns(vector: Any, nests: list[tuple[list[Any], Any]]) -> bool:
    """Whether a T.Parallel nest over (rows, columns) indexes the 1-d fragment ``vector``
    by anything but its row."""
    for loops, inner in nests:
        for buffer, indices, _ in buffer_accesses(inner):
            if buffer.same_as(vector) and len(loops) == 2 and not is_identity(indices, loops[:1]):
                return True
    return False


def _in_tile_code(fragment: Any, ops: list[tuple[str, Any]], nests: list[tuple[list[Any], Any]]) -> bool:
    """Whether a tile op or a T.Parallel nest touches ``fragment``. One that neither does is
    indexed by plain per-thread code only, each thread its own copy, and needs no layout."""
    if any(any(isinstance(a, tvm.ir.TensorRegion) and a.source.same_as(fragment) for a in args) for _, args in ops):
        return True
    return any(any(a[0].same_as(fragment) for a in buffer_accesses(inner)) for _, inner in nests)


def _copied_operands(operands: list[Any], ops: list[tuple[str, Any]], nests: list[tuple[list[Any], Any]]) -> list[Any]:
    """The fragment A operands written only by T.copy (of a shared tile, ``T.copy(S_shared,
    P)`` as upstream's MLA decode writes P, or of the scores' fragment) and read only by
    GEMMs: as shared tiles themselves (with_shared_operands) they are what a row family split
    over columns can read. [] where any is not."""
    chosen: list[Any] = []
    for fragment in operands:
        if any(any(a[0].same_as(fragment) for a in buffer_accesses(inner)) for _, inner in nests):
            return []
        for name, args in ops:
            regions = [a for a in args if isinstance(a, tvm.ir.TensorRegion) and a.source.same_as(fragment)]
            if not regions:
                continue
            if name == "copy" and args[1].source.same_as(fragment) and not args[0].source.same_as(fragment):
                continue
            if name == "gemm" and args[0].source.same_as(fragment) and len(regions) == 1:
                continue
            return []
        if not any(x.same_as(fragment) for x in chosen):
            chosen.append(fragment)
    return chosen


def with_shared_operands(func: Any, fragments: list[Any]) -> Any:
    """``func`` with each of ``fragments`` a shared tile (copies into it become shared to
    shared copies; the GEMMs read it as any shared operand)."""
    pairs = [(f, tirx.decl_buffer(f.shape, f.dtype, name=f.name, scope="shared.dyn")) for f in fragments]
    return func.with_body(substitute(func.body, pairs))

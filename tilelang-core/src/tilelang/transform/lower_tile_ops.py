"""LowerTileOps: tile operations -> T.Parallel loop nests (shared, backend-neutral).

Every ``tl.*`` tile op becomes loops over its tile written as T.Parallel nests (ForKind
PARALLEL, annotated ``tilelang.parallel``), which each backend already maps onto its
machine: the CPU runs them as loops, the GPU partitions them across a block's threads. A
backend that selects its own instructions for an op (tensor cores for ``tl.gemm``) runs its
pass first; whatever it leaves is lowered here.

Out-of-range parts of a tile (a tile at the edge of a global tensor) read as zero and are
not written; guards are emitted only where the analyzer, knowing the extents of every block
index and loop, cannot prove the access in range.
"""

from __future__ import annotations

import contextlib
from typing import Any

import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import Range, TensorLoad, TensorRegion
from tvm.sym.analyzer import Analyzer

from ..backend.pass_pipeline import prim_func_pass
from ..errors import LanguageError
from ..language.bounds import source_location
from ..language.ops import (
    ATOMIC_RMW_ELEMENT,
    ATOMIC_RMW_KINDS,
    TILE_OPS,
    substitute,
    with_compiler_shared,
)
from ..language.tile import REDUCE_KINDS, SCAN_KINDS
from .block_reduce import across_threads, reduce_across_threads
from .reduce_kinds import reduce_combine, reduce_identity, reduce_operand
from .source_lines import stamp_span

_OP_NAMES = {op: name for name, op in TILE_OPS.items()}
_UNBOUNDED = 2**62  # ConstIntBound's infinities are +-(2^63 - 1)
_PARALLEL = {"tilelang.parallel": 1}
#: PrimFunc attribute [panel_size, order (0 row, 1 col)] left by T.use_swizzle
BLOCK_SWIZZLE_ATTR = "tilelang.block_swizzle"
#: loop annotation on the nest of a tile atomic written with use_tma=True: a request for a
#: TMA bulk reduction, which a backend serves with element atomics or refuses
ATOMIC_USE_TMA_ATTR = "tilelang.atomic_use_tma"


def _cast(dtype: str, value: Any) -> Any:
    return value if str(value.ty.dtype) == dtype else tirx.Cast(dtype, value)


def _per_thread(buffer: Any) -> bool:
    """A buffer each thread holds whole (``T.alloc_local`` / ``T.alloc_var``), as opposed
    to a tile the block's threads share out (shared memory, fragments)."""
    return buffer.scope() in ("local", "local.var")


class TileOpLowering:
    """Lowers one tile op at a time to T.Parallel nests (backends that select their own
    instructions for some ops use it for the rest, e.g. the copies around a tensor-core
    accumulator)."""

    def __init__(self, func: Any, kernel: str, cross_thread: bool = False) -> None:
        self.kernel = kernel
        self.cross_thread = cross_thread  # may rows be reduced by the whole block (GPU)
        self.threads: tuple[Any, int] | None = None  # (threadIdx.x, its constant extent) alone
        self.analyzer = Analyzer()
        self.counter = 0
        self.swizzle: list[int] | None = None
        self.compiler_shared: list[str] = []  # shared buffers this lowering introduced
        self.body: Any = func.body  # the body lowered: the ifs around each tile op, a fragment's uses
        self._conditions: list[tuple[Any, list[Any]]] | None = None  # read on the first lower()
        self._scalars: list[tuple[Any, list[tuple[Any, Any]]]] | None = None  # read on the first lower()
        self.known: list[tuple[Any, Any]] = []  # (scalar buffer, its value) at the op being lowered
        bounds: list[tuple[Any, Any, Any]] = []

        def collect(node: Any) -> None:
            if isinstance(node, tirx.AttrStmt) and node.attr_key == "thread_extent":
                bounds.append((node.node.var, tirx.IntImm(node.node.var.ty, 0), node.value))
            elif isinstance(node, tirx.For):
                bounds.append((node.loop_var, node.min, node.extent))

        tvm_ffi.structural_walk(func.body, collect)
        for var, lo, extent in bounds:
            self.analyzer.bind(var, Range.from_min_extent(lo, extent))
        self._bind_let_ranges(func.body)
        tags: list[Any] = []
        tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: tags.append(a) if a.attr_key == "thread_extent"
                                            and a.node.thread_tag.startswith("threadIdx") else None))
        if len(tags) == 1 and tags[0].node.thread_tag == "threadIdx.x" and isinstance(tags[0].value, tirx.IntImm) \
                and int(tags[0].value.value) >= 32:
            self.threads = (tags[0].node.var, int(tags[0].value.value))

    def _bind_let_ranges(self, body: Any) -> None:
        """A bound variable (``bx = t % 32``, as T.Persistent binds its tile coordinates)
        gets the integer range of its value, where that range is finite: the variable
        equals its value wherever it is seen, so the range holds there. (The range, not the
        value: a guard ``bx < 32`` around a copy must stay usable as a fact about bx.)"""
        lets: list[Any] = []
        tvm_ffi.structural_walk(body, (tirx.Bind, lets.append))
        hulls: list[tuple[Any, int, int]] = []  # per variable: the hull of every value bound to it
        for let in lets:
            if not str(let.var.ty).startswith(("int", "uint")):
                continue  # a handle, a float: no integer range
            bound = self.analyzer.const_int_bound(let.value)
            at = next((i for i, (var, _, _) in enumerate(hulls) if var.same_as(let.var)), None)
            if at is None:
                hulls.append((let.var, bound.min_value, bound.max_value))
            else:
                _, lo, hi = hulls[at]
                hulls[at] = (let.var, min(lo, bound.min_value), max(hi, bound.max_value))
        for var, lo, hi in hulls:
            if lo > -_UNBOUNDED and hi < _UNBOUNDED:
                self.analyzer.bind(var, Range.from_min_extent(lo, hi - lo + 1))
        # a variable bound once is its value everywhere: shapes compare through it
        # (``H1 = H0 + 64``: the tile ``H0:H1`` is 64 long)
        counts: dict[int, int] = {}
        for let in lets:
            counts[let.var.__chandle__()] = counts.get(let.var.__chandle__(), 0) + 1
        self.lets = [(let.var, let.value) for let in lets if counts[let.var.__chandle__()] == 1]

    def same_extent(self, a: Any, b: Any) -> bool:
        """Whether two tile extents are provably equal, bound names read as their values
        (and the scalars stored just before the op as theirs: ``known_scalars``)."""
        if self.analyzer.can_prove_equal(a, b):
            return True
        for _ in range(4):  # a value may name other bound variables
            a, b = substitute(a, self.lets), substitute(b, self.lets)
            a, b = _read_scalars(a, self.known), _read_scalars(b, self.known)
            if self.analyzer.can_prove_equal(a, b):
                return True
        return False

    # -- helpers -------------------------------------------------------------------------
    def error(self, op: str, message: str) -> LanguageError:
        return LanguageError(f"kernel {self.kernel!r}, T.{op}: {message}")

    def fresh(self, name: str, dtype: Any = "int32") -> Any:
        self.counter += 1
        return tirx.Var(f"{name}{self.counter}", dtype)

    def nest(self, extents: list[Any], body_fn: Any, parallel: bool = True) -> Any:
        """Loops over ``extents`` (outermost first) around ``body_fn(vars)``."""
        variables = [self.fresh("i") for _ in extents]
        for var, extent in zip(variables, extents):
            self.analyzer.bind(var, Range.from_min_extent(0, extent))
        body = body_fn(variables)
        for var, extent in reversed(list(zip(variables, extents))):
            kind = tirx.ForKind.PARALLEL if parallel else tirx.ForKind.SERIAL
            body = tirx.For(var, 0, extent, kind, body, annotations=_PARALLEL if parallel else None)
        return body

    def in_bounds(self, buffer: Any, indices: list[Any]) -> Any:
        """The condition that ``indices`` address ``buffer`` (None when provably true).
        Only global tensors are guarded: on-chip tiles are sized by the kernel itself."""
        if buffer.scope() != "global":
            return None
        conds = []
        for index, dim in zip(indices, buffer.shape):
            if not self.analyzer.can_prove(index < dim):
                conds.append(index < dim)
        if not conds:
            return None
        cond = conds[0]
        for c in conds[1:]:
            cond = tirx.And(cond, c)
        return cond

    def local_scalar(self, dtype: Any) -> Any:
        return tirx.decl_buffer((1,), dtype, name=f"acc{self.counter}", scope="local")

    # -- regions -------------------------------------------------------------------------
    @staticmethod
    def parts(region: Any) -> tuple[Any, list[Any], list[Any]]:
        return region.source, [r.min for r in region.region], [r.extent for r in region.region]

    def tile_axes(self, region: Any) -> list[int]:
        """Axes of a region that are part of the tile (extent != 1)."""
        return [a for a, r in enumerate(region.region)
                if not (isinstance(r.extent, tirx.IntImm) and r.extent.value == 1)]

    def indices(self, region: Any, axes: list[int], loop_vars: list[Any]) -> list[Any]:
        mins = [r.min for r in region.region]
        out = list(mins)
        for axis, var in zip(axes, loop_vars):
            out[axis] = mins[axis] + var
        return out

    # -- ops -----------------------------------------------------------------------------
    def copy(self, src: Any, dst: Any) -> Any:
        s_axes, d_axes = self.tile_axes(src), self.tile_axes(dst)
        s_ext = [src.region[a].extent for a in s_axes]
        d_ext = [dst.region[a].extent for a in d_axes]
        if len(s_ext) != len(d_ext) or not all(self.same_extent(a, b) for a, b in zip(s_ext, d_ext)):
            raise self.error("copy", f"source tile {s_ext} and destination tile {d_ext} differ in shape")
        # loop over the constant one of two equal extents (a tile's partitioning needs it)
        s_ext = [d if isinstance(d, tirx.IntImm) and not isinstance(s, tirx.IntImm) else s
                 for s, d in zip(s_ext, d_ext)]
        dst_buf, src_buf = dst.source, src.source

        def body(loop_vars: list[Any]) -> Any:
            s_idx, d_idx = self.indices(src, s_axes, loop_vars), self.indices(dst, d_axes, loop_vars)
            value = tirx.BufferLoad(src_buf, s_idx)
            if str(src_buf.dtype) != str(dst_buf.dtype):
                value = tirx.Cast(dst_buf.dtype, value)
            ok = self.in_bounds(src_buf, s_idx)
            if ok is not None:
                value = tirx.if_then_else(ok, value, tirx.const(0, dst_buf.dtype))
            store = tirx.BufferStore(dst_buf, value, d_idx)
            guard = self.in_bounds(dst_buf, d_idx)
            return store if guard is None else tirx.IfThenElse(guard, store, None)

        # a local buffer is each thread's own: a copy into it, or out of it (upstream's sparse
        # compressor stores its row of results so), runs whole in every thread
        return self.nest(s_ext, body, parallel=not (_per_thread(dst_buf) or _per_thread(src_buf)))

    def fill(self, dst: Any, value: Any) -> Any:
        axes = self.tile_axes(dst)
        buffer = dst.source

        def body(loop_vars: list[Any]) -> Any:
            idx = self.indices(dst, axes, loop_vars)
            store = tirx.BufferStore(buffer, tirx.Cast(buffer.dtype, value), idx)
            guard = self.in_bounds(buffer, idx)
            return store if guard is None else tirx.IfThenElse(guard, store, None)

        # a local buffer is each thread's own (T.alloc_local): every thread fills all of it
        return self.nest([dst.region[a].extent for a in axes], body, parallel=not _per_thread(buffer))

    def matrix(self, region: Any) -> tuple[Any, list[Any], list[Any]]:
        """A GEMM operand's buffer, its region's mins (all axes) and the extents of its last
        two axes: the matrix. Axes before them must each have extent 1 (a stage of a 3-d
        shared buffer, ``K_shared[stage, :, :]``, as upstream's pipelined kernels pass it)."""
        buffer, mins, extents = self.parts(region)
        if len(extents) < 2 or not all(self.analyzer.can_prove_equal(e, 1) for e in extents[:-2]):
            raise self.error("gemm", f"A, B and C must be 2-d tiles (a region of {buffer.name} has extents "
                                     f"{list(extents)}: only the last two may be other than 1)")
        return buffer, mins, extents[-2:]

    def gemm(self, a: Any, b: Any, c: Any, trans_a: bool, trans_b: bool, clear: bool) -> Any:
        a_buf, a_min, a_ext = self.matrix(a)
        b_buf, b_min, b_ext = self.matrix(b)
        c_buf, c_min, c_ext = self.matrix(c)
        m, k = (a_ext[1], a_ext[0]) if trans_a else (a_ext[0], a_ext[1])
        k2, n = (b_ext[1], b_ext[0]) if trans_b else (b_ext[0], b_ext[1])
        if not (self.analyzer.can_prove_equal(k, k2) and self.analyzer.can_prove_equal(c_ext[0], m)
                and self.analyzer.can_prove_equal(c_ext[1], n)):
            raise self.error("gemm", f"shapes do not agree: A {a_ext}{'^T' if trans_a else ''}, "
                             f"B {b_ext}{'^T' if trans_b else ''}, C {c_ext}")
        c_type = str(c_buf.dtype)
        # 16-bit float accumulators sum in float32 within the call and round once at its end
        # (as a tensor core's fp16 accumulation rounds per instruction, not per product)
        acc_type = "float32" if c_type in ("float16", "bfloat16") else c_type

        def body(ij: list[Any]) -> Any:
            i, j = ij
            acc = self.local_scalar(acc_type)
            kk = self.fresh("k")
            def at(mins: list[Any], row: Any, col: Any) -> list[Any]:
                return [*mins[:-2], mins[-2] + row, mins[-1] + col]

            a_idx = at(a_min, kk, i) if trans_a else at(a_min, i, kk)
            b_idx = at(b_min, j, kk) if trans_b else at(b_min, kk, j)
            c_idx = at(c_min, i, j)
            product = (tirx.Cast(acc_type, tirx.BufferLoad(a_buf, a_idx))
                       * tirx.Cast(acc_type, tirx.BufferLoad(b_buf, b_idx)))
            update = tirx.BufferStore(acc, tirx.BufferLoad(acc, [0]) + product, [0])
            init = tirx.const(0, acc_type) if clear else _cast(acc_type, tirx.BufferLoad(c_buf, c_idx))
            return tirx.SeqStmt([
                tirx.AllocBuffer(acc),
                tirx.BufferStore(acc, init, [0]),
                tirx.For(kk, 0, k, tirx.ForKind.SERIAL, update),
                tirx.BufferStore(c_buf, _cast(c_type, tirx.BufferLoad(acc, [0])), c_idx),
            ])

        return self.nest([m, n], body)

    def _reduce_layout(self, op: str, src: Any, dst: Any, axis: int) -> tuple[list[int], list[int]]:
        """(src axes kept, dst axes they map to)."""
        rank, d_rank = len(src.region), len(dst.region)
        kept = [a for a in range(rank) if a != axis]
        if d_rank == rank - 1:
            d_axes = list(range(d_rank))
        elif d_rank == rank:
            d_axes = kept
        else:
            raise self.error(op, f"destination is {d_rank}-d; reducing a {rank}-d tile gives {rank - 1}-d")
        # a destination of another extent would be written past its end or left partly unset
        s_ext = [r.extent for r in src.region]
        d_ext = [r.extent for r in dst.region]
        for a, d in zip(kept, d_axes):
            if self.analyzer.can_prove(s_ext[a] != d_ext[d]):
                raise self.error(op, f"the destination's extents {list(d_ext)} do not match the "
                                     f"{list(s_ext)} tile reduced over dim {axis} (axis {d} should be {s_ext[a]})")
        return kept, d_axes

    @staticmethod
    def reduce_indices(s_min: list[Any], d_min: list[Any], kept: list[int], d_axes: list[int],
                       outer: list[Any], axis: int, j: Any) -> tuple[list[Any], list[Any]]:
        """(source, destination) indices of element ``j`` of the reduced row at ``outer``."""
        s_idx, d_idx = list(s_min), list(d_min)
        for a, d, v in zip(kept, d_axes, outer):
            s_idx[a], d_idx[d] = s_min[a] + v, d_min[d] + v
        s_idx[axis] = s_min[axis] + j
        return s_idx, d_idx

    def reduce(self, src: Any, dst: Any, kind: str, axis: int, clear: bool) -> Any:
        s_buf, s_min, s_ext = self.parts(src)
        d_buf, d_min, _ = self.parts(dst)
        kept, d_axes = self._reduce_layout(f"reduce_{kind}", src, dst, axis)
        dtype = d_buf.dtype
        init = reduce_identity(kind, dtype)
        across = across_threads(self, s_buf, s_ext, kept, axis, clear, kind, d_buf)
        if across is not None:
            return reduce_across_threads(self, across, src, dst, kind, axis, kept, d_axes)

        def body(outer: list[Any]) -> Any:
            acc = self.local_scalar(dtype)
            j = self.fresh("r")
            s_idx, d_idx = self.reduce_indices(s_min, d_min, kept, d_axes, outer, axis, j)
            value = reduce_operand(kind, tirx.Cast(dtype, tirx.BufferLoad(s_buf, s_idx)))
            combined = reduce_combine(kind, tirx.BufferLoad(acc, [0]), value)
            return tirx.SeqStmt([
                tirx.AllocBuffer(acc),
                tirx.BufferStore(acc, init if clear else tirx.BufferLoad(d_buf, d_idx), [0]),
                tirx.For(j, 0, s_ext[axis], tirx.ForKind.SERIAL, tirx.BufferStore(acc, combined, [0])),
                tirx.BufferStore(d_buf, tirx.BufferLoad(acc, [0]), d_idx),
            ])

        return self.nest([s_ext[a] for a in kept], body)

    def cumsum(self, src: Any, dst: Any, axis: int, reverse: bool, kind: str = "sum") -> Any:
        """Inclusive scan along ``axis``: running sum, max or min (T.cumsum / cummax / cummin)."""
        s_buf, s_min, s_ext = self.parts(src)
        d_buf, d_min, _ = self.parts(dst)
        kept = [a for a in range(len(s_ext)) if a != axis]
        dtype = d_buf.dtype

        def body(outer: list[Any]) -> Any:
            acc = self.local_scalar(dtype)
            j = self.fresh("s")
            pos = (s_ext[axis] - 1 - j) if reverse else j
            s_idx, d_idx = list(s_min), list(d_min)
            for a, v in zip(kept, outer):
                s_idx[a], d_idx[a] = s_min[a] + v, d_min[a] + v
            s_idx[axis], d_idx[axis] = s_min[axis] + pos, d_min[axis] + pos
            step = tirx.SeqStmt([
                tirx.BufferStore(acc, reduce_combine(kind, tirx.BufferLoad(acc, [0]),
                                                     tirx.Cast(dtype, tirx.BufferLoad(s_buf, s_idx))), [0]),
                tirx.BufferStore(d_buf, tirx.BufferLoad(acc, [0]), d_idx),
            ])
            return tirx.SeqStmt([
                tirx.AllocBuffer(acc),
                tirx.BufferStore(acc, reduce_identity(kind, dtype), [0]),
                tirx.For(j, 0, s_ext[axis], tirx.ForKind.SERIAL, step),
            ])

        return self.nest([s_ext[a] for a in kept], body)

    def atomic(self, dst: Any, value: Any, kind: int, order: Any, use_tma: bool) -> Any:
        """Element ops ``tl.atomic_rmw_element(kind, dst[i], v, order)``, in a T.Parallel
        nest over the tile, for the backend to lower; out-of-range elements are skipped."""
        op = f"atomic_{ATOMIC_RMW_KINDS[kind]}"
        d_buf, d_axes = dst.source, self.tile_axes(dst)
        d_ext = [dst.region[a].extent for a in d_axes]
        tile_value = isinstance(value, tvm.ir.TensorRegion)
        if tile_value:
            s_axes = self.tile_axes(value)
            s_ext = [value.region[a].extent for a in s_axes]
            if len(d_ext) != len(s_ext) or not all(self.analyzer.can_prove_equal(a, b) for a, b in zip(d_ext, s_ext)):
                raise self.error(op, f"destination tile {d_ext} and value tile {s_ext} differ in shape")

        def body(loop_vars: list[Any]) -> Any:
            d_idx = self.indices(dst, d_axes, loop_vars)
            operand = value
            if tile_value:
                operand = tirx.BufferLoad(value.source, self.indices(value, s_axes, loop_vars))
                if str(value.source.dtype) != str(d_buf.dtype):
                    operand = tirx.Cast(d_buf.dtype, operand)
            call = tirx.call_intrin(d_buf.dtype, ATOMIC_RMW_ELEMENT, tirx.const(kind, "int32"),
                                    tirx.BufferLoad(d_buf, d_idx), operand, order)
            guard = self.in_bounds(d_buf, d_idx)
            return tirx.Evaluate(call) if guard is None else tirx.IfThenElse(guard, tirx.Evaluate(call), None)

        nest = self.nest(d_ext or [tirx.const(1, "int32")], body if d_ext else lambda _: body([]))
        if use_tma:  # the request travels with the nest (see ATOMIC_USE_TMA_ATTR)
            nest = tirx.For(nest.loop_var, nest.min, nest.extent, nest.kind, nest.body,
                            annotations={**_PARALLEL, ATOMIC_USE_TMA_ATTR: 1})
        return nest

    def transpose(self, src: Any, dst: Any) -> Any:
        """``dst[..., j, i] = src[..., i, j]`` over the source tile's axes (extent-1 axes
        stay at their offset). Reads outside ``src`` are zero, writes outside ``dst`` are
        skipped (upstream's boundary semantics, for every scope)."""
        rank = len(src.region)
        swap = list(range(rank - 2)) + [rank - 1, rank - 2]  # dst axis -> src axis
        s_axes = self.tile_axes(src)
        s_ext = [src.region[a].extent for a in s_axes]
        for d_axis, s_axis in enumerate(swap):
            want, got = src.region[s_axis].extent, dst.region[d_axis].extent
            if not self.analyzer.can_prove_equal(want, got):
                raise self.error("transpose", f"destination {[r.extent for r in dst.region]} is not the source "
                                 f"{[r.extent for r in src.region]} with its last two axes swapped")
        s_buf, d_buf = src.source, dst.source

        def bounds(buffer: Any, indices: list[Any]) -> Any:
            conds = [c for i, d in zip(indices, buffer.shape) for c in (i < d, i >= 0)
                     if not self.analyzer.can_prove(c)]
            cond = conds[0] if conds else None
            for c in conds[1:]:
                cond = tirx.And(cond, c)
            return cond

        def body(loop_vars: list[Any]) -> Any:
            offset = dict(zip(s_axes, loop_vars))
            s_idx = [r.min + offset[a] if a in offset else r.min for a, r in enumerate(src.region)]
            d_idx = [r.min + offset[swap[a]] if swap[a] in offset else r.min for a, r in enumerate(dst.region)]
            value = tirx.BufferLoad(s_buf, s_idx)
            if str(s_buf.dtype) != str(d_buf.dtype):
                value = tirx.Cast(d_buf.dtype, value)
            ok = bounds(s_buf, s_idx)
            if ok is not None:
                value = tirx.if_then_else(ok, value, tirx.const(0, d_buf.dtype))
            store = tirx.BufferStore(d_buf, value, d_idx)
            guard = bounds(d_buf, d_idx)
            return store if guard is None else tirx.IfThenElse(guard, store, None)

        return self.nest(s_ext or [tirx.const(1, "int32")], body if s_ext else lambda _: body([]))

    # -- dispatch ------------------------------------------------------------------------
    def scope_to(self, body: Any) -> None:
        """Take the conditions around each tile op from ``body`` (the function's body at
        construction; a pass that rewrote it before lowering passes its own)."""
        self.body, self._conditions, self._scalars = body, None, None

    def lower(self, stmt: Any) -> Any:
        """The tile op ``stmt`` as loops; its bounds checks know the ifs around it."""
        if self._conditions is None:
            self._conditions = enclosing_conditions(self.body)
            self._scalars = known_scalars(self.body)
        conds = next((c for op, c in self._conditions if op.same_as(stmt)), [])
        self.known = next((k for op, k in self._scalars or () if op.same_as(stmt)), [])
        with contextlib.ExitStack() as scopes:
            for cond in conds:
                scopes.enter_context(self.analyzer.constraint_scope(cond))
            return self._lower(stmt)

    def _lower(self, stmt: Any) -> Any:
        call = stmt.value
        name = _OP_NAMES.get(getattr(getattr(call, "op", None), "name", None))
        if name is None:
            return stmt
        args = list(call.args)
        if name == "copy":
            return self.copy(args[0], args[1])
        if name == "fill":
            return self.fill(args[0], args[1])
        if name == "gemm":
            return self.gemm(args[0], args[1], args[2], bool(args[3].value), bool(args[4].value),
                             bool(args[5].value))
        if name == "atomic_add":  # the tile atomic of every kind
            return self.atomic(args[0], args[1], int(args[2].value), args[3], bool(args[4].value))
        if name == "transpose":
            return self.transpose(args[0], args[1])
        if name == "annotate_layout":  # a layout request; backends that honour it ran before
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        if name == "use_swizzle":
            # the order blocks run in: a launch hint for backends that care (the CUDA
            # backend rasterizes its block indices), recorded on the function
            self.swizzle = [int(args[0].value), int(args[1].value)]
            return tirx.Evaluate(tirx.IntImm("int32", 0))
        if name == "reduce":
            kind = REDUCE_KINDS[int(args[2].value)]
            return self.reduce(args[0], args[1], kind, int(args[3].value), bool(args[4].value))
        kind = SCAN_KINDS[int(args[4].value)] if len(args) > 4 else "sum"
        return self.cumsum(args[0], args[1], int(args[2].value), bool(args[3].value), kind)


def _is_tile_op(stmt: Any) -> bool:
    return _OP_NAMES.get(getattr(getattr(stmt.value, "op", None), "name", None)) is not None


def _tile_ops_once(body: Any) -> list[Any]:
    """The tile ops that occur once in ``body`` (an op object reached twice can sit in two
    different contexts, so nothing is said of its context)."""
    ops: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.Evaluate, lambda e: ops.append(e) if _is_tile_op(e) else None))
    return [op for op in ops if sum(op.same_as(other) for other in ops) == 1]


def enclosing_conditions(body: Any) -> list[tuple[Any, list[Any]]]:
    """(tile op, the conditions of the ifs around it) for each tile op that occurs once in
    ``body`` (an op object reached twice could sit under different conditions): a copy
    inside ``if (bx < 32)`` -- T.Persistent's guard on its tile index -- addresses rows
    below 32 tiles, so its bounds check is provably true there and no guard is emitted
    (which also leaves its paired stores vectorized)."""
    found: list[tuple[Any, list[Any]]] = [(op, []) for op in _tile_ops_once(body)]

    def on_if(node: Any) -> None:
        for branch, cond in ((node.then_case, node.condition), (node.else_case, tirx.Not(node.condition))):
            if branch is None:
                continue
            inside: list[Any] = []
            tvm_ffi.structural_walk(branch, (tirx.Evaluate, inside.append))
            for op, conds in found:
                if any(op.same_as(e) for e in inside):
                    conds.append(cond)

    tvm_ffi.structural_walk(body, (tirx.IfThenElse, on_if))
    return [(op, conds) for op, conds in found if conds]


def _is_scalar(buffer: Any) -> bool:
    """A one-element local buffer: what a kernel's name assigned twice, or to a value that
    reads memory, becomes (``tilelang.language.parser_hooks``)."""
    return buffer.scope() == "local" and len(buffer.shape) == 1 and isinstance(buffer.shape[0], tirx.IntImm) \
        and int(buffer.shape[0].value) == 1


def _scalars_read(node: Any) -> tuple[list[Any], bool]:
    """(the scalar buffers ``node`` loads, whether it loads any other buffer)."""
    loads: list[Any] = []
    tvm_ffi.structural_walk(node, (TensorLoad, loads.append))
    return [ld.source for ld in loads if _is_scalar(ld.source)], any(not _is_scalar(ld.source) for ld in loads)


def known_scalars(body: Any) -> list[tuple[Any, list[tuple[Any, Any]]]]:
    """(tile op, [(scalar, value)]) for each tile op that occurs once in ``body``: the
    scalars stored earlier in the op's own statement list, with values that read no other
    memory, where nothing between the store and the op stores to the scalar or to one its
    value reads. They hold those values at the op (the same pass through the list). In
    upstream's MLA decode ``kv_start = ... * sid + k * 64`` and ``kv_end = ... * sid + (k +
    1) * 64`` are such scalars (``sid`` is one), and ``KV[b, kv_start:kv_end]`` is 64 rows."""
    once = _tile_ops_once(body)
    found: list[tuple[Any, list[tuple[Any, Any]]]] = []

    def on_seq(seq: Any) -> None:
        known: list[tuple[Any, Any, list[Any]]] = []  # (scalar, value, the scalars the value reads)

        def forget(buffers: list[Any]) -> None:
            known[:] = [k for k in known if not any(k[0].same_as(b) or any(r.same_as(b) for r in k[2])
                                                     for b in buffers)]

        for stmt in seq.seq:
            if isinstance(stmt, tirx.BufferStore) and _is_scalar(stmt.buffer):
                forget([stmt.buffer])
                reads, other = _scalars_read(stmt.value)
                if not other and not any(r.same_as(stmt.buffer) for r in reads):
                    known.append((stmt.buffer, stmt.value, reads))
                continue
            if known and any(stmt.same_as(op) for op in once):
                found.append((stmt, [(buffer, value) for buffer, value, _ in known]))
            forget(_written(stmt))

    tvm_ffi.structural_walk(body, (tirx.SeqStmt, on_seq))
    return found


def _written(stmt: Any) -> list[Any]:
    """The buffers ``stmt`` may write: those it stores to, and every tile op's operand."""
    buffers: list[Any] = []
    tvm_ffi.structural_walk(stmt, (tirx.BufferStore, lambda st: buffers.append(st.buffer)))
    tvm_ffi.structural_walk(stmt, (TensorRegion, lambda r: buffers.append(r.source)))
    return buffers


def _read_scalars(expr: Any, known: list[tuple[Any, Any]]) -> Any:
    if not known:
        return expr

    def on_load(load: Any) -> Any:
        return next((value for buffer, value in known if buffer.same_as(load.source)), load)

    return tvm_ffi.structural_map(expr, (TensorLoad, on_load), order="post")


def _run(func: Any, cross_thread: bool) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    lowering = TileOpLowering(func, kernel, cross_thread)
    errors: list[LanguageError] = []

    def on_evaluate(stmt: Any) -> Any:
        try:
            return stamp_span(lowering.lower(stmt), stmt.span)  # its loops are the tile op's line
        except LanguageError as err:  # raised after the walk: FFI callbacks lose the type
            errors.append(LanguageError(str(err) + source_location(stmt.span)))
            return stmt

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post")
    if errors:
        raise errors[0]
    func = func.with_body(body)
    if lowering.swizzle is not None:
        func = func.with_attr(BLOCK_SWIZZLE_ATTR, lowering.swizzle)
    return with_compiler_shared(func, lowering.compiler_shared)


def LowerTileOps(cross_thread: bool = False) -> Any:
    """``cross_thread``: long rows are reduced by the whole block through TVM's thread
    all-reduce (a GPU pipeline that runs LowerThreadAllreduce asks for it)."""
    return prim_func_pass(lambda func, mod, ctx: _run(func, cross_thread), "tl.LowerTileOps")

"""LowerTensorCoreGemm: ``T.gemm`` on tensor cores and ``T.Pipelined`` copies as cp.async
stage rings (sm_80 and newer). Runs before the shared LowerTileOps, which lowers
whatever this pass leaves (SIMT GEMM, other dtypes, shapes that do not fit).

A GEMM qualifies when A and B are whole shared tiles of float16/bfloat16 and C is a whole
float32 fragment (M, N multiples of 16 per warp, K a multiple of 16). Then:

* **C's layout** is the mma.sync m16n8k16 accumulator layout: the block's warps split C
  into a warps_m x warps_n grid of warp tiles; in each 16x8 piece, lane l holds rows
  l/4 and l/4 + 8, columns 2(l%4) and 2(l%4)+1 (PTX ISA, "Matrix Fragments for
  mma.m16n8k16"). Every other use of C — T.clear/T.fill, T.copy in or out, T.Parallel
  nests that touch C at the nest's own indices — is rewritten to walk the thread's own
  elements, so C never leaves registers (T.atomic_add of C into a global tile too). A C
  with any other use (a reduction reads across the layout) keeps the SIMT path, unless
  the kernel is a *row family* (row_families.py: flash-attention's row reductions and
  fragment A operands, in one warps-over-rows layout).
* **The product** loads A and B fragments with ldmatrix (``.trans`` where the tile is
  stored the other way round) and issues one mma per 16x8 piece and 16-deep k step.
* **On sm_90** (wgmma.py) the GEMMs of pipelined tiles, and row families whose
  warps hold 16 rows each, use wgmma instead: C in wgmma's accumulator layout, A and B
  read through shared-memory descriptors from tiles in wgmma's swizzled (or plain
  core-matrix) layouts (mma_layout.py), a fragment A from registers.
* **Shared tiles** get a padded row stride (one 16-byte chunk when the row's chunk count
  is even), which makes the eight row addresses of every ldmatrix fall in distinct banks;
  so do tiles a kernel asks for with T.annotate_layout(make_swizzled_layout(...)).
* **T.Pipelined** loops that feed these GEMMs become cp.async stage rings (cp_async.py).
* **Occupancy** (occupancy.py): the launch bounds promise the most blocks per SM that shared
  memory and the estimated registers allow.
* **Warp roles** (``T.ws``; ifs: explicit_sync.branch_role_threads) spread C over their own
  warps. Slices of shared tiles, and tiles kept as declared: operands.py.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.errors import CompileError
from tilelang.plugin import (
    ALIGNMENT_ATTR,
    FRAGMENT_SCOPE,
    TILE_OPS,
    TileOpLowering,
    block_barrier,
    buffer_accesses,
    dtype_bytes,
    extern_call,
    is_full_region,
    keeps_span,
    matrix_extents,
    parallel_nest,
    prim_func_pass,
    seq,
    static_ints,
    substitute,
    tile_op_name,
    tl_op_names_in,
    unrolled,
)
from tvm import tirx
from tvm.ir import TensorLoad
from tvm_ffi.structural import WalkResult

from ..target import arch_number, kernel_arch
from .accumulators import (
    MIN_ARCH,
    MMA_INTRINSICS,
    MMA_K_MAJOR_INTRINSICS,
    AccumulatorLayouts,
)
from .cp_async import SHARED_SCOPES, AsyncCopyPipelines, SharedTile
from .epilogue import epilogue_tiles, others_keep_swizzle_alignment
from .explicit_sync import branch_role_threads, role_threads
from .in_place_swizzle import InPlaceSwizzle
from .mma_layout import (
    CHUNK_BYTES,
    WARP,
    Accumulator,
    padded_row,
)
from .occupancy import OccupancyPlan
from .operands import addressed_buffers, addresser, element_reader
from .partial_copies import copied_part, over_whole_fragment
from .role_tiles import RoleTiles
from .row_families import RowFamilies, with_shared_operands
from .shared_memory import MAX_SHARED_PER_BLOCK, buffer_bytes
from .shifted_nests import is_own, nest_shift, over_own_indices
from .tma_copy import PADDED_TILES_ATTR
from .wgmma import WgmmaGemms

_OPS = {op: name for name, op in TILE_OPS.items()}


class _Kernel(AccumulatorLayouts, AsyncCopyPipelines, RowFamilies, WgmmaGemms, RoleTiles, InPlaceSwizzle,
              OccupancyPlan):
    def __init__(self, func: Any, kernel: str, tid: Any, threads: int, arch: str = "",
                 tensor_maps: bool = False) -> None:
        self.func, self.kernel, self.tid, self.threads, self.arch = func, kernel, tid, threads, arch
        self.block_threads = threads  # the launch's (occupancy); threads: those a GEMM's C spreads over
        self.tensor_maps = tensor_maps  # host code can encode TMA tensor maps (tma.py)
        self.host_prologue: list[Any] = []  # host statements before the launch (the tensor maps)
        self.block_prologue: list[Any] = []  # statements at the top of the block (TMA barriers)
        self.hoisted: list[tuple[Any, Any]] = []  # (anchor, producer) of carried TMA rings (cp_async.py)
        self.tile_copies: list[list[Any]] = []  # [copy, ring, replaced] the ring's producer loads (cp_async.py)
        self.block_vars = _block_vars(func)
        self.smem_per_block = 0  # the occupancy plan's estimate (0: unknown)
        self.lane = tirx.floormod(tid, WARP)
        self.warp = tirx.floordiv(tid, WARP)
        self.accumulators: dict[Any, Accumulator] = {}
        self.rows: dict[Any, Any] = {}  # row vectors of a row family (row_families.py)
        self.outside_family = False  # accumulators beside the family, in layouts of their own
        self.tiles: dict[Any, SharedTile] = {}
        self.pipelined: dict[Any, int] = {}  # loop -> stages
        self.lowering = TileOpLowering(func, kernel)
        self.analyzer = self.lowering.analyzer  # knows every block, thread and loop range
        self.needs_alignment = False
        self.counter = 0
        self.min_blocks: int | None = None  # blocks per SM the launch bounds promise
        self.double_buffer = True
        self.wgmma = False  # GEMMs on wgmma (sm_90), operands in core-matrix tiles
        self.wgmma_pending = 0  # wgmma groups a GEMM leaves in flight (into the next iteration)
        self.roles = False  # the GEMMs run in the user's warp roles (T.ws or thread-range ifs)
        self.branch_roles = False  # ... written as thread-range ifs
        self.role_maps: list[tuple[Any, Any, Any]] = []  # (global, tile, TensorMapLoad): role_tiles.py
        self.register_groups: list[list[Any]] = []  # accumulators sharing one register array
        self.allocated: list[Any] = []  # register arrays allocated so far (rewrite)
        self.in_place_views: list[tuple[Any, Any]] | None = None  # (view, tile): in_place_swizzle.py
        self.gemms: list[Any] = []  # the args of every tensor-core T.gemm
        self.shared_operands: list[Any] = []  # fragments a row family would read from shared memory
        self.row_exchanges: dict[str, Any] = {}  # dtype -> a split row family's exchange tile
        self.checked_copies: list[tuple[Any, list[Any]]] = []  # (tile, run-time conditions): cp_async.py

    def var(self, name: str) -> Any:
        self.counter += 1
        return tirx.Var(f"{name}_{self.counter}", "int32")

    def _find(self, buffer: Any, table: dict[Any, Any]) -> Any:
        for key, value in table.items():
            if key.same_as(buffer):
                return value
        return None

    # -- analysis ------------------------------------------------------------------------
    def analyze(self) -> None:
        ops: list[tuple[str, Any]] = []
        nests: list[tuple[list[Any], Any]] = []
        fragments: list[Any] = []

        def visit(node: Any) -> Any:
            if isinstance(node, tirx.For) and node.kind == tirx.ForKind.PARALLEL:
                nests.append(parallel_nest(node))
                return WalkResult.SKIP
            name = tile_op_name(node)
            if name is not None:
                ops.append((name, node.value.args))
            if isinstance(node, tirx.AllocBuffer) and node.buffer.scope() == FRAGMENT_SCOPE:
                fragments.append(node.buffer)
            return WalkResult.ADVANCE

        tvm_ffi.structural_walk(self.func.body, visit, order="pre")
        for fragment, layout in self._accumulator_layouts(fragments, ops, nests).items():
            self.accumulators[fragment] = Accumulator(fragment, layout)
        if any(self._find(args[2].source, self.accumulators) is None for name, args in ops if name == "gemm"):
            self._plan_row_families(ops, nests, fragments, MMA_INTRINSICS)  # all or nothing
        addressed = addressed_buffers(self.func.body)
        for name, args in ops:
            if name == "annotate_layout" and args[0].source.scope() in SHARED_SCOPES and \
                    static_ints(args[0].source.shape) is not None and self._find(args[0].source, self.tiles) is None:
                self.tiles[args[0].source] = SharedTile(args[0].source)  # T.annotate_layout: padded rows
            if name == "gemm" and self._find(args[2].source, self.accumulators) is not None:
                self.gemms.append(args)
                for region in [r for r in args[:2] if r.source.scope() in SHARED_SCOPES]:
                    if self._find(region.source, self.tiles) is None:
                        self.tiles[region.source] = SharedTile(region.source)
                    tile = self._find(region.source, self.tiles)
                    tile.mma_operand = True
                    tile.raw = tile.raw or not is_full_region(region)
        self._pad_epilogue_tiles(ops)
        for tile in self.tiles.values():
            tile.raw = tile.raw or len(tile.old.shape) != 2 or any(tile.old.same_as(b) for b in addressed)
        self._find_pipelines()
        self._choose_wgmma()
        self._drop_padding_that_does_not_fit()
        for tile in self.tiles.values():  # ldmatrix without bank conflicts in tiles kept as declared
            tile.in_place = tile.raw and tile.mma_operand and not self.wgmma and self.can_swizzle_in_place(tile)
        for tile in self.tiles.values():
            old = tile.old
            if tile.raw:
                tile.new = old
                continue
            rows, cols = (int(d.value) for d in old.shape)
            shape = [tile.core.size] if tile.core else [rows, padded_row(cols, dtype_bytes(old.dtype))]
            if tile.stages:
                shape = [tile.stages, *shape]
            # staged tiles outgrow the 48 KiB of static shared memory: dynamic, opted in;
            # so do wgmma operand tiles (the swizzle's alignment holds in the dynamic buffer)
            scope = "shared.dyn" if tile.stages or tile.core else old.scope()
            tile.new = tirx.decl_buffer(shape, old.dtype, name=old.name, scope=scope)
        self.register_groups = self.accumulator_groups() if self.roles else \
            [[acc] for acc in self.accumulators.values()]
        if self.accumulators:
            self._plan_occupancy()

    def _drop_padding_that_does_not_fit(self) -> None:
        """Tiles that would only be padded keep their declared rows when the padding would
        take the block over the arch's shared memory (FlashMLA's tiles fill 227 KiB to
        the last 512 bytes): ldmatrix then meets bank conflicts, but the kernel fits."""
        limit = MAX_SHARED_PER_BLOCK.get(self.arch.removesuffix("a"))
        padded = [t for t in self.tiles.values() if not (t.raw or t.stages or t.core)]
        if limit is None or not padded or self.pipelined:
            return
        extra = 0
        for tile in padded:
            rows, cols = (int(d.value) for d in tile.old.shape)
            extra += rows * (padded_row(cols, dtype_bytes(tile.old.dtype)) - cols) * dtype_bytes(tile.old.dtype)
        if extra and sum(buffer_bytes(b) for b in self._shared_allocations()) + extra > limit:
            for tile in padded:
                tile.raw = True

    def _pad_epilogue_tiles(self, ops: list[tuple[str, Any]]) -> None:
        for buffer in epilogue_tiles(self.func.body, ops, lambda b: self._find(b, self.accumulators) is not None):
            if self._find(buffer, self.tiles) is None:
                self.tiles[buffer] = SharedTile(buffer)

    # -- rewriting -----------------------------------------------------------------------
    def rewrite(self) -> Any:
        for group in self.register_groups:  # accumulators of disjoint roles share one array (role_tiles.py)
            regs = tirx.decl_buffer((max(a.layout.per_thread for a in group),), group[0].old.dtype,
                                    name=group[0].old.name, scope="local")
            for acc in group:
                acc.regs = regs
        for row in self.rows.values():
            row.regs = tirx.decl_buffer((row.per_thread,), row.old.dtype, name=row.old.name, scope="local")
        body = self._hoist_producers(tvm_ffi.structural_map(self.func.body, (tirx.For, keeps_span(self._on_pipelined)),
                                                            order="pre"))
        if self.wgmma:
            body = self.fold_clears_into_gemms(body)
        self.lowering.scope_to(body)  # the ifs around each tile op, in the body it now lowers
        body = tvm_ffi.structural_map(body, (tirx.Evaluate, keeps_span(self._on_op)), order="post")
        if not all(replaced for _, _, replaced in self.tile_copies):
            raise CompileError(f"kernel {self.kernel!r}: a tile copy that the TMA producer issues was lost "
                               "(set the pass config tl.disable_warp_specialized to avoid it)")
        body = tvm_ffi.structural_map(body, (tirx.For, keeps_span(self._on_nest)), order="pre")
        body = tvm_ffi.structural_map(body, [(tirx.BufferStore, keeps_span(self._on_store)), (TensorLoad, self._on_load),
                                             (tvm.ir.TensorRegion, self._on_region)], order="post")
        body = tvm_ffi.structural_map(body, (tirx.AllocBuffer, self._on_alloc), order="post")
        body = self._launch_bounds(self._at_block_top(body))
        func = self.func.with_body(seq([*self.host_prologue, body]))
        padded = sorted(t.old.name for t in self.tiles.values() if not (t.raw or t.core) and
                        int(t.new.shape[-1]) != int(t.old.shape[-1]))
        if padded:  # T.tma_copy writes such a tile's rows whole, padding included (tma_copy.py)
            func = func.with_attr(PADDED_TILES_ATTR, padded)
        if self.needs_alignment or self.role_maps:  # TMA reads 16-byte aligned tensors
            current = func.attrs.get(ALIGNMENT_ATTR) if func.attrs else None
            func = func.with_attr(ALIGNMENT_ATTR, max(CHUNK_BYTES, int(current or 0)))
        return func

    def _shared_allocations(self) -> list[Any]:
        found: list[Any] = []
        tvm_ffi.structural_walk(self.func.body, (tirx.AllocBuffer, lambda a: found.append(a.buffer)
                                                 if a.buffer.scope() in SHARED_SCOPES else None))
        return found

    def _others_keep_swizzle_alignment(self, operands: list[SharedTile]) -> bool:
        """See epilogue.others_keep_swizzle_alignment (the epilogue tiles are padded)."""
        padded = [t.old for t in self.tiles.values() if not t.mma_operand]
        return others_keep_swizzle_alignment(self._shared_allocations(), [t.old for t in operands], padded)

    def _shared_buffers(self) -> list[Any]:
        return [(self._find(b, self.tiles).new if self._find(b, self.tiles) is not None else b)
                for b in self._shared_allocations()]

    def _at_block_top(self, body: Any) -> Any:
        """``block_prologue`` first thing inside the threadIdx.x binding."""
        if not self.block_prologue:
            return body

        def on_attr(stmt: Any) -> Any:
            if stmt.attr_key == "thread_extent" and stmt.node.thread_tag == "threadIdx.x":
                return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, seq([*self.block_prologue, stmt.body]))
            return stmt

        return tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr), order="pre")

    def _on_alloc(self, node: Any) -> Any:
        acc = self._find(node.buffer, self.accumulators) or self._find(node.buffer, self.rows)
        if acc is not None:
            if any(a.same_as(acc.regs) for a in self.allocated):
                return tirx.Evaluate(0)  # a group's array: allocated with its first accumulator
            self.allocated.append(acc.regs)
            return tirx.AllocBuffer(acc.regs)
        tile = self._find(node.buffer, self.tiles)
        return tirx.AllocBuffer(tile.new) if tile is not None else node

    # plain accesses of re-laid-out shared tiles: same logical indices (+ the stage)
    def _on_store(self, store: Any) -> Any:
        tile = self._find(store.buffer, self.tiles)
        if tile is None:
            view = self.tile_of_view(store.buffer)  # a flat view of a tile swizzled in place
            if view is None:
                return store
            return tirx.BufferStore(store.buffer, store.value, [self.in_place_view_index(view, store.indices[-1])])
        if tile.raw:
            if not tile.in_place:
                return store
            return tirx.BufferStore(tile.old, store.value, self.in_place_indices(tile, list(store.indices)))
        return tirx.BufferStore(tile.new, store.value, tile.indices(*store.indices))

    def _on_load(self, load: Any) -> Any:
        if not isinstance(load.source, tirx.Buffer):
            return load
        tile = self._find(load.source, self.tiles)
        if tile is None:
            view = self.tile_of_view(load.source)
            if view is None:
                return load
            return tirx.BufferLoad(load.source, [self.in_place_view_index(view, load.indices[-1])])
        if tile.raw:
            if not tile.in_place:
                return load
            return tirx.BufferLoad(tile.old, self.in_place_indices(tile, list(load.indices)))
        return tirx.BufferLoad(tile.new, tile.indices(*load.indices))

    def _on_region(self, region: Any) -> Any:
        tile = self._find(region.source, self.tiles)
        if tile is None:
            return region
        return tirx.BufferRegion(tile.new, list(region.region))  # staged tiles never reach here

    def _on_op(self, stmt: Any) -> Any:
        name = tile_op_name(stmt)
        if name is None:
            return self.lower_tma_copy(stmt) if self.wgmma and self.roles else self.mark_in_place_tma(stmt)
        args = stmt.value.args
        if name == "gemm":
            acc = self._find(args[2].source, self.accumulators)
            if acc is None:
                return stmt
            return self._mma(acc, args)
        if name == "reduce" and self._find(args[1].source, self.rows) is not None:
            return self._reduce_rows(args)
        regions = [a for a in args if isinstance(a, tvm.ir.TensorRegion)]
        tile = self._find(args[1].source, self.tiles) if name == "copy" else None
        if tile is not None and tile.core is not None and not tile.stages:
            wait = self._tile_wait(stmt)
            if wait is not None:  # a carried TMA ring's producer loads it
                return wait
            # into a wgmma tile's layout (its stores are mapped below); wgmma reads
            # through the async proxy, so each thread makes its writes visible to it
            return seq([self.lowering.lower(stmt), extern_call("tl_fence_proxy_async")])
        part = next((r for r in regions if self._find(r.source, self.accumulators) is not None), None)
        acc = self._find(part.source, self.accumulators) if part is not None else None
        rows = any(self._find(r.source, self.rows) is not None for r in regions)
        if acc is None and not rows:
            in_place = [self._find(r.source, self.tiles) for r in regions]
            if name == "copy" and any(t is not None and t.in_place for t in in_place):
                return self.lowering.lower(stmt)  # each element to its swizzled place (_on_store, _on_load)
            return stmt
        loops, inner = parallel_nest(self.lowering.lower(stmt))
        box = copied_part(args, part) if name == "copy" and part is not None else None
        if box is not None:  # part of C: a nest over all of C, guarded to the part
            loops, inner = parallel_nest(over_whole_fragment(loops, inner, box, static_ints(part.source.shape)))
        return self._remap(loops, inner, acc) if acc is not None else self._remap_rows(loops, inner)

    def _on_nest(self, loop: Any) -> Any:
        if loop.kind != tirx.ForKind.PARALLEL:
            return loop
        loops, inner = parallel_nest(loop)
        touched = [buffer for buffer, _, _ in buffer_accesses(inner)]
        for buffer in touched:
            acc = self._find(buffer, self.accumulators)
            if acc is not None:
                group = [a.old for a in self.accumulators.values() if a.layout == acc.layout]
                shift = nest_shift(loops, inner, group, self.analyzer)
                shape = [acc.layout.m, acc.layout.n]
                if shift is not None and not is_own(loops, shift, shape, self.analyzer):
                    loops, inner = over_own_indices(loops, inner, shift, shape)  # acc[i + s * 16, j]
                return self._remap(loops, inner, acc)
        if any(self._find(b, self.rows) is not None for b in touched):
            return self._remap_rows(loops, inner)
        return loop

    def _remap(self, loops: list[Any], inner: Any, acc: Accumulator) -> Any:
        """A nest over C's shape, at C's own indices -> the thread's own elements (of C
        and of every fragment in C's layout; row vectors at the element's row)."""
        layout = acc.layout
        mi, ni, h, v = (self.var(n) for n in ("mi", "ni", "h", "v"))
        warp_m, warp_n = layout.warp_coords(self.warp)
        row, col = layout.c_position(self.lane, warp_m, warp_n, mi, ni, h, v)
        index = layout.c_register(mi, ni, h, v)

        def ours(buffer: Any) -> Accumulator | None:
            found = self._find(buffer, self.accumulators)
            return found if found is not None and found.layout == layout else None

        def on_store(store: Any) -> Any:
            found = ours(store.buffer)
            return store if found is None else tirx.BufferStore(found.regs, store.value, [index])

        def on_load(load: Any) -> Any:
            found = ours(load.source) if isinstance(load.source, tirx.Buffer) else None
            return load if found is None else tirx.BufferLoad(found.regs, [index])

        body = tvm_ffi.structural_map(inner, [(tirx.BufferStore, on_store), (TensorLoad, on_load)], order="post")
        if self.rows:
            body = self._map_rows(body, mi, h)
        body = substitute(body, [(loops[0].loop_var, row), (loops[1].loop_var, col)])
        # a lane's two neighbouring columns: one paired access where nothing is guarded
        guarded = []
        tvm_ffi.structural_walk(body, [(tirx.IfThenElse, guarded.append), (tirx.For, guarded.append)])
        body = unrolled(v, 2, body, tirx.ForKind.UNROLLED if guarded else tirx.ForKind.VECTORIZED)
        body = unrolled(h, 2, body)
        body = unrolled(ni, layout.nt, body)
        return unrolled(mi, layout.mt, body)

    def _mma(self, acc: Accumulator, args: Any, after_first_load: Any = None) -> Any:
        """C += A @ B: per 16-deep k step, ldmatrix the warp's A and B fragments, then one
        mma per 16x8 piece of the warp tile. ``after_first_load`` goes right after the
        first fragments are requested (a pipeline's next copies: issued behind them, they
        do not delay the first mma)."""
        if self.wgmma:
            return self._wgmma(acc, args, after_first_load)
        a, b = self.tiles_of(args)
        a_at, b_at = addresser(a, args[0]), addresser(b, args[1])
        # A may be a fragment in the row-family layout: its registers are the A fragments
        a_regs = self._find(args[0].source, self.accumulators)
        trans_a, trans_b = bool(args[3].value), bool(args[4].value)
        layout = acc.layout
        k_total = matrix_extents(args[0])[0 if trans_a else 1]
        lane = self.lane
        warp_m, warp_n = layout.warp_coords(self.warp)
        dtype = str(args[0].source.dtype)
        depth = self.k_depth(dtype, trans_a, trans_b)
        ksteps = k_total // depth
        elem_bytes = 32 // depth  # (ldmatrix moves 16-bit cells: two bytes, one half, or half a word each)
        buffers = 2 if ksteps > 1 and self.double_buffer else 1  # fragments of step kk + 1 load while kk computes
        a_frag = tirx.decl_buffer((buffers * layout.mt * 4 if a_regs is None else 1,), "uint32", name="A_frag",
                                  scope="local")
        b_frag = tirx.decl_buffer((buffers * layout.nt * 2,), "uint32", name="B_frag", scope="local")
        intrinsic = MMA_INTRINSICS[dtype] if dtype in MMA_INTRINSICS else MMA_K_MAJOR_INTRINSICS[dtype][0]

        # 32-bit operands stored MN-major (A as [k][m], B as [k][n]): ldmatrix cannot
        # transpose words, so each thread reads its fragment's elements (m16n8k8: A register
        # j is row g + 8 (j % 2), k t + 4 (j // 2); B register j is k t + 4 j, column g)
        a_words = elem_bytes == 4 and trans_a and a_regs is None
        b_words = elem_bytes == 4 and not trans_b
        a_read, b_read = element_reader(a, args[0]), element_reader(b, args[1])
        g, t = lane // 4, lane % 4

        def word(value: Any) -> Any:
            return tirx.reinterpret("uint32", value)

        def load(kk: int, buf: int) -> Any:
            mi, nj, ja, jb = self.var("mi"), self.var("nj"), self.var("ja"), self.var("jb")
            if b_words:
                k, n = kk * 8 + t + 4 * jb, warp_n * layout.wn + nj * 8 + g
                b_loads = unrolled(nj, layout.nt, unrolled(jb, 2, tirx.BufferStore(
                    b_frag, word(b_read(k, n)), [buf * layout.nt * 2 + nj * 2 + jb])))
            else:
                b_addr = b_at(*layout.b_address(lane, warp_n, nj, kk, trans_b, elem_bytes))
                b_load = "tl_ldmatrix_x4" if trans_b else "tl_ldmatrix_x4_trans"
                b_dst = tirx.address_of(tirx.BufferLoad(b_frag, [buf * layout.nt * 2 + nj * 4]))
                b_loads = unrolled(nj, layout.nt // 2, extern_call(b_load, b_dst, b_addr))
            if a_regs is not None:
                return b_loads
            if a_words:
                k, m = kk * 8 + t + 4 * (ja // 2), warp_m * layout.wm + mi * 16 + g + 8 * (ja % 2)
                a_loads = unrolled(mi, layout.mt, unrolled(ja, 4, tirx.BufferStore(
                    a_frag, word(a_read(k, m)), [buf * layout.mt * 4 + mi * 4 + ja])))
                return seq([a_loads, b_loads])
            a_addr = a_at(*layout.a_address(lane, warp_m, mi, kk, trans_a, elem_bytes))
            a_load = "tl_ldmatrix_x4_trans" if trans_a else "tl_ldmatrix_x4"
            a_dst = tirx.address_of(tirx.BufferLoad(a_frag, [buf * layout.mt * 4 + mi * 4]))
            return seq([unrolled(mi, layout.mt, extern_call(a_load, a_dst, a_addr)), b_loads])

        def compute(buf: int, kk: int) -> Any:
            mi, ni = self.var("mi"), self.var("ni")
            if a_regs is None:
                a_operand = tirx.BufferLoad(a_frag, [buf * layout.mt * 4 + mi * 4])
            else:  # pieces 2 kk and 2 kk + 1 of the 16 rows: 8 halves = the 4 A registers
                a_operand = tirx.BufferLoad(a_regs.regs, [(mi * a_regs.layout.nt + 2 * kk) * 4])
            mma = extern_call(intrinsic, tirx.address_of(tirx.BufferLoad(acc.regs, [(mi * layout.nt + ni) * 4])),
                              tirx.address_of(a_operand),
                              tirx.address_of(tirx.BufferLoad(b_frag, [buf * layout.nt * 2 + ni * 2])))
            return unrolled(mi, layout.mt, unrolled(ni, layout.nt, mma))

        steps = [load(0, 0), after_first_load]
        for kk in range(ksteps):
            if kk + 1 < ksteps and buffers == 2:
                steps.append(load(kk + 1, (kk + 1) % 2))  # lands in the buffer not in use
            steps.append(compute(kk % buffers, kk))
            if kk + 1 < ksteps and buffers == 1:
                steps.append(load(kk + 1, 0))  # one buffer: only once its fragments are used
        compute_all = seq([tirx.AllocBuffer(a_frag), tirx.AllocBuffer(b_frag), *steps])
        compute = compute_all
        if bool(args[5].value):  # clear_accum
            compute = seq([self._fill_regs(acc), compute])
        if (a is not None and a.stages) or b.stages:
            return compute  # the pipelined loop's barrier orders it
        # ldmatrix reads through addresses ThreadSync does not follow: fence both sides
        return seq([block_barrier(), compute, block_barrier()])

    def _fill_regs(self, acc: Accumulator) -> Any:
        i = self.var("i")
        return unrolled(i, acc.layout.per_thread, tirx.BufferStore(acc.regs, tirx.const(0, str(acc.regs.dtype)), [i]))

    def tiles_of(self, args: Any) -> tuple[SharedTile, SharedTile]:
        return self._find(args[0].source, self.tiles), self._find(args[1].source, self.tiles)


def _thread_binding(func: Any) -> tuple[Any, int] | None:
    """(threadIdx.x var, threads) when the kernel uses threadIdx.x alone, as a constant."""
    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: found.append(a)
                                        if a.attr_key == "thread_extent" and
                                        a.node.thread_tag.startswith("threadIdx") else None))
    if len(found) != 1 or found[0].node.thread_tag != "threadIdx.x" or not isinstance(found[0].value, tirx.IntImm):
        return None
    threads = int(found[0].value.value)
    return (found[0].node.var, threads) if threads % WARP == 0 else None


def _block_vars(func: Any) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: found.append(a.node.var)
                                        if a.attr_key == "thread_extent" and
                                        a.node.thread_tag.startswith("blockIdx") else None))
    return found


def _analyzed(func: Any, tensor_maps: bool) -> _Kernel | None:
    """The kernel's analysis (what LowerTensorCoreGemm would do, nothing rewritten yet), or
    None where it has no T.gemm and no T.annotate_layout. A row family split over columns
    that wants fragment A operands copied from shared tiles gets them as shared tiles
    (row_families.with_shared_operands), analyzed again."""
    work = _prepared(func, tensor_maps)
    if work is not None and work.shared_operands:
        work = _prepared(with_shared_operands(func, work.shared_operands), tensor_maps)
    return work


def _prepared(func: Any, tensor_maps: bool) -> _Kernel | None:
    binding = _thread_binding(func)
    if binding is None or not {"gemm", "annotate_layout"} & {_OPS.get(n) for n in tl_op_names_in(func.body)}:
        return None
    arch = kernel_arch(func)
    if 0 < arch_number(arch) < MIN_ARCH:
        return None  # (m16n8k16, k32 and cp.async are sm_80's: older GPUs keep the SIMT lowering)
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    work = _Kernel(func, kernel, *binding, arch=arch, tensor_maps=tensor_maps)
    role = role_threads(func)
    if not role:
        role = branch_role_threads(func.body, *binding)
        if role == 0:
            return None  # C would spread over warps that never run its GEMM: the shared SIMT lowering
        work.branch_roles = bool(role)
    work.roles = bool(role)
    if role:  # every T.gemm inside warp roles of `role` threads: C spreads over the role's warps
        work.threads, work.warp = role, tirx.floormod(work.warp, role // WARP)
    work.analyze()
    return work


def planned_blocks_per_sm(func: Any, tensor_maps: bool = False) -> int | None:
    """The blocks per SM that this pass's occupancy plan will promise in ``func``'s launch
    bounds (``__launch_bounds__(threads, n)``: ptxas then keeps every thread within
    65536 / (n x threads) registers), or None where it promises none and ptxas chooses the
    count alone."""
    work = _analyzed(func, tensor_maps)
    return None if work is None else work.min_blocks


def _run(func: Any, tensor_maps: bool) -> Any:
    work = _analyzed(func, tensor_maps)
    if work is None or (not work.accumulators and not work.tiles):
        return func
    return work.rewrite()


def LowerTensorCoreGemm(tensor_maps: bool = False) -> Any:
    """``tensor_maps``: the kernel's host code runs before its launch and can encode TMA
    tensor maps (tma.py); without it, pipelines stay on cp.async."""
    return prim_func_pass(lambda func, mod, ctx: _run(func, tensor_maps), "tl.cuda.LowerTensorCoreGemm",
                          per_kernel=True)

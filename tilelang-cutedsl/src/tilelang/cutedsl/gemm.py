"""LowerCuteGemm: ``T.gemm`` on CuTe MMA atoms (warp-level ``mma.sync`` m16n8k16 through
``cute.make_tiled_mma``; on sm_90 warpgroup MMA for the GEMMs of a stage ring, see
_choose_wgmma), before the shared LowerTileOps, which lowers whatever this pass leaves (the
SIMT GEMM: other dtypes, shapes that do not fit the atoms, accumulators with other uses).

A GEMM qualifies when A and B are whole shared tiles of float16/bfloat16, C a whole float32
fragment, K a multiple of 16 and M, N multiples of the warp grid's 16-row/16-column steps.
C may only be cleared/filled, multiplied into, updated by T.Parallel nests at their own
indices (epilogue.py) and copied whole to a global or shared tile: then C
lives as the tiled MMA's accumulator fragment (``make_fragment_C``), in a register layout
no other TileLang lowering knows. The rewritten ops are ``call_extern`` statements that the
printer expands into CuTe code (cute_emit.py), with the buffers as loads at their origin:

* ``tl_cute_gemm(A[0], B[0], C[0], M, N, K, trans_a, trans_b)``: ldmatrix tiled copies from
  shared memory into the A/B fragments (``make_tiled_copy_A/B``) and ``cute.gemm`` per
  16-deep k block;
* ``tl_cute_store_acc(C[0], D[r0, c0], r0, c0, M, N, rows, cols)``: the accumulator to a
  global tile, elements outside the tensor not written; ``tl_cute_store_acc_shared(C[0],
  S[0])`` to a whole shared tile of C's shape (its offsets as every other access sees them),
  between barriers;
* ``tl_cute_g2s(S[0], G[r0, c0], rows, cols, ld)``: a whole global tile into an operand
  tile by a 16-byte ``cp.async`` tiled copy, when the tensor holds every tile whole and
  16-byte aligned rows (else T.copy keeps its lowering); the pass puts a barrier before a
  run of such copies and ``cp.async`` wait + barrier after it.

Operand tiles keep their row-major offsets (every other lowering may still read or write
them) and are stored swizzled (``Swizzle<B, 3, S>`` over the offset, rows of 8 units of 16
bytes XORed by the row), so that the eight row addresses of each ldmatrix fall in distinct
banks.
"""

from __future__ import annotations

import json
from typing import Any

from tilelang.plugin import (
    ALIGNMENT_ATTR,
    FRAGMENT_SCOPE,
    block_barrier,
    extern_call,
    gemm_mnk,
    is_full_region,
    pass_config,
    prim_func_pass,
    static_ints,
    tile_op_name,
)

from .epilogue import own_index_nests, rewrite_nests
from .staged import Staging
from .stages import STAGES_ATTR, extern_name, extern_only, pipeline, ring_loop
from .tma_ring import tma_ring

#: PrimFunc/module attribute: accumulator buffer name -> its tiled MMA (dtype, warps, tile)
MMA_ATTR = "tilelang.cutedsl.mma"
OPERAND_DTYPES = ("float16", "bfloat16")
SHARED_SCOPES = ("shared", "shared.dyn")
WARP = 32
ATOM_M, ATOM_N, ATOM_K = 16, 16, 16  # m16n8k16, two atoms along N (one ldmatrix.x4 of B)
COPY_BYTES = 16  # one cp.async
WARPGROUP = 128
WGMMA_ARCHS = ("sm_90", "sm_90a")  # warpgroup MMA is Hopper's alone
#: the CUDA backend's pass config, honoured here too: mma.sync on sm_90
DISABLE_WGMMA_CONFIG = "tl.disable_wgmma"
#: PrimFunc/module attribute: wgmma operand tile name -> role, major mode, tile, stages
WGMMA_ATTR = "tilelang.cutedsl.wgmma"
#: the CUDA backend's pass config, honoured here too: the stage rings stay on cp.async
DISABLE_TMA_CONFIG = "tl.disable_tma_lower"
#: argument counts of the staged statements (the stage index is the last)
STAGED_ARITY = {"tl_cute_g2s": 7, "tl_cute_gemm": 9}


def warp_grid(m: int, n: int, warps: int) -> tuple[int, int] | None:
    """(warps along M, warps along N) that tile an m x n accumulator in 16 x 16 steps, the
    most square one first (each warp then reads the fewest operand bytes per product)."""
    best = None
    for wm in range(1, warps + 1):
        if warps % wm:
            continue
        wn = warps // wm
        if m % (ATOM_M * wm) or n % (ATOM_N * wn):
            continue
        score = abs((m // wm) - (n // wn))
        if best is None or score < best[0]:
            best = (score, (wm, wn))
    return None if best is None else best[1]


def operand_swizzle(cols: int) -> list[int] | None:
    """[bits, base, shift] of the swizzle for a row-major 16-bit tile of ``cols`` columns:
    the row's index bits XORed into the 16-byte unit bits, or None where rows are too short
    or not a power of two."""
    if cols < 16 or cols & (cols - 1):
        return None
    units = cols // 8  # 16-byte units per row
    bits = min(3, units.bit_length() - 1)
    shift = max(3, cols.bit_length() - 1 - 3)
    return [bits, 3, shift]


def _thread_count(body: Any) -> int | None:
    import tvm_ffi
    from tvm import tirx

    extents: dict[str, int] = {}

    def visit(stmt: Any) -> None:
        if stmt.attr_key == "thread_extent" and isinstance(stmt.value, tirx.IntImm):
            extents[str(stmt.node.thread_tag)] = int(stmt.value.value)

    tvm_ffi.structural_walk(body, (tirx.AttrStmt, visit))
    if extents.get("threadIdx.y", 1) != 1 or extents.get("threadIdx.z", 1) != 1:
        return None
    return extents.get("threadIdx.x")


class _Plan:
    def __init__(self, func: Any) -> None:
        self.func = func
        self.accumulators: dict[Any, dict[str, Any]] = {}  # C buffer -> its MMA config
        self.operands: list[Any] = []  # shared tiles read by a qualifying GEMM
        self.ops: list[tuple[str, Any]] = []
        self.stages: dict[str, int] = {}  # operand tile name -> stages of its T.Pipelined ring
        self.staged: list[Any] = []  # the args of GEMMs whose C stays a TileLang fragment
        self.staged_mma: dict[str, dict[str, Any]] = {}  # C stage name -> its tiled MMA
        self.wgmma: dict[str, dict[str, Any]] = {}  # operand tile name -> its GMMA layout (_choose_wgmma)

    def find(self, buffer: Any, table: Any) -> Any:
        for key in table:
            if key.same_as(buffer):
                return key
        return None

    def gemm_config(self, args: Any, threads: int, fragment_a: bool = False) -> dict[str, Any] | None:
        """The MMA config of a GEMM, or None; ``fragment_a``: A may be a register fragment
        (staged GEMMs copy it to shared memory first)."""
        a, b, c = args[0], args[1], args[2]
        trans_a, trans_b = bool(args[3].value), bool(args[4].value)
        if not all(is_full_region(r) for r in (a, b, c)):
            return None
        a_scopes = (*SHARED_SCOPES, FRAGMENT_SCOPE) if fragment_a else SHARED_SCOPES
        if a.source.scope() not in a_scopes or b.source.scope() not in SHARED_SCOPES:
            return None
        if c.source.scope() != FRAGMENT_SCOPE or str(c.source.dtype) != "float32":
            return None
        dtype = str(a.source.dtype)
        if dtype not in OPERAND_DTYPES or str(b.source.dtype) != dtype:
            return None
        mnk = gemm_mnk(a, b, c, trans_a, trans_b)
        if mnk is None or mnk[2] % ATOM_K or threads % WARP:
            return None
        m, n, _ = mnk
        grid = warp_grid(m, n, threads // WARP)
        if grid is None:
            return None
        return {"dtype": dtype, "wm": grid[0], "wn": grid[1], "m": m, "n": n}

    def analyze(self) -> None:
        import tvm_ffi
        from tvm import tirx

        threads = _thread_count(self.func.body)
        if threads is None:
            return

        def visit(stmt: Any) -> None:
            name = tile_op_name(stmt)
            if name is not None:
                self.ops.append((name, stmt.value.args))

        tvm_ffi.structural_walk(self.func.body, (tirx.Evaluate, visit))
        candidates: dict[Any, dict[str, Any]] = {}
        for name, args in self.ops:
            if name != "gemm":
                continue
            c = args[2].source
            config = self.gemm_config(args, threads)
            key = self.find(c, candidates)
            if key is not None and candidates[key] != config:
                candidates[key] = None
            elif key is None:
                candidates[c] = config
        for c, config in candidates.items():
            if config is not None and self._only_tile_uses(c):
                self.accumulators[c] = config
        for name, args in self.ops:
            if name == "gemm" and self.find(args[2].source, self.accumulators) is not None:
                for region in args[:2]:
                    if self.find(region.source, self.operands) is None:
                        self.operands.append(region.source)
            elif name == "gemm" and self.gemm_config(args, threads, fragment_a=True) is not None:
                self.staged.append(args)  # staged.py: C (and a fragment A) through shared memory

    def _only_tile_uses(self, c: Any) -> bool:
        """C is filled, multiplied into, and copied whole to a global tile, nothing else."""
        from tilelang.plugin import buffer_accesses

        touched = any(buffer.same_as(c) for buffer, _, _ in buffer_accesses(self.func.body))
        if touched and not own_index_nests(self.func.body, c):
            return False  # a T.Parallel nest at its own indices is fine (epilogue.py)
        for name, args in self.ops:
            regions = [a for a in args if hasattr(a, "region") and hasattr(a, "source")]
            ours = [r for r in regions if r.source.same_as(c)]
            if not ours:
                continue
            if name == "gemm":
                if not args[2].source.same_as(c) or any(r.source.same_as(c) for r in regions[:2]):
                    return False
            elif name == "fill":
                if not is_full_region(ours[0]):
                    return False
            elif name == "copy":
                src, dst = regions[0], regions[1]
                if not src.source.same_as(c) or not is_full_region(src):
                    return False
                if dst.source.scope() in SHARED_SCOPES:  # a whole shared tile of C's shape
                    if not is_full_region(dst) or static_ints(dst.source.shape) != static_ints(c.shape):
                        return False
                    continue
                if dst.source.scope() != "global":
                    return False
                if static_ints(dst.source.shape) is None or len(dst.source.shape) != 2:
                    return False
                if static_ints([r.extent for r in dst.region]) != static_ints(c.shape):
                    return False
            else:
                return False
        return True


def _origin(buffer: Any) -> Any:
    from tvm import tirx

    return tirx.BufferLoad(buffer, [tirx.const(0, "int32")] * len(buffer.shape))


def _g2s_copy(plan: _Plan, args: Any) -> Any:
    """``tl_cute_g2s`` for a whole global tile into an operand tile, or None."""
    from tvm import tirx

    src, dst = args[0], args[1]
    if src.source.scope() != "global" or plan.find(dst.source, plan.operands) is None or not is_full_region(dst):
        return None
    shape, tile = static_ints(src.source.shape), static_ints(dst.source.shape)
    extents = static_ints([r.extent for r in src.region])
    if shape is None or tile is None or len(shape) != 2 or extents != tile:
        return None
    rows, cols = tile
    unit = COPY_BYTES // (src.source.dtype.bits // 8)
    threads = _thread_count(plan.func.body) or 0
    per_row = cols // unit  # threads along a row, 16 bytes each
    if shape[0] % rows or shape[1] % cols or cols % unit or shape[1] % unit or threads % per_row or \
            rows % (threads // per_row):
        return None
    starts = [r.min for r in src.region]
    return extern_call("tl_cute_g2s", _origin(dst.source), tirx.BufferLoad(src.source, starts),
                       rows, cols, shape[1], threads)


def _rewrite(plan: _Plan) -> Any:
    import tvm_ffi
    from tvm import tirx

    regs = {c: tirx.decl_buffer((config["m"] * config["n"],), "float32", name=c.name, scope="local")
            for c, config in plan.accumulators.items()}

    def reg(buffer: Any) -> Any:
        key = plan.find(buffer, regs)
        return None if key is None else regs[key]

    def fill(r: Any, value: Any) -> Any:
        # the accumulator fragment's own per-thread size is CuTe's: the printer walks it whole
        return extern_call("tl_cute_fill", _origin(r), value)

    def on_op(stmt: Any) -> Any:
        name = tile_op_name(stmt)
        if name is None:
            return stmt
        args = stmt.value.args
        if name == "fill" and reg(args[0].source) is not None:
            return fill(reg(args[0].source), args[1])
        if name == "gemm" and reg(args[2].source) is None and staging.takes(args):
            return staging.gemm(args)
        if name == "gemm" and reg(args[2].source) is not None:
            r = reg(args[2].source)
            config = plan.accumulators[plan.find(args[2].source, regs)]
            (a0, a1) = static_ints(args[0].source.shape)
            k = a0 if bool(args[3].value) else a1
            call = extern_call("tl_cute_gemm", _origin(args[0].source), _origin(args[1].source), _origin(r),
                               config["m"], config["n"], k, int(args[3].value), int(args[4].value))
            if bool(args[5].value):  # clear_accum
                return tirx.SeqStmt([fill(r, tirx.const(0.0, "float32")), call])
            return call
        if name == "copy" and reg(args[0].source) is not None and args[1].source.scope() in SHARED_SCOPES:
            # the tile keeps its row-major (maybe swizzled) offsets, which T.copy and T.Parallel
            # read after; the barriers publish writes ThreadSync cannot see
            store = extern_call("tl_cute_store_acc_shared", _origin(reg(args[0].source)), _origin(args[1].source))
            return tirx.SeqStmt([block_barrier(), store, block_barrier()])
        if name == "copy" and reg(args[0].source) is not None:
            r, dst = reg(args[0].source), args[1]
            rows, cols = static_ints(dst.source.shape)
            starts = [x.min for x in dst.region]
            config = plan.accumulators[plan.find(args[0].source, regs)]
            return extern_call("tl_cute_store_acc", _origin(r), tirx.BufferLoad(dst.source, starts),
                               starts[0], starts[1], config["m"], config["n"], rows, cols)
        if name == "copy":
            copy = _g2s_copy(plan, args)
            if copy is not None:
                return copy
        return stmt

    def on_alloc(node: Any) -> Any:
        r = reg(node.buffer)
        return tirx.AllocBuffer(r) if r is not None else node

    threads = _thread_count(plan.func.body) or 1
    staging = Staging(plan, threads)
    body = plan.func.body
    for c, r in regs.items():
        config = plan.accumulators[c]
        body = rewrite_nests(body, c, r, config["m"] * config["n"] // threads)
    body = tvm_ffi.structural_map(body, (tirx.Evaluate, on_op), order="post")
    body = tvm_ffi.structural_map(body, (tirx.AllocBuffer, on_alloc), order="post")
    body = staging.allocate(body)
    body = tvm_ffi.structural_map(body, (tirx.SeqStmt, _fence_g2s_runs), order="post")
    own = {str(t.name): t for t in plan.operands if extern_only(body, t)}

    cp_async_rings = [0]

    def on_loop(loop: Any) -> Any:
        ring = pipeline(loop, own)
        if ring is None:
            return loop
        plan.stages.update(ring[1])
        cp_async_rings[0] += 1
        return ring[0]

    staged = tvm_ffi.structural_map(body, (tirx.For, on_loop), order="post")
    if plan.stages and _unstaged_uses(staged, set(plan.stages)):
        plan.stages.clear()  # a copy or GEMM outside the ring uses a ring's tile: no ring
        return body
    plan.wgmma = _choose_wgmma(plan)
    if not plan.wgmma or pass_config(DISABLE_TMA_CONFIG):
        return staged
    rings = [0]

    def on_tma_loop(loop: Any) -> Any:
        parts = ring_loop(loop, own)
        ring = tma_ring(parts, plan.wgmma, threads, rings[0]) if parts is not None else None
        rings[0] += ring is not None
        return loop if ring is None else ring

    tma = tvm_ffi.structural_map(body, (tirx.For, on_tma_loop), order="post")
    # every ring on TMA, or none: the wgmma choice above holds for the rings as staged
    return tma if rings[0] == cp_async_rings[0] else staged


def _unstaged_uses(body: Any, staged: set[str]) -> bool:
    """A g2s or GEMM statement that touches a staged tile without naming the stage."""
    import tvm_ffi
    from tvm import tirx

    found = [False]

    def visit(stmt: Any) -> None:
        name = extern_name(stmt)
        if name in STAGED_ARITY and len(stmt.value.args) - 1 == STAGED_ARITY[name] - 1:
            tiles = stmt.value.args[1:2] if name == "tl_cute_g2s" else stmt.value.args[1:3]
            found[0] = found[0] or any(str(t.source.name) in staged for t in tiles)

    tvm_ffi.structural_walk(body, (tirx.Evaluate, visit))
    return found[0]


def _arch(func: Any) -> str:
    target = func.attrs.get("target") if func.attrs is not None else None
    return str(target.export().get("arch", "")) if target is not None else ""


def _choose_wgmma(plan: _Plan) -> dict[str, dict[str, Any]]:
    """On sm_90, the GEMMs move to warpgroup MMA when all of them can: both operands are
    tiles of a stage ring (so only this backend's copies write them, in the GMMA layout),
    the block is whole warpgroups, M splits into 64-row pieces per warpgroup and N is a
    wgmma N (8..256). Returns each operand tile's layout (role, major mode, tile, stages),
    and marks the accumulators' configs; empty (mma.sync) otherwise."""
    threads = _thread_count(plan.func.body) or 0
    if _arch(plan.func) not in WGMMA_ARCHS or pass_config(DISABLE_WGMMA_CONFIG) or threads % WARPGROUP:
        return {}
    groups = threads // WARPGROUP
    tiles: dict[str, dict[str, Any]] = {}
    kinds: dict[str, dict[str, Any]] = {}
    for name, args in plan.ops:
        key = plan.find(args[2].source, plan.accumulators) if name == "gemm" else None
        if key is None:
            continue
        config = plan.accumulators[key]
        a, b = str(args[0].source.name), str(args[1].source.name)
        m, n = config["m"], config["n"]
        if a not in plan.stages or b not in plan.stages or a == b or m % (64 * groups) or n % 8 or n > 256:
            return {}
        trans_a, trans_b = bool(args[3].value), bool(args[4].value)
        k = static_ints(args[0].source.shape)[0 if trans_a else 1]
        for tile, role, k_major in ((a, "a", not trans_a), (b, "b", trans_b)):
            entry = {"role": role, "k_major": k_major, "mnk": [m, n, k], "stages": plan.stages[tile]}
            if tiles.setdefault(tile, entry) != entry:
                return {}
        kind = {"kind": "wgmma", "wg": groups, "a_k_major": not trans_a, "b_k_major": trans_b}
        if kinds.setdefault(str(key.name), kind) != kind:
            return {}
    for key, config in plan.accumulators.items():
        config.update(kinds[str(key.name)])
    return tiles


def _g2s_name(stmt: Any) -> bool:
    from tvm import tirx

    value = getattr(stmt, "value", None)
    return (isinstance(stmt, tirx.Evaluate) and getattr(getattr(value, "op", None), "name", None) == "tirx.call_extern"
            and str(value.args[0].value) == "tl_cute_g2s")


def _fence_g2s_runs(seq: Any) -> Any:
    """A barrier before each run of cp.async copies (the tile may still be read from the
    previous iteration) and a wait + barrier after it (ThreadSync cannot see these writes)."""
    from tvm import tirx

    stmts = list(seq.seq)
    if not any(_g2s_name(s) for s in stmts):
        return seq
    out: list[Any] = []
    for i, stmt in enumerate(stmts):
        first = _g2s_name(stmt) and (i == 0 or not _g2s_name(stmts[i - 1]))
        last = _g2s_name(stmt) and (i + 1 == len(stmts) or not _g2s_name(stmts[i + 1]))
        if first:
            out.append(block_barrier())
        out.append(stmt)
        if last:
            out += [extern_call("tl_cute_cp_async_commit"), extern_call("tl_cute_cp_async_wait", 0), block_barrier()]
    return tirx.SeqStmt(out)


def _lower(func: Any, mod: Any, ctx: Any) -> Any:
    from .transform import SWIZZLE_ATTR

    plan = _Plan(func)
    plan.analyze()
    if not plan.accumulators and not plan.staged:
        return func
    func = func.with_body(_rewrite(plan))
    raw = func.attrs.get(SWIZZLE_ATTR) if func.attrs is not None else None
    swizzles = json.loads(str(raw)) if raw is not None else {}
    for tile in plan.operands:  # the staged GEMMs' operand tiles were added by _rewrite
        swizzle = operand_swizzle(int(tile.shape[1]))
        if swizzle is not None:
            swizzles.setdefault(str(tile.name), swizzle)  # the user's T.ext.swizzled_shared wins
    if plan.wgmma:
        func = func.with_attr(WGMMA_ATTR, json.dumps(plan.wgmma, sort_keys=True))
    mma = {str(c.name): config for c, config in plan.accumulators.items()}
    mma.update(plan.staged_mma)  # staged GEMMs' tiled MMAs, by their C stage's name
    if "tl_cute_g2s" in str(func.body) or "tl_cute_tma_g2s" in str(func.body):  # 16-byte cp.async or TMA
        current = func.attrs.get(ALIGNMENT_ATTR) if func.attrs is not None else None
        func = func.with_attr(ALIGNMENT_ATTR, max(COPY_BYTES, int(current or 0)))
    if swizzles:
        func = func.with_attr(SWIZZLE_ATTR, json.dumps(swizzles, sort_keys=True))
    if plan.stages:
        func = func.with_attr(STAGES_ATTR, json.dumps(plan.stages, sort_keys=True))
    return func.with_attr(MMA_ATTR, json.dumps(mma, sort_keys=True))


def LowerCuteGemm() -> Any:
    return prim_func_pass(_lower, "tl.cutedsl.LowerCuteGemm")

"""AlternateWarpgroupGemms: the two consumer warpgroups of a warp-specialized block take
turns issuing their GEMMs, so one's softmax (or other register work) runs while the
other's GEMMs occupy the tensor cores.

Flash attention's loop issues two GEMMs per iteration with register work between them
(S = Q K^T; the row max, exp and sums over S; O += P V). Without a schedule both
warpgroups reach each phase together: the tensor cores idle while both run the softmax,
and the exp units idle during the GEMMs. FlashAttention-3 (Shah et al. 2024, section 3.1,
"pingpong scheduling") orders the warpgroups' GEMM issues with two named barriers; this
pass does the same for any consumer loop that issues two or more wgmma groups at its top
level. The pass config ``tl.warpgroup_pingpong`` picks which issues take turns:
``"first"`` (the first GEMM of each iteration), ``"every"`` (each GEMM), ``"pair"`` (see
below), or ``"off"`` (the default, see below):

    if (wg == 1) bar.arrive 2, 256           -- warpgroup 0 issues first
    for (...) {
      bar.sync 2 + wg, 256                   -- my turn
      wgmma.fence; ...; wgmma.commit_group    -- a GEMM's issue
      bar.arrive 2 + (1 - wg), 256            -- the other warpgroup's turn
      ...
    }
    if (wg == 0) bar.sync 2, 256             -- the last turn warpgroup 1 handed over

Every issue region runs unconditionally once per iteration in both warpgroups (checked),
so the turns alternate WG0, WG1, WG0, ... and each barrier is completed by the 128 threads
that sync and the 128 that arrive (PTX ISA, "bar.sync / bar.arrive": the expected count is
the threads of both). A loop with a block or named barrier of its own is left alone: a
warpgroup waiting for its turn while the other waits at that barrier would never resume.
Barrier 1 is the consumers' block barrier (warp_specialize.py); 2 and 3 are used only here.

H200, flash attention 8x16x4096, 128x128 tiles, 256 threads, 2 stages (2026-12-01), in
TFLOP/s, three runs: head dim 128 "every" 537.5 / 578.8 against "off" 589.7 / 559.3, "first"
553.2 and 577.8 against "off" 559.3 and 593.2; head dim 64 (no producer warp) within 1%.
Run-to-run noise is about 5%; no mode gained beyond it, so the default is "off" and the
modes are opt-in.
``"pair"`` (FlashAttention-3's order, for OverlapSecondGemm's loop): one turn covers S_k's
issue and the overlapped P_{k-1} V_{k-1}'s. Its hand-over goes into both branches of the
second GEMM's ``if (k > 0)``, joined with the wait split on the same condition. A hand-over
between those two ifs kept them apart. At the join the compiler then copied accumulator
registers, so ptxas serialized every wgmma of the kernel (remark C7514). That mode was
tried on 2026-12-01, ran at 0.62-0.64x SDPA, and was removed. Fixed, on the H200
(2026-12-02; head dim 128, 3 stages, overlap on, one run):
- "pair" 0.898x SDPA;
- "first" 0.897x;
- no turns 0.893x.
test_pingpong.py pins that ptxas serializes nothing, whatever the mode.

Left unset, the config means "pair" for an overlapped loop that runs inside an outer loop of
the consumers (a persistent kernel's tiles, T.Persistent or a hand-written wave loop, whose
ring is carried across them) and "off" elsewhere. On the H200 (2026-12-02, flash attention
8x16x4096, 128 x 128 tiles, 256 threads, same run) persistent kernels gained from the turns
at every size tried: head dim 128, 2 stages 0.956 -> 1.002x SDPA, 3 stages 0.928 -> 0.971;
head dim 64, 3 stages 0.883 -> 0.912 (an earlier session: 0.911 -> 0.938 at head dim 128).
One tile per block did not: 0.996 -> 0.989 (head dim 128, 2 stages), 0.903 -> 0.905 (3).
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.errors import CompileError
from tilelang.plugin import extern_call, pass_config, prim_func_pass, seq
from tvm import tirx

CONFIG = "tl.warpgroup_pingpong"
MODES = ("first", "every", "pair", "off")
DEFAULT_MODE = None  # unset: "pair" for overlapped loops inside an outer loop, else "off" (docstring)
WARP_GROUP = 128
FIRST_BARRIER = 2  # warpgroup g waits on barrier 2 + g
SYNCS = frozenset({"tl_named_barrier_sync", "tl_named_barrier_arrive"})


def extern_name(stmt: Any) -> str | None:
    if not isinstance(stmt, tirx.Evaluate):
        return None
    call = stmt.value
    if isinstance(call, tvm.ir.Call) and getattr(call.op, "name", "") == "tirx.call_extern":
        return str(call.args[0].value)
    return None


def calls_extern(stmt: Any, name: str) -> bool:
    """Whether ``stmt`` calls the device function ``name`` anywhere inside."""
    found = []
    tvm_ffi.structural_walk(stmt, (tirx.Evaluate, lambda e: found.append(e) if extern_name(e) == name else None))
    return bool(found)


def _has_block_barrier(body: Any) -> bool:
    found = []

    def visit(call: Any) -> None:
        name = getattr(call.op, "name", "")
        if name == "tirx.tvm_storage_sync" or (name == "tirx.call_extern" and str(call.args[0].value) in SYNCS):
            found.append(call)

    tvm_ffi.structural_walk(body, (tvm.ir.Call, visit))
    return bool(found)


def _fences(stmt: Any) -> list[Any]:
    """Every wgmma fence under ``stmt``, in program order (a pre-order walk)."""
    found: list[Any] = []
    tvm_ffi.structural_walk(stmt, (tirx.Evaluate, lambda e: found.append(e)
                                   if extern_name(e) == "tl_wgmma_fence" else None))
    return found


def _unconditional_fences(stmt: Any) -> list[Any]:
    """wgmma fences reached on every path through ``stmt`` (not under an if or an inner loop)."""
    if isinstance(stmt, tirx.SeqStmt):
        return [f for s in stmt for f in ([s] if extern_name(s) == "tl_wgmma_fence" else _unconditional_fences(s))]
    if isinstance(stmt, tirx.AttrStmt):  # lets and buffers are flat statements in TVM 0.27
        return _unconditional_fences(stmt.body)
    return []


def _regions(stmts: list[Any]) -> list[tuple[int, int]] | None:
    """[fence, commit] index pairs among ``stmts``; None when a fence has no commit after it."""
    pairs, start = [], None
    for i, s in enumerate(stmts):
        name = extern_name(s)
        if name == "tl_wgmma_fence" and start is None:
            start = i
        elif name == "tl_wgmma_commit" and start is not None:
            pairs.append((start, i))
            start = None
    return None if start is not None else pairs


def _takes_turns(loop: Any, mode: str) -> bool:
    """Two or more GEMM issues per iteration, and the ones that take turns reached on every
    path (with "first", a later issue may be conditional: OverlapSecondGemm's)."""
    fences, unconditional = _fences(loop.body), _unconditional_fences(loop.body)
    if len(fences) < 2 or _has_block_barrier(loop.body):
        return False
    if mode == "first":
        return any(f.same_as(fences[0]) for f in unconditional)
    if mode == "pair":
        return len(fences) == 2 and any(f.same_as(fences[0]) for f in unconditional)
    return len(unconditional) == len(fences)


def _alternate(loop: Any, wg: Any, mode: str) -> Any:
    mine, other = FIRST_BARRIER + wg, FIRST_BARRIER + (1 - wg)
    fences = _fences(loop.body)

    def on_seq(stmt: Any) -> Any:
        stmts = list(stmt)
        regions = [(a, b) for a, b in _regions(stmts) or [] if mode == "every" or stmts[a].same_as(fences[0])]
        if mode == "pair" and regions:  # one turn from the first GEMM's issue to the second's
            second = next((i for i, s in enumerate(stmts) if any(f.same_as(fences[1]) for f in _fences(s))), None)
            if second is None or second < regions[0][0]:
                return stmt
            merged = _arrive_inside(stmts, second, extern_call("tl_named_barrier_arrive", other, 2 * WARP_GROUP))
            if merged is not None:  # the turn ends inside the second GEMM's conditional issue
                start = regions[0][0]
                return seq(stmts[:start] + [extern_call("tl_named_barrier_sync", mine, 2 * WARP_GROUP)]
                           + stmts[start:second] + [merged] + stmts[second + 2:])
            regions = [(regions[0][0], second)]
        if not regions:
            return stmt
        out, at = [], 0
        for start, end in regions:
            out += stmts[at:start]
            out.append(extern_call("tl_named_barrier_sync", mine, 2 * WARP_GROUP))
            out += stmts[start:end + 1]
            out.append(extern_call("tl_named_barrier_arrive", other, 2 * WARP_GROUP))
            at = end + 1
        return seq(out + stmts[at:])

    body = tvm_ffi.structural_map(loop.body, (tirx.SeqStmt, on_seq), order="post")
    first = tirx.IfThenElse(tirx.EQ(wg, 1), extern_call("tl_named_barrier_arrive", FIRST_BARRIER, 2 * WARP_GROUP), None)
    last = tirx.IfThenElse(tirx.EQ(wg, 0), extern_call("tl_named_barrier_sync", FIRST_BARRIER, 2 * WARP_GROUP), None)
    return seq([first, tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding,
                                loop.annotations, loop.step), last])


def _overlapped_issue(stmts: list[Any], at: int) -> bool:
    """Whether ``stmts[at]`` is OverlapSecondGemm's ``if (k > 0) {second GEMM}`` with its
    wait split on the same condition right after it."""
    if at + 1 >= len(stmts):
        return False
    issue, wait = stmts[at], stmts[at + 1]
    return (isinstance(issue, tirx.IfThenElse) and isinstance(wait, tirx.IfThenElse) and issue.else_case is None
            and tvm_ffi.structural_equal(issue.condition, wait.condition))


def _arrive_inside(stmts: list[Any], at: int, arrive: Any) -> Any:
    """OverlapSecondGemm's ``if (k > 0) {second GEMM}`` at ``at``, and its wait split on the
    same condition right after, as one ``if`` with the hand-over in both branches; None for
    any other shape. A hand-over between the two ifs keeps them apart, and at the join the
    compiler copies the accumulators, which ptxas answers by serializing every wgmma (C7514,
    "non wgmma instructions reading accumulator registers")."""
    if not _overlapped_issue(stmts, at):
        return None
    issue, wait = stmts[at], stmts[at + 1]
    otherwise = [arrive] + ([wait.else_case] if wait.else_case is not None else [])
    return tirx.IfThenElse(issue.condition, seq([issue.then_case, arrive, wait.then_case]), seq(otherwise))


def consumer_branch(branch: Any) -> tuple[Any, int] | None:
    """(threadIdx.x, consumer threads) when ``branch`` is SpecializeWarps' role split:
    ``if (tid < n) consumers else if (tid == n) producer``."""
    cond, other = branch.condition, branch.else_case
    if isinstance(other, tirx.SeqStmt):  # the producer warpgroup's setmaxnreg first (gemm_overlap.py)
        other = other[len(other) - 1]
    if not (isinstance(cond, tirx.LT) and isinstance(cond.b, tirx.IntImm) and isinstance(other, tirx.IfThenElse)):
        return None
    producer = other.condition
    if not (isinstance(producer, tirx.EQ) and producer.a.same_as(cond.a) and isinstance(producer.b, tirx.IntImm)
            and producer.b.value == cond.b.value):
        return None
    return cond.a, int(cond.b.value)


def _mode() -> str | None:
    value = pass_config(CONFIG, DEFAULT_MODE)
    if value is None:
        return None
    mode = {True: "first", False: "off"}.get(value, value) if isinstance(value, bool) else value
    if mode not in MODES:
        raise CompileError(f"pass config {CONFIG!r} is {value!r}; expected one of {', '.join(map(repr, MODES))} "
                           "(or a bool: True means 'first', False 'off')")
    return mode


def _overlapped(loop: Any) -> bool:
    """Whether ``loop`` is OverlapSecondGemm's rotated loop: two GEMM issues, the second in
    the ``if (k > 0)`` that its split wait follows."""
    if not _takes_turns(loop, "pair") or not isinstance(loop.body, tirx.SeqStmt):
        return False
    second = _fences(loop.body)[1]
    stmts = list(loop.body)
    at = next((i for i, s in enumerate(stmts) if any(f.same_as(second) for f in _fences(s))), None)
    return at is not None and _overlapped_issue(stmts, at)


def _inner_loops(stmt: Any) -> list[Any]:
    """The loops that run inside another loop of ``stmt``."""
    inner: list[Any] = []

    def on_for(loop: Any) -> None:
        tvm_ffi.structural_walk(loop.body, (tirx.For, inner.append))

    tvm_ffi.structural_walk(stmt, (tirx.For, on_for))
    return inner


def _run(func: Any) -> Any:
    mode = _mode()
    if mode == "off":
        return func

    def on_if(branch: Any) -> Any:
        roles = consumer_branch(branch)
        if roles is None or roles[1] != 2 * WARP_GROUP:
            return branch
        wg = tirx.floordiv(roles[0], WARP_GROUP)
        carried = _inner_loops(branch.then_case) if mode is None else []

        def on_for(loop: Any) -> Any:
            if mode is None:  # the default: turns for an overlapped loop a persistent kernel repeats
                chosen = "pair" if any(loop.same_as(c) for c in carried) and _overlapped(loop) else None
            else:
                chosen = mode if _takes_turns(loop, mode) else None
            return _alternate(loop, wg, chosen) if chosen else loop

        consumers = tvm_ffi.structural_map(branch.then_case, (tirx.For, on_for), order="post")
        return tirx.IfThenElse(branch.condition, consumers, branch.else_case)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.IfThenElse, on_if), order="pre"))


def AlternateWarpgroupGemms() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run(func), "tl.cuda.AlternateWarpgroupGemms", per_kernel=True)


__all__ = ["CONFIG", "MODES", "AlternateWarpgroupGemms", "consumer_branch", "extern_name"]

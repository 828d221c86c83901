"""OverlapSecondGemm: in a consumer loop that issues two wgmma groups per iteration, the
second GEMM of iteration k - 1 is issued right after the first GEMM of iteration k, so
that it runs on the tensor cores while the warpgroup does the register work in between.

Flash attention's loop is S = Q K^T; the softmax over S (max, exp, sum); O *= rescale;
P = S as fp16; O += P V. As written, the exp and sums wait for nothing but S, yet the
tensor cores idle through them. FlashAttention-3 (Shah et al. 2024, section 3.2,
"intra-warpgroup overlapping") software-pipelines the loop instead; so does this pass, on
the lowered consumer loop of a warp-specialized block:

    S_0 = ...; softmax; P_0                      (iteration 0 issues no second GEMM)
    for k:  issue S_k;  issue O += P_{k-1} V_{k-1}     (one fence/commit each)
            wait until S_k is done (wgmma.wait_group 1; 0 at k = 0)
            early: what touches neither O nor P (max, exp, sums)
            wait for the second GEMM; release stage k - 1 (its V)
            late: what touches O or P (the rescale, the fp16 copy of P)
    issue O += P_{n-1} V_{n-1}; wait

It is the same arithmetic in the same order for every element. The statements move only
when (all checked, else the loop stays as it was): the loop body is one flat sequence with
exactly two issue regions, each followed by wgmma.wait_group 0; nothing after the second
GEMM touches what it reads or writes; the statements that move before a "late" one neither
read what it writes nor write what it reads or writes; bindings read no memory (they are
hoisted, and inlined into the shifted GEMM); and the ring releases its stages from the
head of the loop (moved after the second GEMM's wait, which is later: always safe).
On by default where it pays (overlap_policy.py); ``tl.intra_warpgroup_overlap`` True or
False forces it. With it the producer becomes a warpgroup that
gives its registers to the consumers (below). On the H200 (2026-12-01, flash attention
8x16x4096, head dim 128, 128 x 128 tiles, 256 threads): 2 stages 0.643x SDPA against 0.900
without (the stage of iteration k-1 is released only after its P V, mid-iteration k, so
the producer cannot stay two stages ahead); 3 stages 0.909 against 0.853; with pingpong's
first-GEMM turns 0.933, the best of that run. Before the producer warpgroup, ptxas spilled
at the 168 registers of a 9-warp block and the overlap ran at 0.51-0.53.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.plugin import (
    buffer_accesses,
    extern_call,
    prim_func_pass,
    seq,
    substitute,
)
from tvm import tirx
from tvm.ir import TensorLoad

from .occupancy import MIN_BLOCKS_ATTR
from .overlap_policy import overlap_on, record_rotation
from .pingpong import calls_extern, consumer_branch, extern_name

# Registers: the overlap keeps P of the previous iteration live through the softmax, more
# than the 168 per thread a block of 9 warps gets (3 warps share one SM sub-partition's
# 16384). As FlashAttention-3 does, the producer becomes a warpgroup that gives registers
# back (setmaxnreg.dec) and the two consumer warpgroups take them (setmaxnreg.inc): 256 x
# 240 + 128 x 24 = 64512 of the SM's 65536 (PTX ISA, "setmaxnreg"; ptxas -v: no spills,
# against 128 bytes with the producer warp). 384 threads of at least 86 registers at launch
# leave room for one block per SM, so the increase always finds its registers.
CONSUMER_THREADS, WARP_GROUP = 256, 128
CONSUMER_REGS, PRODUCER_REGS = 240, 24


def _wait(stmt: Any, pending: int) -> bool:
    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return extern_name(stmt) == "tl_wgmma_wait" and int(call.args[1].value) == pending


def _buffers(stmt: Any) -> tuple[set[Any], set[Any]]:
    """(buffers read, buffers written) by ``stmt`` (a buffer is a variable in TVM 0.27: one
    object per allocation, hashed by identity)."""
    accesses = buffer_accesses(stmt)
    return {b for b, _, store in accesses if not store}, {b for b, _, store in accesses if store}


def _loads_memory(expr: Any) -> bool:
    found = []
    tvm_ffi.structural_walk(expr, (TensorLoad, found.append))
    return bool(found)


class _Loop:
    """The consumer loop's statements, split around its two GEMM issue regions."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.ok = isinstance(loop.body, tirx.SeqStmt) and self._split(list(loop.body))

    def _split(self, stmts: list[Any]) -> bool:
        fences = [i for i, s in enumerate(stmts) if extern_name(s) == "tl_wgmma_fence"]
        commits = [i for i, s in enumerate(stmts) if extern_name(s) == "tl_wgmma_commit"]
        if len(fences) != 2 or len(commits) != 2 or not fences[0] < commits[0] < fences[1] < commits[1]:
            return False
        (f1, c1), (f2, c2) = zip(fences, commits)
        if c2 + 1 >= len(stmts) or not (_wait(stmts[c1 + 1], 0) and _wait(stmts[c2 + 1], 0)):
            return False
        if any(calls_extern(s, name) for s in stmts[:f1] + stmts[c1 + 2:f2] + stmts[c2 + 2:]
               for name in ("tl_wgmma_fence", "tl_wgmma_wait", "tl_wgmma_commit")):
            return False  # a nested GEMM or wait: not the two-GEMM shape
        binds = [s for s in stmts if isinstance(s, tirx.Bind)]
        if any(_loads_memory(b.value) for b in binds):
            return False
        self.binds = binds
        head = [s for s in stmts[:f1] if not isinstance(s, tirx.Bind)]
        releases = [s for s in head if calls_extern(s, "tl_mbarrier_arrive")]
        if len(releases) != 1:
            return False
        self.release = releases[0]
        self.head = [s for s in head if not s.same_as(self.release)]
        self.first = [s for s in stmts[f1:c1 + 1] if not isinstance(s, tirx.Bind)]
        self.second = [s for s in stmts[f2:c2 + 1] if not isinstance(s, tirx.Bind)]
        touched = set().union(*_buffers(seq(self.second)))
        # the wait for the second GEMM's own stage (a ring with K and V barriers of their
        # own, tma.py) moves with it, right before its issue: left among the early
        # statements it split the softmax in two for ptxas (a spinning asm with a memory
        # clobber), and the overlapped kernel fell from 0.963 to 0.926x SDPA
        own_wait = [stmts[f2 - 1]] if f2 - 1 > c1 + 1 and extern_name(stmts[f2 - 1]) == "tl_mbarrier_wait" else []
        self.second = own_wait + self.second
        middle = [s for s in stmts[c1 + 2:f2 - len(own_wait)] if not isinstance(s, tirx.Bind)]
        tail = [s for s in stmts[c2 + 2:] if not isinstance(s, tirx.Bind)]
        if any(set().union(*_buffers(s)) & touched for s in tail):
            return False  # something after the second GEMM uses its operands or result
        self.early, self.late = [], []
        for s in middle + tail:
            (self.late if set().union(*_buffers(s)) & touched or _is_alloc_of(s, touched) else self.early).append(s)
        return self._reorder_is_legal(middle + tail)

    def _reorder_is_legal(self, stmts: list[Any]) -> bool:
        """Every early statement moves above the late ones before it: it must neither read
        what they write nor write what they read or write."""
        late_seen: list[tuple[set[Any], set[Any]]] = []
        for s in stmts:
            reads, writes = _buffers(s)
            if any(s.same_as(x) for x in self.late):
                late_seen.append((reads, writes))
                continue
            if any(lw & reads or lw & writes or lr & writes for lr, lw in late_seen):
                return False
        return True

    def shifted(self, k_value: Any) -> list[Any]:
        """The second GEMM's issue for iteration ``k_value``, bindings inlined."""
        pairs: list[tuple[Any, Any]] = []
        for b in self.binds:  # each value spelled in the loop and thread variables alone
            pairs.append((b.var, substitute(b.value, pairs) if pairs else b.value))
        inlined = [substitute(s, pairs) if pairs else s for s in self.second]
        return [substitute(s, [(self.loop.loop_var, k_value)]) for s in inlined]

    def fences(self) -> list[Any]:
        """Operand fences for the second GEMM's fp32 accumulators, right after its wait, so
        that the compiler hoists no read of them above it (CUTLASS's
        warpgroup_fence_operand). Its A operand registers get none: ptxas tracks wgmma's
        asynchronous register reads itself, and a fence on fp16 registers seen as 32-bit
        words moved them to the stack (128 bytes, ptxas -v)."""
        regs: list[Any] = []

        def visit(load: Any) -> None:
            buf = load.source
            if isinstance(buf, tirx.Buffer) and buf.scope() == "local" and str(buf.dtype) == "float32" and \
                    not any(buf.same_as(r) for r in regs):
                regs.append(buf)

        tvm_ffi.structural_walk(seq(self.second), (TensorLoad, visit))
        return [extern_call("tl_wgmma_fence_f32", tirx.address_of(tirx.BufferLoad(buf, [0])), int(buf.shape[0]))
                for buf in regs]

    def rewrite(self) -> Any:
        loop, k = self.loop, self.loop.loop_var
        later = k > loop.min
        body = [*self.binds, *self.head, *self.first,
                tirx.IfThenElse(later, seq(self.shifted(k - 1)), None),
                tirx.IfThenElse(later, extern_call("tl_wgmma_wait", 1), extern_call("tl_wgmma_wait", 0)),
                *self.early, extern_call("tl_wgmma_wait", 0), *self.fences(), self.release, *self.late]
        rotated = tirx.For(k, loop.min, loop.extent, loop.kind, seq(body), loop.thread_binding, loop.annotations,
                           loop.step)
        last = loop.min + loop.extent - 1
        drain = tirx.IfThenElse(loop.extent > 0, seq([*self.shifted(last), extern_call("tl_wgmma_wait", 0),
                                                      *self.fences()]), None)
        return seq([rotated, drain])


def _is_alloc_of(stmt: Any, buffers: set[Any]) -> bool:
    return isinstance(stmt, tirx.AllocBuffer) and stmt.buffer in buffers


def _run(func: Any) -> Any:
    if not overlap_on():
        return func
    widened: list[tuple[Any, int]] = []  # (threadIdx.x, consumer threads) of blocks given a producer warpgroup

    def on_if(branch: Any) -> Any:
        roles = consumer_branch(branch)
        if roles is None:
            return branch
        rotated: list[Any] = []

        def on_for(loop: Any) -> Any:
            plan = _Loop(loop)
            if not plan.ok:
                return loop
            rotated.append(loop)
            record_rotation()
            return plan.rewrite()

        consumers = tvm_ffi.structural_map(branch.then_case, (tirx.For, on_for), order="post")
        producer = branch.else_case
        if rotated and roles[1] == CONSUMER_THREADS and not _min_blocks_hint(func):
            consumers = seq([extern_call("tl_setmaxnreg_inc", CONSUMER_REGS), consumers])
            producer = seq([extern_call("tl_setmaxnreg_dec", PRODUCER_REGS), producer])
            widened.append(roles)
        return tirx.IfThenElse(branch.condition, consumers, producer)

    body = tvm_ffi.structural_map(func.body, (tirx.IfThenElse, on_if), order="pre")
    for tid, threads in widened:
        def on_attr(stmt: Any, tid: Any = tid, threads: int = threads) -> Any:
            if stmt.attr_key == "thread_extent" and stmt.node.var.same_as(tid):
                return tirx.AttrStmt(stmt.node, stmt.attr_key, tirx.IntImm("int32", threads + WARP_GROUP), stmt.body)
            return stmt

        body = tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr), order="pre")
    return func.with_body(body)


def _min_blocks_hint(func: Any) -> bool:
    """Whether the occupancy plan asks for more than one block per SM (its launch-bounds
    hint): a block that takes registers from the pool for its consumers must be alone."""
    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: found.append(a)
                                        if a.attr_key == MIN_BLOCKS_ATTR else None))
    return bool(found)


def OverlapSecondGemm() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run(func), "tl.cuda.OverlapSecondGemm", per_kernel=True)


__all__ = ["OverlapSecondGemm"]

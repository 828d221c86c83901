"""SpecializeWarps: give a TMA ring's producer loop (tma.py) a warp of its own.

The tensor-core pass writes the producer's loop into the block body, marked, and every
pass up to here lowers it with the rest (shared-memory merging rewrites its addresses);
the block still has the threads the kernel declared, so T.Parallel nests and fragments
were partitioned over exactly those. This pass, which runs after all of that, adds one warp
(threads ``[n, n + 32)``) and splits the block after the barriers' initialization:

    init barriers (thread 0); __syncthreads()          -- every thread
    if (threadIdx.x < n) { the kernel, producer loop removed }
    else if (threadIdx.x == n) { the producer loop }

Block barriers inside the consumers' branch become the named barrier 1 over n threads
(PTX ISA, "bar.sync": barrier 0 would wait for the producer warp too, which runs its own
loop or has exited).
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tilelang.errors import CompileError
from tilelang.plugin import extern_call, prim_func_pass, seq
from tvm import tirx

from .tma import PRODUCER_ATTR, PRODUCER_THREADS, PROLOGUE_ATTR


def _marked(body: Any, key: str) -> list[Any]:
    found: list[Any] = []
    tvm_ffi.structural_walk(body, (tirx.AttrStmt, lambda a: found.append(a) if a.attr_key == key else None))
    return found


def _named_barriers(body: Any, threads: int) -> Any:
    def on_eval(stmt: Any) -> Any:
        call = stmt.value
        if isinstance(call, tvm.ir.Call) and getattr(call.op, "name", "") == "tirx.tvm_storage_sync" and \
                str(call.args[0].value).startswith("shared"):
            return extern_call("tl_named_barrier_sync", 1, threads)
        return stmt

    return tvm_ffi.structural_map(body, (tirx.Evaluate, on_eval), order="post")


def _is(stmt: Any, key: str) -> bool:
    return isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == key


def _split(seq_stmt: Any, producer: Any, tid: Any, threads: int) -> Any:
    """The sequence holding the prologue, split into what every thread runs and the two
    roles."""
    stmts = list(seq_stmt)
    at = next(i for i, s in enumerate(stmts) if _is(s, PROLOGUE_ATTR))
    rest = tvm_ffi.structural_map(seq(stmts[at + 1:]), (tirx.AttrStmt, lambda a: tirx.Evaluate(0)
                                                          if a.attr_key == PRODUCER_ATTR else a), order="pre")
    consumers = _named_barriers(rest, threads)
    role = tirx.IfThenElse(tid < threads, consumers,
                           tirx.IfThenElse(tid == threads, producer.body, None))
    return seq([*stmts[:at], stmts[at].body, role])


def _run(func: Any) -> Any:
    producers = _marked(func.body, PRODUCER_ATTR)
    if not producers:
        return func
    prologues = _marked(func.body, PROLOGUE_ATTR)
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs else "main"
    if len(producers) != 1 or len(prologues) != 1:
        raise CompileError(f"kernel {kernel!r}: SpecializeWarps expects one TMA producer loop, found "
                           f"{len(producers)} (set the pass config tl.disable_warp_specialized to avoid it)")
    producer = producers[0]
    threads = int(producer.value.value)
    done = []

    def on_seq(stmt: Any) -> Any:
        if not any(_is(s, PROLOGUE_ATTR) for s in stmt):
            return stmt
        done.append(stmt)
        return _split(stmt, producer, tid, threads)

    def on_attr(stmt: Any) -> Any:
        if stmt.attr_key == "thread_extent" and stmt.node.thread_tag == "threadIdx.x":
            return tirx.AttrStmt(stmt.node, stmt.attr_key, tirx.IntImm("int32", threads + PRODUCER_THREADS),
                                 stmt.body)
        return stmt

    tids = []
    tvm_ffi.structural_walk(func.body, (tirx.AttrStmt, lambda a: tids.append(a.node.var)
                                        if a.attr_key == "thread_extent" and a.node.thread_tag == "threadIdx.x"
                                        else None))
    tid = tids[0]
    body = tvm_ffi.structural_map(func.body, (tirx.SeqStmt, on_seq), order="post")
    if len(done) != 1:
        raise CompileError(f"kernel {kernel!r}: SpecializeWarps found the barriers' initialization outside a "
                           "statement sequence (set the pass config tl.disable_warp_specialized to avoid it)")
    body = tvm_ffi.structural_map(body, (tirx.AttrStmt, on_attr), order="pre")
    return func.with_body(body)


def SpecializeWarps() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run(func), "tl.cuda.SpecializeWarps", per_kernel=True)

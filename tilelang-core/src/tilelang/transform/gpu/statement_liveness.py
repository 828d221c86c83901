"""KeepReadTilesAlive: a shared tile read by a statement that writes another one keeps its
bytes until after that statement.

TVM's shared-memory planner (MergeSharedMemoryAllocations) gives a tile's bytes to another
tile once the first is used for the last time. Where that last use is the statement that
first writes the other tile (``T.copy(narrow_tile, wide_tile)``, the tiles of different
dtypes: upstream's FP8 MLA decode converts its e4m3 KV tile into a float16 one), the two
shared the same bytes: each thread wrote its converted elements over bytes other threads
had not yet read (a float16 -> float32 copy between shared tiles read wrong values). No
barrier can separate a read from a write of one statement, so the tiles must stay apart:
after such a statement, a use of every shared tile it reads (an address with access mask
0, as ``branch_barriers._keep_alive`` uses: no read or write for the barrier pass, and no
code beyond an unused address) keeps them live past it.
"""

from __future__ import annotations

from typing import Any

import tvm
import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass

_SHARED = ("shared", "shared.dyn")


def _touched(stmt: Any) -> tuple[list[Any], list[Any]]:
    """(the shared buffers ``stmt`` writes, those it reads), each once."""
    written: list[Any] = []
    read: list[Any] = []

    def add(into: list[Any], buffer: Any) -> None:
        if buffer.scope() in _SHARED and not any(buffer.same_as(b) for b in into):
            into.append(buffer)

    tvm_ffi.structural_walk(stmt, [(tirx.BufferStore, lambda s: add(written, s.buffer)),
                                   (tvm.ir.TensorLoad, lambda ld: add(read, ld.source))])
    return written, read


def _kept_alive(stmt: Any) -> list[Any]:
    """The uses to put after ``stmt``: of each shared tile it reads whose bytes are not
    those of a tile it writes."""
    written, read = _touched(stmt)
    if not written:
        return []
    inside: list[Any] = []  # tiles allocated (or declared) within ``stmt`` do not exist after it
    tvm_ffi.structural_walk(stmt, [(tirx.AllocBuffer, lambda a: inside.append(a.buffer)),
                                   (tirx.DeclBuffer, lambda d: inside.append(d.buffer))])
    others = [b for b in read if not any(b.same_as(o) for o in written + inside)]
    return [tirx.Evaluate(b.access_ptr(0, offset=0, extent=1)) for b in others]


def _run(func: Any) -> Any:
    def on_seq(seq: Any) -> Any:
        out: list[Any] = []
        for stmt in seq.seq:
            out.append(stmt)
            out.extend(_kept_alive(stmt))
        return seq if len(out) == len(seq.seq) else tirx.SeqStmt(out)

    body = tvm_ffi.structural_map(func.body, (tirx.SeqStmt, on_seq), order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def KeepReadTilesAlive() -> Any:
    return prim_func_pass(lambda func, mod, ctx: _run(func), "tl.gpu.KeepReadTilesAlive")

"""RefuseVectorsInC: a vector the kernel writes itself is refused for the C target.

TVM's C code generator has no vector types: a ``T.Ramp`` index, ``T.Broadcast``, a vector
dtype or an explicit word load (``T.ldg128``) came out as C that does not compile
("unknown type name 'int32_t4'"), seen only when the execution backend's C compiler ran.
Here it is a LanguageError naming the statement, before any lowering (the loops the
compiler vectorizes itself are kept scalar for C). The LLVM target (``target="cpu"``,
executed by tvm_ffi) compiles them.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...errors import LanguageError
from ...language.bounds import source_location

_VECTORS = (tirx.Ramp, tirx.Broadcast, tirx.Shuffle)
_STATEMENTS = (tirx.BufferStore, tirx.Evaluate, tirx.IfThenElse, tirx.LetStmt, tirx.Bind)


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    kernel = str(func.attrs.get("global_symbol", "main")) if func.attrs is not None else "main"
    found: list[Any] = []

    def on_stmt(stmt: Any) -> None:
        parts = [getattr(stmt, name, None) for name in ("value", "condition", "indices")]
        for part in parts:
            if part is None or isinstance(part, (int, str)):
                continue
            hits: list[Any] = []
            tvm_ffi.structural_walk(part, [(_VECTORS, hits.append)])
            if hits:
                found.append(stmt)
                return

    tvm_ffi.structural_walk(func.body, [(_STATEMENTS, on_stmt)])
    if found:
        raise LanguageError(
            f"kernel {kernel!r}: this statement computes a vector (T.Ramp, T.Broadcast, a vector dtype or "
            "an explicit word load such as T.ldg128), and the C target has no vector types; compile with "
            "target='cpu' (LLVM, execution backend tvm_ffi), or write the elements one at a time"
            + source_location(found[0].span))
    return func


def RefuseVectorsInC() -> Any:
    return prim_func_pass(_run, "tl.cpu.RefuseVectorsInC")

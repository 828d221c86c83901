"""``tl.emit_line_directives``: generated C-family source that names the kernel's Python lines.

With the pass config on, a compiler's messages about the generated source (nvcc's, NVRTC's, a
C compiler's) and the tools that read line tables name the ``.py`` file and line a statement
came from, as upstream TileLang's ``#line`` emission does. It takes three steps:

- the statements a pass builds in place of one it lowers take that statement's span
  (``stamp_span`` / ``keeps_span``: LowerTileOps, the CUDA backend's tensor-core passes and
  ROCm's MFMA pass use them);
- just before codegen, ``mark_source_lines`` puts a marker call before each statement: its own
  line, or the line of the nearest statement around it that has one (so a statement without a
  span does not inherit the numbering of whatever came before it in the text);
- the generated source's markers become ``#line N "file"`` (``line_directives``), in the
  source post-processing every C-family backend applies (``apply_source_postproc``).

Statements keep no marker without the config, and a target whose codegen writes no source
(LLVM) is never marked: its backend does not ask for it (``tvm_build_function``)."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
from collections.abc import Callable, Iterator
from typing import Any

CONFIG = "tl.emit_line_directives"
#: the marker in the IR and in the printed source: an extern call of this name and the file's
#: path in hex, with the line as its argument (C codegens declare the functions a kernel
#: calls, and cannot declare a string parameter)
MARKER = "__tl_source_line_"
_PRINTED = re.compile(rf"^[ \t]*{MARKER}([0-9a-f]+)\((\d+)\);[ \t]*$", re.MULTILINE)
_DECLARED = re.compile(rf"^.*\b{MARKER}[0-9a-f]+\b.*\n", re.MULTILINE)


#: the span of the kernel's def line, for the compilation in progress
_KERNEL_SPAN: contextvars.ContextVar[Any] = contextvars.ContextVar("tl_kernel_span", default=None)


@contextlib.contextmanager
def kernel_lines(func: Any) -> Iterator[None]:
    """Lowering ``func`` (as the user wrote it): its def line is where its generated functions
    start (``PrimFunc.with_body``, which passes use, drops a function's span)."""
    token = _KERNEL_SPAN.set(plain_span(func.span))
    try:
        yield
    finally:
        _KERNEL_SPAN.reset(token)


def plain_span(span: Any) -> Any:
    """``span`` as one source range: a macro's statements have a SequentialSpan (the call's
    range and the macro's own), whose first range is taken; None for no span or no line."""
    if span is not None and hasattr(span, "spans"):
        span = next(iter(span.spans), None)
    return span if span is not None and getattr(span, "line", 0) and hasattr(span, "source_name") else None



def lines_of(func: Any) -> list[tuple[str, int]]:
    """The (file, line) pairs ``func``'s statements come from, and its def line: what its
    directives would name. The kernel cache keys kernels by their printed IR, which has no
    lines; under the config the key adds these, so that a kernel moved in its file is not
    served with the old lines."""
    import tvm_ffi
    from tvm import tirx

    found = set()

    def note(node: Any) -> None:
        span = plain_span(node.span)
        if span is not None:
            found.add((str(span.source_name.name), int(span.line)))

    note(func)
    tvm_ffi.structural_walk(func.body, (tirx.Stmt, note))
    return sorted(found)


def _with_span(node: Any, span: Any) -> Any:
    """``node`` (a line statement) rebuilt with ``span``; other nodes unchanged."""
    from tvm import tirx

    if isinstance(node, tirx.For):
        return tirx.For(node.loop_var, node.min, node.extent, node.kind, node.body, node.thread_binding,
                        node.annotations, node.step, span)
    if isinstance(node, tirx.BufferStore):
        return tirx.BufferStore(node.buffer, node.value, list(node.indices), span)
    if isinstance(node, tirx.Evaluate):
        return tirx.Evaluate(node.value, span)
    if isinstance(node, tirx.IfThenElse):
        return tirx.IfThenElse(node.condition, node.then_case, node.else_case, span)
    if isinstance(node, tirx.While):
        return tirx.While(node.condition, node.body, span)
    return node


def _line_types() -> tuple[type, ...]:
    from tvm import tirx

    return (tirx.For, tirx.BufferStore, tirx.Evaluate, tirx.IfThenElse, tirx.While)


def _wanted() -> bool:
    from ..backend.pass_pipeline.pipeline import current_pass_configs

    return bool(current_pass_configs().get(CONFIG))


def stamp_span(stmt: Any, span: Any, keep: Any = ()) -> Any:
    """``stmt`` with ``span`` given to each statement in it that has no line of its own: what
    a pass returns in place of a statement it lowered (the loops of one ``T.copy`` are that
    ``T.copy``'s line). Statements in ``keep`` stay the objects they are (a pass may know
    them by identity). Only under ``tl.emit_line_directives``: otherwise ``stmt`` itself."""
    import tvm_ffi

    if plain_span(span) is None or not _wanted():
        return stmt

    def give(node: Any) -> Any:
        return node if plain_span(node.span) is not None or node in keep else _with_span(node, span)

    return tvm_ffi.structural_map(stmt, (_line_types(), give), order="post")


def keeps_span(callback: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A ``structural_map`` callback over statements whose replacement takes the replaced
    statement's line (``stamp_span``); the statements it kept from the one it replaced stay
    as they were."""
    import tvm_ffi

    @functools.wraps(callback)
    def run(node: Any) -> Any:
        new = callback(node)
        if new is None or new.same_as(node) or not _wanted():
            return new
        kept: set[Any] = set()
        tvm_ffi.structural_walk(node, (_line_types(), kept.add))
        return stamp_span(new, node.span, kept)

    return run


def _is_marker(stmt: Any) -> bool:
    from tvm import tirx

    call = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    return isinstance(call, tirx.Call) and getattr(call.op, "name", None) == "tirx.call_extern" \
        and isinstance(call.args[0], tirx.StringImm) and call.args[0].value.startswith(MARKER)


def _marker(span: Any) -> Any:
    from tvm import tirx

    name = MARKER + str(span.source_name.name).encode().hex()
    return tirx.Evaluate(tirx.call_extern("int32", name, tirx.IntImm("int32", int(span.line))))


def _marked(stmt: Any, around: Any) -> Any:
    """``stmt`` with a marker before each line statement in it (``around``: the line of the
    statement that contains it)."""
    from tvm import tirx

    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_marked(s, around) for s in stmt.seq])
    own = plain_span(stmt.span) or around
    if isinstance(stmt, tirx.For):
        body = tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, _marked(stmt.body, own),
                        stmt.thread_binding, stmt.annotations, stmt.step, stmt.span)
    elif isinstance(stmt, tirx.IfThenElse):
        body = tirx.IfThenElse(stmt.condition, _marked(stmt.then_case, own),
                               None if stmt.else_case is None else _marked(stmt.else_case, own), stmt.span)
    elif isinstance(stmt, tirx.While):
        body = tirx.While(stmt.condition, _marked(stmt.body, own), stmt.span)
    elif isinstance(stmt, tirx.AttrStmt):
        return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, _marked(stmt.body, own), stmt.span)
    elif isinstance(stmt, (tirx.BufferStore, tirx.Evaluate)) and not _is_marker(stmt):
        body = stmt
    else:
        return stmt
    return body if own is None else tirx.SeqStmt([_marker(own), body])


def mark_source_lines(mod: Any) -> Any:
    """``mod`` with a line marker before each statement of its functions, if the kernel's
    pass configs ask for ``tl.emit_line_directives``; else ``mod`` itself."""
    import tvm
    from tvm import tirx

    if not _wanted():
        return mod
    functions = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            func = func.with_body(_marked(func.body, plain_span(func.span) or _KERNEL_SPAN.get()))
        functions[gvar] = func
    return tvm.IRModule(functions, attrs=mod.attrs)


def line_directives(code: str) -> str:
    """Generated source with each printed marker as a ``#line`` directive."""
    if MARKER not in code:
        return code

    def directive(match: re.Match[str]) -> str:
        path = bytes.fromhex(match.group(1)).decode().replace("\\", "\\\\").replace('"', '\\"')
        return f'#line {match.group(2)} "{path}"'

    return _DECLARED.sub("", _PRINTED.sub(directive, code))

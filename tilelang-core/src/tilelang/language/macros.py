"""Upstream's ``T.macro`` semantics on TVMScript's macros: values and references.

* **A macro may call itself**, where a Python-constant condition ends the recursion
  (TVMScript's hygienic capture ran before the macro's name was bound).
* **A macro's value** is what its ``return`` gives: an expression (``return x + 1``), a
  tuple (``return T.sin(x), T.cos(x)``, unpacked by the caller), a variable or a frame
  (``return T.alloc_var(T.float32, init=x)``); a macro without ``return`` gives None.
  TVMScript 0.27 made a macro's ``return x`` a ``T.Return`` statement of the kernel and the
  call's value None, which a store then passed to TVM (the process crashed). The
  ``return`` must be in the macro's own body, or under a Python-constant ``if`` (decided
  while parsing, so a recursive macro ends: upstream's Collatz example); inside a ``T.If``
  or a loop of the kernel it is refused with its line.
* **``x: T.Ref``** (upstream's reference parameter; ``T.Var`` is its older spelling):
  the argument is a variable (``T.alloc_var``), an element of a buffer (``A[i]``) or a
  buffer region, and ``x = value`` in the macro stores into it. A plain value is refused
  as upstream refuses it (a ValueError naming the parameter). TVMScript already stored into
  one-element buffers; an element of a larger one was rebound as a new local instead.
"""

from __future__ import annotations

import inspect
from typing import Any

#: per parser: the IR builder's frame depth where each macro being expanded began
_DEPTHS_ATTR = "_tilelang_macro_depths"
#: per parser: for each macro being expanded, its reference parameters' elements (name -> load)
_REFS_ATTR = "_tilelang_macro_refs"


class Ref:
    """``def macro(x: T.Ref)``: ``x`` refers to the caller's variable or buffer element, and
    assigning to it in the macro stores there (C++'s reference parameter)."""


class MacroReturn(BaseException):
    """A macro's ``return``: ends its expansion with the value. A BaseException, so that
    TVMScript's visitors, which turn every Exception into a diagnostic, let it pass."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


def _stack(parser: Any, attr: str) -> list[Any]:
    stack = getattr(parser, attr, None)
    if stack is None:
        stack = []
        setattr(parser, attr, stack)
    return stack


def _is_reference(annotation: Any) -> bool:
    from tvm import tirx

    if isinstance(annotation, str):  # `from __future__ import annotations`
        return annotation.split(".")[-1] in ("Ref", "Var")
    return annotation is Ref or annotation is tirx.Var


def is_variable(value: Any) -> bool:
    """Whether ``value`` is a variable's element (a load of a one-element buffer:
    ``T.alloc_var``), which TVMScript's assignment stores into."""
    from tvm.ir import TensorLoad

    if not isinstance(value, TensorLoad):
        return False
    shape = value.source.shape
    return len(shape) == 1 and str(shape[0]) == "1"


def _references(parser: Any, macro: Any) -> dict[str, Any]:
    """The macro's reference parameters (bound by TVMScript in the var table's top frame):
    name -> the element a store through it goes to (None: TVMScript stores there itself)."""
    from tvm.ir import TensorLoad, TensorRegion

    refs: dict[str, Any] = {}
    for name, param in inspect.signature(macro.func).parameters.items():
        if not _is_reference(param.annotation):
            continue
        values = parser.var_table.name2value.get(name)
        value = values[-1] if values else None
        if isinstance(value, TensorRegion):
            refs[name] = None
        elif isinstance(value, TensorLoad):
            refs[name] = None if is_variable(value) else value
        else:
            raise ValueError(  # noqa: TRY004 - upstream's exception type
                f"T.macro {macro.func.__name__}: to pass as reference, argument `{name}` is expected "
                f"to be a variable (T.alloc_var) or a buffer element or region, but got {value!r} "
                f"({type(value).__name__})")
    return refs


def expand(parser: Any, parse_macro: Any, macro: Any) -> Any:
    """Expand ``macro`` with TVMScript's ``parse_macro``; its value is what its ``return``
    gives (None without one)."""
    from tvm.script.ir_builder.base import IRBuilder

    name = macro.func.__name__
    if not parser.var_table.name2value.get(name):
        # a recursive macro: its closure was captured before its own name was bound (to
        # T.macro's wrapper function, which holds the macro in its closure)
        bound = macro.func.__globals__.get(name)
        if any(cell.cell_contents is macro for cell in getattr(bound, "__closure__", None) or ()):
            parser.var_table.add(name, bound)
    depths, refs = _stack(parser, _DEPTHS_ATTR), _stack(parser, _REFS_ATTR)
    depths.append(len(IRBuilder.current().frames))
    refs.append(_references(parser, macro))
    try:
        parse_macro(macro, parser)
    except MacroReturn as returned:
        return returned.value
    finally:
        depths.pop()
        refs.pop()
    return None


def visit_return(parser: Any, node: Any) -> Any:
    """A ``return`` of the macro being expanded (raises MacroReturn), or NotImplemented
    outside macros (the kernel's own ``return``)."""
    from tvm.script.ir_builder.base import IRBuilder

    depths = getattr(parser, _DEPTHS_ATTR, None)
    if not depths:
        return NotImplemented
    if len(IRBuilder.current().frames) != depths[-1]:
        parser.report_error(node, "a T.macro returns its value from its own body, not from inside a T.If, "
                                  "loop or other block of the kernel it opens; compute the value into a "
                                  "T.alloc_var there and return that variable after the block")
    raise MacroReturn(None if node.value is None else parser.eval_expr(node.value))


def store_through_reference(parser: Any, target: Any, value: Any) -> bool:
    """``x = value`` where ``x`` is a reference parameter of the macro being expanded that
    names an element of a larger buffer: the store into that element (True), else False."""
    from tvm.script.parser.core import doc
    from tvm.tirx.script.builder import ir as T

    refs = getattr(parser, _REFS_ATTR, None)
    if not refs or not isinstance(target, doc.Name):
        return False
    element = refs[-1].get(target.id)
    values = parser.var_table.name2value.get(target.id)
    if element is None or not values or not values[-1].same_as(element):
        return False  # not a reference here, or the name was rebound in the macro
    T.buffer_store(element.source, parser.eval_expr(value), list(element.indices))
    return True

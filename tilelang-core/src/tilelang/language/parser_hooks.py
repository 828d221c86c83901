"""Two extensions of TVMScript's tirx parser, for upstream's spellings.

A kernel body may give a Python callable a name.

Upstream's kernels pick a tile op in the body (``scan = T.cumsum if op == "cumsum" else
T.cummax``, then ``scan(A_shared, dim=0)``); TVMScript 0.27 binds every assigned value as
IR and fails on a function ("Cannot automatically inference the type"). Upstream's parser
keeps such a value as a plain Python name; so does this hook, for callables that are not
TVM objects. Everything else goes to TVMScript's own binding, unchanged.

A one-dimensional ``T.Kernel`` unpacks into a one-element tuple: ``with T.Kernel(n) as
(bx,):`` (upstream's frame is iterable; here the frame yields the block index itself, a TVM
variable that Python cannot unpack).
"""

from __future__ import annotations

from typing import Any

_INSTALLED = False


def _is_python_callable(value: Any) -> bool:
    import tvm_ffi

    return callable(value) and not isinstance(value, (tvm_ffi.Object, type))


def install() -> None:
    global _INSTALLED
    if _INSTALLED:
        return
    from tvm.tirx.script.parser import parser as tirx_parser

    original = tirx_parser.bind_assign_value

    def bind_assign_value(self: Any, node: Any, var_name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        if _is_python_callable(value):
            return value
        return original(self, node, var_name, value, *args, **kwargs)

    tirx_parser.bind_assign_value = bind_assign_value

    from tvm import tirx
    from tvm.script.parser.core import doc
    from tvm.script.parser.core.parser import Parser

    original_eval_assign = Parser.eval_assign

    def eval_assign(self: Any, target: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(target, (doc.Tuple, doc.List)) and len(target.elts) == 1 and isinstance(source, tirx.Var):
            source = (source,)
        return original_eval_assign(self, target, source, *args, **kwargs)

    Parser.eval_assign = eval_assign
    _INSTALLED = True

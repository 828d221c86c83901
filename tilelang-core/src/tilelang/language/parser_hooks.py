"""One extension of TVMScript's tirx parser: a kernel body may give a Python callable a name.

Upstream's kernels pick a tile op in the body (``scan = T.cumsum if op == "cumsum" else
T.cummax``, then ``scan(A_shared, dim=0)``); TVMScript 0.27 binds every assigned value as
IR and fails on a function ("Cannot automatically inference the type"). Upstream's parser
keeps such a value as a plain Python name; so does this hook, for callables that are not
TVM objects. Everything else goes to TVMScript's own binding, unchanged.
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
    _INSTALLED = True

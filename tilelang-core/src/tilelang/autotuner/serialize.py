"""Sending a kernel builder to a compile worker process.

Workers are spawned (TVM is not fork-safe), so the builder travels pickled. Module-level
functions pickle by reference; builders that do not — upstream's idiom is a function nested
in another that closes over the problem sizes (``def kernel(block_M=None, ...)`` inside
``get_best_config(M, N, K)``), and ``@autotune`` rebinds the module-level name of the
function it wraps — travel by value: their code object (``marshal``; parent and worker run
one interpreter), the name of the module whose globals they use, defaults and closure cells,
each pickled the same way. The worker imports that module (a script's ``__main__`` is
re-run as ``__mp_main__`` by spawn); TVMScript reads the kernel's source from the code
object's file and line, which the worker can read too.
"""

from __future__ import annotations

import importlib
import io
import marshal
import pickle
import sys
import types
from typing import Any


def _is_importable(fn: types.FunctionType) -> bool:
    if fn.__module__ == "__main__":
        # a worker's __main__ is the script re-run without its `if __name__ == "__main__":`
        # block, so a function defined in that block is not there: it travels by value
        # (and one defined at the top finds the same globals either way)
        return False
    module = sys.modules.get(fn.__module__ or "")
    obj: Any = module
    for part in fn.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is fn


def _module_globals(name: str) -> dict[str, Any]:
    module = sys.modules.get(name)
    if module is None:
        module = importlib.import_module(name)
    return module.__dict__


def _make_cell(state: tuple[bool, Any]) -> types.CellType:
    filled, value = state
    return types.CellType(value) if filled else types.CellType()


def _rebuild_function(code: bytes, module: str, name: str, qualname: str, defaults: Any,
                      kwdefaults: Any, cells: tuple[tuple[bool, Any], ...], attrs: dict[str, Any]) -> types.FunctionType:
    closure = tuple(_make_cell(v) for v in cells) or None
    fn = types.FunctionType(marshal.loads(code), _module_globals(module), name, defaults, closure)
    fn.__qualname__ = qualname
    fn.__kwdefaults__ = kwdefaults
    fn.__module__ = module
    fn.__dict__.update(attrs)
    return fn


def _cell_state(cell: types.CellType) -> tuple[bool, Any]:
    """(True, value), or (False, None) for a cell not yet assigned (a later local)."""
    try:
        return True, cell.cell_contents
    except ValueError:
        return False, None


def _rebuild_var(name: str, dtype: str) -> Any:
    from tvm import tirx

    return tirx.Var(name, dtype)


def _reduce_tvm_object(obj: Any) -> Any:
    """A TVM object's reduction: a variable (``T.symbolic("m")``, ``T.dynamic``, a size
    upstream's tests pass to builders) travels as its name and dtype; pickle would crash
    the process on any TVM object (TVM 0.27's own reduction, and its JSON graph too,
    segfault on a Var), so other ones are a PicklingError, which the compile pool answers
    by compiling in the tuning process."""
    from tvm import tirx

    if isinstance(obj, tirx.Var):
        return _rebuild_var, (str(obj.name), str(obj.dtype))
    raise pickle.PicklingError(f"{type(obj).__name__} {obj} is a TVM object, which cannot be sent to another "
                               "process; pass plain values (or a variable: T.symbolic, T.dynamic)")


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):  # e.g. `import tilelang.language as T` in a closure
            return importlib.import_module, (obj.__name__,)
        if type(obj).__module__.startswith(("tvm.", "tvm_ffi.")):
            import tvm_ffi

            if isinstance(obj, tvm_ffi.Object):
                return _reduce_tvm_object(obj)
        if not isinstance(obj, types.FunctionType) or _is_importable(obj):
            return NotImplemented
        cells = tuple(_cell_state(c) for c in obj.__closure__ or ())
        module = obj.__module__ or "__main__"
        return _rebuild_function, (marshal.dumps(obj.__code__), module, obj.__name__, obj.__qualname__,
                                   obj.__defaults__, obj.__kwdefaults__, cells, dict(obj.__dict__))


def dumps(obj: Any) -> bytes:
    """Pickle ``obj``, taking functions that cannot be imported by value."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    return pickle.loads(data)


__all__ = ["dumps", "loads"]

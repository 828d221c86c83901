"""How ``import tvm`` runs once ``import tilelang`` has run: hooks on TVM's own modules, and
the import without the C++ errors that TVM 0.27 raises and catches while it loads.

``import tvm`` raises 113 C++ errors and catches every one: 111 ``Op.get`` probes of names
that are not operators (``tvm.tirx.script.builder.ir`` asks for each script name before it
registers its ``TScriptPrinterName``), one duplicate registration of such a name
(``tirx.s_tir.ldg32``, at the same level twice) and one probe of the disco runtime's object
type (``tvm.runtime.disco``; absent from this build, so ``tvm.runtime.disco`` is None). The
first C++ error of a process builds a backtrace with libbacktrace, which reads the debug
information of every loaded library: 0.8 s with torch loaded (0.1 ms for each later one),
a third of a cold compile.

While the ``tvm`` package executes, ``quiet_tvm_import`` answers those three questions
from TVM's registries without entering C++ when the answer is "no":

* ``Op.get(name)`` (``tvm.ir._ffi_api.GetOp``) raises TVM's AttributeError itself for a name
  that ``Op.list_op_names()`` (read once, read again on a miss) does not hold;
* a ``RegisterOpAttr`` that repeats one made earlier in the window at the same level raises
  TVM's error itself (TVM refuses it the same way);
* a ``TScriptPrinterName`` registration of the name the operator holds already is skipped
  (TVM's C++ registers some at the level the Python side registers them again);
* ``tvm_ffi``'s type-key lookup (``register_object``) answers None itself for a key that
  ``ffi.GetRegisteredTypeKeys`` (read once, read again on a miss) does not hold.

It also lists TVM's global functions once per change of their count rather than once per
``_ffi_api`` module (52 listings of ~5,000 names, 0.17 s; nothing removes a global function
while TVM imports).

Every other call goes to TVM unchanged, and the originals are back in place when
``import tvm`` returns (or fails): afterwards ``Op.get`` of a missing name still raises from
C++. What TVM ends up holding is what it holds without the window (tests/test_tvm_import.py
compares the two imports). ``TILELANG_LOUD_TVM_IMPORT=1`` turns the window off.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Iterator
from typing import Any


class ExecHook(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when module ``name`` is about to be imported, it steps aside and
    hands back the normal spec with its execution wrapped by ``around(run, module)``, where
    ``run(module)`` executes the module's own code. Used once, then removed."""

    def __init__(self, name: str, around: Callable[[Callable[[Any], None], Any], None]) -> None:
        self.name = name
        self.around = around

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != self.name:
            return None
        self.remove()
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module
        around = self.around

        def exec_module(module: Any) -> None:
            around(run_module, module)

        loader.exec_module = exec_module  # this spec's own loader object
        return spec

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


_PRINTER_NAME = "TScriptPrinterName"


class _Registry:
    """Names a registry holds, read once and read again when a name is missing and the
    registry has grown since (a library loaded since may have added it)."""

    def __init__(self, read: Callable[[], Any]) -> None:
        self._read = read
        self._names: set[str] = set()
        self._size = -1

    def holds(self, name: str) -> bool:
        if name not in self._names:
            names = self._read()
            if len(names) != self._size:
                self._size = len(names)
                self._names.update(str(n) for n in names)
        return name in self._names

    def add(self, name: str) -> None:
        """A name the registry has gained (its size is read again on the next miss)."""
        self._names.add(name)


@contextlib.contextmanager
def _patched(module: Any, attr: str, make: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(module, attr, None)
    if original is None:  # another TVM: leave it alone
        yield
        return
    setattr(module, attr, make(original))
    try:
        yield
    finally:
        setattr(module, attr, original)


def _quiet_get_op(ops: _Registry) -> Callable[[Any], Any]:
    def make(get_op: Any) -> Any:
        def GetOp(name: Any) -> Any:
            if isinstance(name, str) and not ops.holds(name):
                raise AttributeError(f"Operator {name} is not registered")
            return get_op(name)

        return GetOp

    return make


def _quiet_register_op_attr(api: Any, ops: _Registry) -> Callable[[Any], Any]:
    made: set[tuple[str, str, int]] = set()

    def make(register: Any) -> Any:
        def RegisterOpAttr(op_name: Any, attr_key: Any, value: Any, level: Any) -> Any:
            key = (str(op_name), str(attr_key), int(level))
            if key in made:
                from tvm.error import InternalError

                raise InternalError(f"Attribute {attr_key} of {op_name} is already registered "
                                    f"with same plevel={level}")
            if key[1] == _PRINTER_NAME and isinstance(value, str) and ops.holds(key[0]):
                held = api.OpGetAttr(api.GetOp(key[0]), _PRINTER_NAME)
                if held is not None and str(held) == value:
                    return None  # held already (C++ registers some at this very level)
            result = register(op_name, attr_key, value, level)
            made.add(key)
            ops.add(key[0])  # registering an attribute creates the operator
            return result

        return RegisterOpAttr

    return make


def _quiet_type_key(types: _Registry) -> Callable[[Any], Any]:
    def make(key_to_index: Any) -> Any:
        def _object_type_key_to_index(type_key: str) -> Any:
            if not types.holds(type_key):
                return None
            return key_to_index(type_key)

        return _object_type_key_to_index

    return make


def _quiet_op_registry(stack: contextlib.ExitStack) -> Callable[[Callable[[Any], None], Any], None]:
    """The operator half of the window, opened once ``tvm.ir._ffi_api`` has run (partway
    through the ``tvm`` package's own code) and closed with the rest."""

    def around(run: Callable[[Any], None], api: Any) -> None:
        run(api)
        ops = _Registry(getattr(api, "ListOpNames", list))
        stack.enter_context(_patched(api, "GetOp", _quiet_get_op(ops)))
        stack.enter_context(_patched(api, "RegisterOpAttr", _quiet_register_op_attr(api, ops)))

    return around


def _listed_once(get_global_func: Callable[[str], Any]) -> Callable[[Any], Any]:
    def make(list_names: Any) -> Any:
        listed: list[Any] = [-1, []]  # the count and names of the last listing

        def list_global_func_names() -> list[str]:
            count = get_global_func("ffi.FunctionListGlobalNamesFunctor")()(-1)
            if count != listed[0]:
                listed[:] = [count, list_names()]
            return list(listed[1])

        return list_global_func_names

    return make


def quiet_tvm_import(run: Callable[[Any], None], module: Any) -> None:
    """Execute the ``tvm`` package (``run(module)``) inside the window described above."""
    import tvm_ffi
    from tvm_ffi import core, registry

    types = _Registry(tvm_ffi.get_global_func("ffi.GetRegisteredTypeKeys"))
    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(core, "_object_type_key_to_index", _quiet_type_key(types)))
        stack.enter_context(_patched(registry, "list_global_func_names", _listed_once(tvm_ffi.get_global_func)))
        ir_api = ExecHook("tvm.ir._ffi_api", _quiet_op_registry(stack))
        ir_api.install()
        stack.callback(ir_api.remove)
        run(module)


def install_on_import() -> None:
    """Run ``import tvm`` inside the window when it comes (``import tilelang`` imports no
    TVM); nothing when TVM is imported already or the window is turned off."""
    from . import env

    if "tvm" in sys.modules or env.flag(env.LOUD_TVM_IMPORT):
        return
    _TVM.install()


_TVM = ExecHook("tvm", quiet_tvm_import)

"""A PrimFunc sent to another process as its TVMScript text.

``tilelang.par_compile(funcs)`` compiles PrimFuncs built in this process; a worker process
cannot build them again, so it gets their text. TVM's own JSON serialization stops this
process in the pinned TVM (``tvm.ir.save_json`` of any IR node crashes in
``ToJSONGraph``), and the text does not read back as it is printed: TileLang's ops print as
``T.tl_copy(...)``, which TVMScript's ``T`` does not know, and an op's return type does not
print. Nor do a few other forms: a one-element buffer prints as a scalar
(``total: T.float32``) and reads back in the "local" scope whatever its own; an integer
in an attribute prints as a bare number and reads back as a Python int, not an int32
immediate. ``FuncText`` carries, besides the text, what each printed op name stands for
(the op and the type it returns in this function), the scope of each allocated buffer and
the function attributes that hold immediates, and the reading puts them back. ``encode``
gives a FuncText only for a function that reads back structurally equal to itself, so the
worker compiles this very function: the same kernel-cache key, the same code.
"""

from __future__ import annotations

import types
from typing import Any, NamedTuple


class FuncText(NamedTuple):
    text: str
    #: (the name an op prints as after ``T.``, the op's name, the type its calls return,
    #: the argument positions that take a tile)
    ops: tuple[tuple[str, str, str, tuple[int, ...]], ...]
    #: (name, op, return type) of the ops TVMScript reads, each returning one type here
    #: (TVMScript's function may give another, e.g. T.tvm_storage_sync a void call)
    retyped: tuple[tuple[str, str, str], ...]
    #: the scope of each allocated buffer, in the order of a pre-order walk
    scopes: tuple[str, ...]
    #: the function attributes whose integers are int32 immediates
    immediate_attrs: tuple[str, ...]


def _printed_name(op: Any) -> str:
    name = op.get_attr("TScriptPrinterName")
    return str(name) if name is not None else op.name.replace(".", "_")


class _OpUse:
    """How one op printed as ``T.<name>`` is called in a function."""

    def __init__(self, op: str, known: bool) -> None:
        self.op = op
        self.known = known  # TVMScript has a function of this name
        self.returns: set[str] = set()
        self.regions: set[int] = set()  # argument positions given a tile (a region)
        self.elements: set[int] = set()  # argument positions given an element (a load)

    def entry(self) -> tuple[str, str, tuple[int, ...]] | None:
        """(op, return type, region positions); None where the text cannot tell them: the
        op returns two types here, or a position takes a tile in one call and an element
        in another (a one-element tile prints as the element does)."""
        if len(self.returns) != 1 or self.regions & self.elements:
            return None
        return self.op, next(iter(self.returns)), tuple(sorted(self.regions))


def _op_uses(func: Any) -> dict[str, _OpUse] | None:
    """{printed name: its use}; None where two ops print alike."""
    import tvm
    import tvm_ffi
    from tvm import tirx
    from tvm.ir import TensorLoad, TensorRegion
    from tvm.script import tirx as script

    found: dict[str, _OpUse] = {}
    clash = False

    def visit(call: Any) -> None:
        nonlocal clash
        if not isinstance(call.op, tvm.ir.Op):
            return
        printed = _printed_name(call.op)
        use = found.setdefault(printed, _OpUse(call.op.name, hasattr(script, printed)))
        clash |= use.op != call.op.name
        try:
            use.returns.add(str(call.dtype))
        except AttributeError:  # a pointer: not a type the reading gives (two returns: not encoded)
            use.returns.update({"", str(call.ty)})
        for position, arg in enumerate(call.args):
            if isinstance(arg, TensorRegion):
                use.regions.add(position)
            elif isinstance(arg, TensorLoad):
                use.elements.add(position)

    tvm_ffi.structural_walk(func.body, (tirx.Call, visit))
    return None if clash else found


def _immediates(value: Any) -> Any:
    """Python ints (bools aside) in ``value`` as int32 immediates."""
    from tvm import tirx

    if isinstance(value, int) and not isinstance(value, bool):
        return tirx.IntImm("int32", value)
    if isinstance(value, (list, tuple)):
        return [_immediates(v) for v in value]
    return value


class _Namespace(types.ModuleType):
    """TVMScript's ``T``, plus the ops the text names that it does not know, with
    attributes' integers read as the immediates they were."""

    def __init__(self, ops: tuple[tuple[str, str, str, tuple[int, ...]], ...],
                 retyped: tuple[tuple[str, str, str], ...], immediate_attrs: tuple[str, ...]) -> None:
        from tvm.script import tirx as script

        super().__init__("T")
        self._script = script
        self._ops = {printed: (op, dtype, regions) for printed, op, dtype, regions in ops}
        self._retyped = {printed: (op, dtype) for printed, op, dtype in retyped}
        self._immediate_attrs = set(immediate_attrs)

    def attr(self, node: Any, key: Any = None, value: Any = None) -> Any:
        return self._script.attr(_immediates(node), key, value)

    def func_attr(self, attrs: dict[str, Any]) -> Any:
        return self._script.func_attr({k: _immediates(v) if k in self._immediate_attrs else v
                                       for k, v in attrs.items()})

    def __getattr__(self, name: str) -> Any:
        if name in self._ops:
            return _op_call(*self._ops[name])
        if name in self._retyped:
            return _retyped(getattr(self._script, name), *self._retyped[name])
        return getattr(self._script, name)


def _retyped(function: Any, op: str, dtype: str) -> Any:
    """TVMScript's ``function``, its call of ``op`` returning ``dtype`` and without the
    arguments it adds of its own (``T.tvm_storage_sync("shared")`` gives a void call
    with two more)."""
    import tvm

    def call(*args: Any, **kwargs: Any) -> Any:
        value = function(*args, **kwargs)
        if not (isinstance(value, tvm.ir.Call) and isinstance(value.op, tvm.ir.Op) and value.op.name == op):
            return value
        given = list(value.args)[:len(args)] if not kwargs else list(value.args)
        if str(value.dtype) != dtype or len(given) != len(value.args):
            return tvm.ir.Call(value.op, given, ret_ty=dtype)
        return value

    return call


def _op_call(op: str, dtype: str, regions: tuple[int, ...]) -> Any:
    import tvm
    from tvm import tirx
    from tvm.ir import TensorLoad

    def argument(position: int, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return tirx.IntImm("int32", value)  # TVMScript prints an int32 immediate as a bare number
        if position in regions and isinstance(value, TensorLoad):  # a one-element tile
            return tirx.BufferRegion(value.source, [tvm.ir.Range.from_min_extent(i, 1) for i in value.indices])
        return value

    def call(*args: Any) -> Any:
        return tvm.ir.Call(tvm.ir.Op.get(op), [argument(p, a) for p, a in enumerate(args)], ret_ty=dtype)

    return call


def _allocations(func: Any) -> list[Any]:
    import tvm_ffi
    from tvm import tirx

    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.AllocBuffer, lambda alloc: found.append(alloc.buffer)), order="pre")
    return found


def _with_scopes(func: Any, scopes: tuple[str, ...]) -> Any:
    import tvm_ffi
    from tvm import tirx

    moved = [(old, tirx.decl_buffer(old.shape, old.dtype, name=old.name, scope=scope))
             for old, scope in zip(_allocations(func), scopes) if old.scope() != scope]
    if not moved:
        return func

    def on_buffer(buffer: Any) -> Any:
        return next((new for old, new in moved if buffer.same_as(old)), buffer)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Buffer, on_buffer), order="post"))


def decode(text: str, ops: tuple[tuple[str, str, str, tuple[int, ...]], ...] = (),
           retyped: tuple[tuple[str, str, str], ...] = (), scopes: tuple[str, ...] = (),
           immediate_attrs: tuple[str, ...] = ()) -> Any:
    """The PrimFunc of a FuncText (its fields)."""
    import tvm.script

    namespace = _Namespace(tuple(ops), tuple(retyped), tuple(immediate_attrs))
    func = tvm.script.from_source(text, extra_vars={"T": namespace}, check_well_formed=False)
    return _with_scopes(func, tuple(scopes))


def _holds_immediates(value: Any) -> bool:
    from tvm import tirx

    if isinstance(value, tirx.IntImm):
        return True
    try:
        return not isinstance(value, str) and any(isinstance(v, tirx.IntImm) for v in value)
    except TypeError:
        return False


def encode(func: Any) -> FuncText | None:
    """``func`` as text, or None where it would not read back as the same function (an op
    returning two types in it, a form TVMScript does not parse, a node it does not print)."""
    import tvm_ffi
    from tvm import tirx

    if not isinstance(func, tirx.PrimFunc):
        return None
    uses = _op_uses(func)
    if uses is None:
        return None
    entries = {printed: use.entry() for printed, use in uses.items() if not use.known}
    if None in entries.values():
        return None
    retyped = tuple((printed, use.op, next(iter(use.returns))) for printed, use in sorted(uses.items())
                    if use.known and len(use.returns) == 1)
    immediate_attrs = tuple(sorted(key for key, value in (func.attrs or {}).items()
                                   if _holds_immediates(value)))
    encoded = FuncText(func.script(), tuple((printed, *entry) for printed, entry in sorted(entries.items())),
                       retyped, tuple(buffer.scope() for buffer in _allocations(func)), immediate_attrs)
    try:
        again = decode(*encoded)
    except Exception:  # noqa: BLE001  (any form the parser refuses: the function stays here)
        return None
    return encoded if tvm_ffi.structural_equal(func, again) else None


__all__ = ["FuncText", "decode", "encode"]

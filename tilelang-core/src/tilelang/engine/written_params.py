"""Which tensor parameters a kernel may write: the binders refuse a read-only array there and
accept one everywhere else (a read-only numpy input is common: np.broadcast_to, a mmap).

The analysis reads the kernel after the shared tile-op lowering (every T.copy, T.gemm, T.fill
... is then a loop of loads and stores) and errs on the side of "written": a store, an
address taken (address_of, tvm_access_ptr with the write bit), or a tensor's data pointer or
element handed to any call that is not pure math. Anything it cannot analyze makes every
tensor parameter count as written, so a read-only array is never handed to code that may
write it; the cost of a wrong "written" is only a refused read-only input.
"""

from __future__ import annotations

from typing import Any

#: tvm_access_ptr's rw_mask bit for a write (tirx builtin.h)
_ACCESS_WRITE = 2
#: calls that take addresses or element references for reading only, or compute a value
_PURE_PREFIXES = ("tirx.", "prim.")
_WRITE_CAPABLE = frozenset({"tirx.address_of", "tirx.call_extern", "tirx.call_packed",
                            "tirx.call_cpacked", "tirx.call_llvm_intrin", "tirx.call_llvm_pure_intrin",
                            "tirx.call_pure_extern", "tirx.tvm_call_packed", "tirx.tvm_call_cpacked"})


def _root(buffer: Any) -> Any:
    """The buffer whose memory ``buffer`` is (a view's data is ``buffer_data(<its base>)``)."""
    seen = 0
    data = buffer.data
    while _op_name(data) == "tirx.buffer_data" and seen < 64:
        base = data.args[0]
        if base.same_as(buffer):
            break
        buffer, data, seen = base, base.data, seen + 1
    return buffer


def _op_name(expr: Any) -> str:
    op = getattr(expr, "op", None)
    return str(op.name) if op is not None and hasattr(op, "name") else ""


def _written_buffers(body: Any) -> list[Any]:
    import tvm
    import tvm_ffi
    from tvm import tirx
    from tvm.ir import TensorLoad

    written: list[Any] = []

    def mark_operand(arg: Any) -> None:
        if isinstance(arg, TensorLoad):
            written.append(_root(arg.source))
        elif _op_name(arg) == "tirx.buffer_data":
            written.append(_root(arg.args[0]))
        elif isinstance(arg, tvm.ir.Var) and hasattr(arg, "data"):
            written.append(_root(arg))

    def on_store(stmt: Any) -> None:
        written.append(_root(stmt.buffer))

    def on_call(call: Any) -> None:
        name = _op_name(call)
        if name == "tirx.tvm_access_ptr":
            mask = call.args[4]
            if not isinstance(mask, tirx.IntImm) or int(mask.value) & _ACCESS_WRITE:
                mark_operand(call.args[1])
            return
        if name == "tirx.buffer_data" or (name.startswith(_PURE_PREFIXES) and name not in _WRITE_CAPABLE):
            return
        for arg in call.args:
            if name == "tirx.address_of" or not isinstance(arg, TensorLoad) or not name.startswith(_PURE_PREFIXES):
                mark_operand(arg)

    tvm_ffi.structural_walk(body, [(tirx.BufferStore, on_store), (tvm.ir.Call, on_call)])
    return written


def written_params(func: Any) -> tuple[int, ...]:
    """Indices of ``func``'s tensor parameters the kernel may write (see the module doc)."""
    import tvm
    from tvm import tirx

    from ..transform import LowerTileOps

    tensors = [i for i, p in enumerate(func.params) if isinstance(p.ty, tirx.BufferType)]
    try:
        lowered = LowerTileOps()(tvm.IRModule({"main": func}))["main"]
        written = _written_buffers(lowered.body)
    except Exception:  # noqa: BLE001 - the real lowering reports it; here, assume the worst
        return tuple(tensors)
    result = []
    for i in tensors:
        if any(buffer.same_as(lowered.params[i]) for buffer in written):
            result.append(i)
    return tuple(result)


def narrow_symbols(func: Any) -> tuple[tuple[str, str], ...]:
    """(name, dtype) of each symbolic dimension held in fewer than 64 bits (T.symbolic's
    default is int32): the binders refuse a tensor whose extent there does not fit, which
    the compiled code would otherwise truncate (a 2**31-element tensor read as empty)."""
    from tvm import tirx

    found: dict[str, str] = {}
    for param in func.params:
        if isinstance(param.ty, tirx.BufferType):
            for dim in list(param.ty.shape) + list(param.ty.strides or ()):
                dtype = str(getattr(dim.ty, "dtype", "")) if isinstance(dim, tirx.Var) else ""
                if dtype and dtype != "int64":
                    found.setdefault(dim.name, dtype)
    return tuple(found.items())


__all__ = ["narrow_symbols", "written_params"]

"""Source kernels (``T.CUDASourceCodeKernel``, language/source_kernel.py): their operands,
and what a backend that compiles their source does with them.

:func:`bind_source_kernel_operands` runs on the function before any backend pass: each
``tl.source_kernel(source, entry)`` call gets, as operands, every tensor parameter's data
and every symbol of their shapes, strides and offsets. The host/device split then makes
them the kernel's parameters, sorted as TVM sorts a kernel's parameters (pointers first,
each group by name), which is upstream's order for a source kernel too.

:func:`LowerSourceKernels`, a backend's pass after the split, names each such device
kernel after its entry and hands the backend's code generator the source, which it puts
in place of the code it would generate for the kernel.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import tirx

from ..backend.pass_pipeline.launch_hints import device_kernels
from ..errors import LanguageError
from ..language.ops import SOURCE_KERNEL, is_call_to


def _operands(func: Any) -> tuple[list[Any], list[str]]:
    """The tensors' data and the symbols of their shapes, strides and offsets, and each
    described (``A (float32*)``, ``N (int32)``) in the order the kernel takes them."""
    data, symbols = {}, {}
    for param in func.params:
        buffer = param.ty
        if not isinstance(buffer, tirx.BufferType):
            continue
        data[param.name] = (tirx.call_intrin("handle", "tirx.buffer_data", param), f"{buffer.dtype}*")
        offset = getattr(buffer, "elem_offset", None)
        for dim in [*buffer.shape, *buffer.strides, *([offset] if offset is not None else [])]:
            if isinstance(dim, tirx.Var):
                symbols.setdefault(dim.name, (dim, str(dim.ty.dtype)))
    ordered = [*(data[n] for n in sorted(data)), *(symbols[n] for n in sorted(symbols))]
    names = [*sorted(data), *sorted(symbols)]
    return [value for value, _ in ordered], [f"{name} ({what})" for name, (_, what) in zip(names, ordered)]


def _check_entry(statement: Any, described: list[str]) -> None:
    from ..language.bounds import source_location
    from ..language.source_kernel import global_functions

    source, entry = (str(a.value) for a in statement.value.args[:2])
    declared = global_functions(source)[entry][1]
    if len(declared) != len(described):
        raise LanguageError(
            f"T.CUDASourceCodeKernel: {entry}() declares {len(declared)} parameter(s) ({', '.join(declared)}), but "
            f"the kernel passes {len(described)}: {', '.join(described) or 'nothing'} (the function's tensors, then "
            f"the symbols of their shapes and strides, each group sorted by name); declare {entry} with these "
            "parameters" + source_location(statement.span))


def bind_source_kernel_operands(func: Any) -> Any:
    """``func`` with every ``tl.source_kernel`` call given the function's tensors and symbols."""
    found: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, lambda e: found.append(e)
                                        if is_call_to(e.value, SOURCE_KERNEL) else None))
    if not found:
        return func
    operands, described = _operands(func)
    for evaluate in found:
        _check_entry(evaluate, described)

    def on_evaluate(node: Any) -> Any:
        if not is_call_to(node.value, SOURCE_KERNEL):
            return node
        source, entry = node.value.args[:2]
        call = tirx.call_intrin("int32", SOURCE_KERNEL, source, entry, *operands, span=node.value.span)
        return tirx.Evaluate(call, span=node.span)

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post"))


def _lowered(mod: Any, gvar: Any, func: Any, call: Any, attr: str, marker: str) -> Any:
    source, entry = (str(a.value) for a in call.args[:2])
    for other, kernel in device_kernels(mod):
        if not other.same_as(gvar) and str(kernel.attrs.get("global_symbol", other.name_hint)) == entry:
            raise LanguageError(f"T.CUDASourceCodeKernel: another kernel of the function is also called {entry!r}; "
                                "give the source's entry another name")

    def on_evaluate(node: Any) -> Any:
        if is_call_to(node.value, SOURCE_KERNEL):
            return tirx.Evaluate(tirx.call_extern("int32", marker, *func.params))
        return node

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post")
    return _renamed(mod, gvar, func.with_body(body).with_attr(attr, source), entry)


def _renamed(mod: Any, gvar: Any, func: Any, name: str) -> Any:
    """``mod`` with the device kernel ``gvar`` (now ``func``) called ``name``: its symbol,
    and every call of it in the host functions."""
    import tvm

    new = tvm.ir.GlobalVar(name)
    old = str(func.attrs.get("global_symbol", gvar.name_hint))

    def on_call(call: Any) -> Any:
        if isinstance(call.op, tvm.ir.GlobalVar) and call.op.same_as(gvar):
            return tvm.ir.Call(new, call.args, call.attrs, call.ty_args, call.span, call.ty)
        if (getattr(call.op, "name", None) == "tirx.call_ffi_kernel" and isinstance(call.args[0], tirx.StringImm)
                and call.args[0].value == old):  # the launch, by symbol
            args = [tirx.StringImm(name), *list(call.args)[1:]]
            return tvm.ir.Call(call.op, args, call.attrs, call.ty_args, call.span, call.ty)
        return call

    functions = {}
    for other, f in mod.functions.items():
        if other.same_as(gvar):
            functions[new] = func.with_attr("global_symbol", name)
        elif isinstance(f, tirx.PrimFunc):
            functions[other] = f.with_body(tvm_ffi.structural_map(f.body, (tvm.ir.Call, on_call), order="post"))
        else:
            functions[other] = f
    return tvm.IRModule(functions, attrs=mod.attrs)


def LowerSourceKernels(attr: str, marker: str = "tl_source_kernel") -> Any:
    """After the host/device split: each device kernel of a ``T.CUDASourceCodeKernel`` is
    called by the source's entry name, holds the source in its attribute ``attr`` and, as
    body, one call of ``marker`` over its parameters; the backend's code generator puts the
    source in place of the code it generates for it. The entry must declare as many
    parameters as the kernel passes (a LanguageError that lists them otherwise)."""
    import tvm

    def run(mod: Any, ctx: Any) -> Any:
        for gvar, func in device_kernels(mod):
            calls: list[Any] = []
            tvm_ffi.structural_walk(func.body, (tirx.Evaluate, lambda e, calls=calls: calls.append(e.value)
                                                if is_call_to(e.value, SOURCE_KERNEL) else None))
            if calls:
                mod = _lowered(mod, gvar, func, calls[0], attr, marker)
        return mod

    return tvm.transform.module_pass(run, opt_level=0, name="tl.LowerSourceKernels")

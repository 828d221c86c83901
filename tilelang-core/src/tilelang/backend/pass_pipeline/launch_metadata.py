"""CaptureLaunchMetadata: record how the host launches each device kernel.

Run by a device backend's pipeline right after SplitHostDevice (before MakePackedAPI): the
host function then still holds the kernel's own parameters, and every
``tirx.call_ffi_kernel`` call names the kernel symbol, its operands and its launch
extents as expressions of the shape symbols and scalar parameters. The result is stored
as the module attribute ``tilelang.launches`` (JSON) for execution backends that launch
kernels themselves (NVRTC, Cython): operands are ``"param:<index>"`` for a tensor's data
pointer or a Python expression over the parameter and symbol names, with ``arg_types``
("handle" for pointers, else the scalar dtype the kernel declares).
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import CompileError

LAUNCHES_ATTR = "tilelang.launches"
_GRID = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_BLOCK = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
_DYN_SMEM = "tirx.use_dyn_shared_memory"
_VALUE_TAGS = frozenset(_GRID + _BLOCK + (_DYN_SMEM,))


def python_expr(expr: Any) -> str:
    """A Python expression for an integer/float TIR expression of named variables."""
    from tvm import tirx

    binary = {
        tirx.Add: "+", tirx.Sub: "-", tirx.Mul: "*", tirx.FloorDiv: "//", tirx.FloorMod: "%",
        tirx.LT: "<", tirx.LE: "<=", tirx.GT: ">", tirx.GE: ">=", tirx.EQ: "==", tirx.NE: "!=",
    }
    if isinstance(expr, (tirx.IntImm, tirx.FloatImm)):
        return repr(expr.value)
    if isinstance(expr, tirx.Var):
        return expr.name
    for node_type, op in binary.items():
        if isinstance(expr, node_type):
            return f"({python_expr(expr.a)} {op} {python_expr(expr.b)})"
    if isinstance(expr, (tirx.Min, tirx.Max)):
        fn = "min" if isinstance(expr, tirx.Min) else "max"
        return f"{fn}({python_expr(expr.a)}, {python_expr(expr.b)})"
    if isinstance(expr, tirx.Cast):
        conv = "float" if str(expr.ty).startswith(("float", "bfloat")) else "int"
        return f"{conv}({python_expr(expr.value)})"
    if isinstance(expr, tirx.Select):
        return (f"({python_expr(expr.true_value)} if {python_expr(expr.condition)} "
                f"else {python_expr(expr.false_value)})")
    raise CompileError(f"launch expression {expr} ({type(expr).__name__}) cannot be evaluated on the host")


def _launches_of(func: Any) -> list[dict[str, Any]]:
    import tvm
    import tvm_ffi

    names = [p.name for p in func.params]
    calls: list[Any] = []

    def visit(call: Any) -> None:
        if getattr(call.op, "name", None) == "tirx.call_ffi_kernel":
            calls.append(call)

    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, visit))
    launches = []
    for call in calls:
        tags = list(call.attrs.launch_params)
        values = [t for t in tags if t in _VALUE_TAGS]
        unknown = [t for t in tags if t not in _VALUE_TAGS]
        if unknown:
            raise CompileError(f"kernel launch uses launch parameters {unknown} that host-side "
                               "launchers do not support")
        args = list(call.args)
        symbol = str(args[0].value)
        operands, extents = args[1:len(args) - len(values)], args[len(args) - len(values):]
        by_tag = dict(zip(values, extents))
        encoded, types = [], []
        for operand in operands:
            if getattr(getattr(operand, "op", None), "name", None) == "tirx.buffer_data":
                encoded.append(f"param:{names.index(operand.args[0].name)}")
                types.append("handle")
            else:
                encoded.append(python_expr(operand))
                types.append(str(operand.ty))
        launches.append({
            "symbol": symbol,
            "args": encoded,
            "arg_types": types,
            "grid": [python_expr(by_tag[t]) if t in by_tag else "1" for t in _GRID],
            "block": [python_expr(by_tag[t]) if t in by_tag else "1" for t in _BLOCK],
            "dynamic_smem": python_expr(by_tag[_DYN_SMEM]) if _DYN_SMEM in by_tag else "0",
        })
    return launches


def CaptureLaunchMetadata() -> Any:  # noqa: N802 - TVM pass naming
    import tvm

    def run(mod: Any, ctx: Any) -> Any:
        launches = []
        for _, func in mod.functions.items():
            attrs = func.attrs
            if attrs is not None and attrs.get("tirx.is_global_func", False):
                continue
            launches.extend(_launches_of(func))
        return mod.with_attr(LAUNCHES_ATTR, json.dumps(launches))

    return tvm.transform.module_pass(run, opt_level=0, name="tl.CaptureLaunchMetadata")

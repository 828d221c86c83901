"""CaptureLaunchMetadata: record how the host launches each device kernel.

Run by a device backend's pipeline right after SplitHostDevice (before MakePackedAPI): the
host function then still holds the kernel's own parameters, and every
``tirx.call_ffi_kernel`` call names the kernel symbol, its operands and its launch
extents as expressions of the shape symbols and scalar parameters. The result is stored
as the module attribute ``tilelang.launches`` (JSON) for execution backends that launch
kernels themselves (NVRTC, Cython): operands are ``"param:<index>"`` for a tensor's data
pointer or a Python expression over the parameter and symbol names, with ``arg_types``
("handle" for pointers, else the scalar dtype the kernel declares). A pointer to memory
the host function allocates itself (a ``T.alloc_global`` workspace shared by two kernels,
as upstream's split-KV decoding writes its partial outputs) is ``"workspace:<name>"``: only
an execution backend that runs the host code (tvm_ffi) can supply it, and launchers that
read this metadata refuse such operands. A TMA tensor map the host code encodes before the
launch (``tirx.tensormap_encode_tiled``) is ``"tensormap:<json>"`` with arg type
``"tensormap"``: the JSON holds the tensor parameter, the descriptor's element type and
rank, its dimensions and byte strides as Python expressions, and its box, element
strides, interleave, swizzle, L2 promotion and out-of-bounds fill (the arguments of the
CUDA driver's cuTensorMapEncodeTiled, innermost dimension first); a launcher that reads
this metadata encodes the 128-byte map itself and passes it by value. A kernel that waits
at a grid-wide barrier (T.sync_grid) has ``"cooperative": true``: it must be launched
cooperatively (cuLaunchCooperativeKernel), which fails for a grid the GPU cannot hold at once.

With ``host_calls=True`` it also records direct calls of module functions from the host
function: a CPU pipeline that outlines its compute function (SplitHostDevice on a
``target`` region) lets an execution backend call that C function itself; such a call has
no launch extents, so its grid and block are all "1".
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


def _launches_of(func: Any, host_calls: bool = False) -> list[dict[str, Any]]:
    import tvm
    import tvm_ffi
    from tvm import tirx

    from ...language.ops import inline_lets, let_bindings

    names = [p.name for p in func.params]
    addresses = {p.name for p in func.params if isinstance(p.ty, tvm.ir.PointerType)}  # `a_ptr: T.ptr`
    calls: list[Any] = []

    def visit(call: Any) -> None:
        is_launch = getattr(call.op, "name", None) == "tirx.call_ffi_kernel"
        if is_launch or (host_calls and isinstance(call.op, tvm.ir.GlobalVar)):
            calls.append(call)

    views: dict[str, Any] = {}  # a buffer declared over another's data (T.view, a sub-byte tensor's bytes)

    def on_decl(decl: Any) -> None:
        data = decl.data
        if getattr(getattr(data, "op", None), "name", None) == "tirx.buffer_data":
            views[decl.buffer.name] = data.args[0].name
        elif isinstance(data, tirx.Var) and data.name in addresses:  # T.make_tensor(a_ptr, ...)
            views[decl.buffer.name] = data.name

    tvm_ffi.structural_walk(func.body, [(tvm.ir.Call, visit), (tirx.DeclBuffer, on_decl)])
    lets = let_bindings(func.body)  # host-side bindings (a symbol solved from a dimension, a CSE value)

    def host_expr(expr: Any) -> str:
        """``expr`` over the parameters and symbols: host-side bindings inlined."""
        return python_expr(inline_lets(expr, lets))

    def tensor_of(name: str) -> str:
        seen = set()
        while name in views and name not in names and name not in seen:
            seen.add(name)
            name = views[name]
        return name

    maps = _tensor_maps(func, names)
    launches = []
    for call in calls:
        if isinstance(call.op, tvm.ir.GlobalVar):
            symbol, operands, by_tag = call.op.name_hint, list(call.args), {}
        else:
            symbol, operands, by_tag = _ffi_kernel_call(call)
        encoded, types = [], []
        for operand in operands:
            if any(operand.same_as(var) for var in maps):
                encoded.append("tensormap:" + next(text for var, text in maps.items() if operand.same_as(var)))
                types.append("tensormap")
            elif getattr(getattr(operand, "op", None), "name", None) == "tirx.buffer_data":
                name = tensor_of(operand.args[0].name)
                # a pointer parameter: its value, the address, is the operand (as a scalar's is)
                encoded.append(name if name in addresses else
                               f"param:{names.index(name)}" if name in names else f"workspace:{name}")
                types.append("handle")
            else:
                encoded.append(host_expr(operand))
                types.append("handle" if isinstance(operand.ty, tvm.ir.PointerType) else str(operand.ty))
        launches.append({
            "symbol": symbol,
            "args": encoded,
            "arg_types": types,
            "grid": [host_expr(by_tag[t]) if t in by_tag else "1" for t in _GRID],
            "block": [host_expr(by_tag[t]) if t in by_tag else "1" for t in _BLOCK],
            "dynamic_smem": host_expr(by_tag[_DYN_SMEM]) if _DYN_SMEM in by_tag else "0",
        })
    return launches


def _tensor_maps(func: Any, names: list[str]) -> dict[Any, str]:
    """Every tensor map the host function encodes -> its recipe (JSON, see the module
    docstring)."""
    import tvm
    import tvm_ffi

    calls: list[Any] = []
    tvm_ffi.structural_walk(func.body, (tvm.ir.Call, lambda c: calls.append(c)
                                        if getattr(c.op, "name", None) == "tirx.tensormap_encode_tiled" else None))
    maps = {}
    for call in calls:
        attrs, args = call.attrs, list(call.args)
        rank = int(attrs.rank)
        base = args[1]
        if getattr(getattr(base, "op", None), "name", None) != "tirx.buffer_data" or \
                base.args[0].name not in names:
            raise CompileError(f"tensor map {args[0].name} is not encoded over a tensor parameter")
        dims, strides = args[2:2 + rank], args[2 + rank:1 + 2 * rank]
        box, elements = args[1 + 2 * rank:1 + 3 * rank], args[1 + 3 * rank:1 + 4 * rank]
        maps[args[0]] = json.dumps({
            "param": names.index(base.args[0].name), "dtype": str(attrs.descriptor_dtype), "rank": rank,
            "dims": [python_expr(d) for d in dims], "strides": [python_expr(d) for d in strides],
            "box": [int(b.value) for b in box], "element_strides": [int(e.value) for e in elements],
            "interleave": int(attrs.interleave), "swizzle": int(attrs.swizzle),
            "l2_promotion": int(attrs.l2_promotion), "oob_fill": int(attrs.oob_fill),
        }, sort_keys=True)
    return maps


def _ffi_kernel_call(call: Any) -> tuple[str, list[Any], dict[str, Any]]:
    """A ``tirx.call_ffi_kernel`` call -> (symbol, operands, launch extents by thread tag)."""
    tags = list(call.attrs.launch_params)
    values = [t for t in tags if t in _VALUE_TAGS]
    unknown = [t for t in tags if t not in _VALUE_TAGS]
    if unknown:
        raise CompileError(f"kernel launch uses launch parameters {unknown} that host-side "
                           "launchers do not support")
    args = list(call.args)
    operands, extents = args[1:len(args) - len(values)], args[len(args) - len(values):]
    return str(args[0].value), operands, dict(zip(values, extents))


def captured_launches(mod: Any) -> list[dict[str, Any]]:
    """The launches CaptureLaunchMetadata recorded on ``mod`` (symbol, args, grid, block,
    dynamic_smem as Python expressions); empty before it ran."""
    value = mod.attrs.get(LAUNCHES_ATTR) if mod.attrs is not None else None
    return json.loads(str(value)) if value is not None else []


def CaptureLaunchMetadata(host_calls: bool = False) -> Any:
    """host_calls: also record direct calls of module functions (see the module docstring)."""
    import tvm

    def run(mod: Any, ctx: Any) -> Any:
        from ...transform.grid_dependencies import cooperative_kernels

        launches = []
        for _, func in mod.functions.items():
            attrs = func.attrs
            if attrs is not None and attrs.get("tirx.is_global_func", False):
                continue
            launches.extend(_launches_of(func, host_calls))
        cooperative = cooperative_kernels(mod)
        for launch in launches:
            if launch["symbol"] in cooperative:  # T.sync_grid: every block resident at once
                launch["cooperative"] = True
        return mod.with_attr(LAUNCHES_ATTR, json.dumps(launches))

    return tvm.transform.module_pass(run, opt_level=0, name="tl.CaptureLaunchMetadata")

"""Launch plans: everything a call needs to launch one device kernel, prepared at load time.

A :class:`tilelang.engine.artifact.KernelLaunch` describes a launch with Python
expressions over the kernel's scalar parameters and symbolic dimensions (written by
``tilelang.backend.pass_pipeline.launch_metadata.python_expr``). For each launch we emit
ONE small Python function, compiled once::

    def _launch_values(A, B, C, M):
        return (((M + 31) // 32), 1, 1, 128, 1, 1, 0,
                (A.data_ptr(), B.data_ptr(), C.data_ptr(), M))

so that a call computes grid, block, dynamic shared memory and every kernel operand with a
single Python call, instead of walking expression trees. The operands are then written
with one ``struct.pack_into`` into storage allocated once, which the ``void**`` parameter
array handed to ``cuLaunchKernel`` points into.

Why compiling generated source (``compile``/``exec``) is acceptable here: the expressions
come from our own compiler, in this process or from the kernel cache, whose entry also
holds the cubin this process is about to run, so they carry no less trust than the kernel.
Still, each expression is parsed and checked against the small grammar python_expr
produces (names of scalar parameters and symbolic dimensions, numeric constants,
arithmetic, comparisons, conditional expressions, min/max/int/float) before it is compiled,
and the function runs with empty builtins: a corrupt entry fails with a CompileError.
"""

from __future__ import annotations

import ast
import ctypes
import keyword
import linecache
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilelang.errors import CompileError
from tilelang.plugin import CompiledArtifact, KernelLaunch

#: arg_types -> struct format character (standard sizes, little-endian like every CUDA host)
ARG_FORMATS: dict[str, str] = {
    "handle": "Q",  # a device pointer: 8 bytes
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float16": "e",
    "bfloat16": "H",  # the bits, from _bfloat16_bits
    "float32": "f",
    "float64": "d",
    "tensormap": "128s",  # a TMA CUtensorMap, by value (tensor_map.py)
}

# The builtins generated code may call, under names no kernel parameter takes.
_CALLS = {"min": "__tl_min", "max": "__tl_max", "int": "__tl_int", "float": "__tl_float"}
_PREFIX = "__tl_"
_ALLOWED = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp, ast.Call,
    ast.Name, ast.Constant, ast.Load,
    ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Div, ast.USub, ast.UAdd, ast.Not,
    ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq, ast.And, ast.Or,
)


def _bfloat16_bits(value: float) -> int:
    """float -> bfloat16 bits, rounding to nearest even like __float2bfloat16."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return 0x7FC0  # NaN
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


_GLOBALS: dict[str, Any] = {
    "__builtins__": {},
    "__tl_min": min,
    "__tl_max": max,
    "__tl_int": int,
    "__tl_float": float,
    "__tl_bfloat16": _bfloat16_bits,
}


class _Rejected(Exception):
    """An expression outside the grammar (internal: becomes a CompileError)."""


class _Rewriter(ast.NodeTransformer):
    """Checks an expression against the grammar and renames its names."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit(self, node: ast.AST) -> ast.AST:
        if not isinstance(node, _ALLOWED):
            raise _Rejected(f"{type(node).__name__} is not allowed")
        return super().visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if not isinstance(node.func, ast.Name) or node.func.id not in _CALLS or node.keywords:
            raise _Rejected("only min, max, int and float may be called")
        node.func = ast.Name(_CALLS[node.func.id], ast.Load())
        node.args = [self.visit(a) for a in node.args]
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.names:
            raise _Rejected(f"unknown name {node.id!r}")
        return ast.Name(self.names[node.id], ast.Load())

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if type(node.value) not in (int, float, bool):
            raise _Rejected(f"constant {node.value!r} is not a number")
        return node


def _safe(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith(_PREFIX)


@dataclass(frozen=True)
class LaunchValues:
    """The generated function of one launch and what it was generated from."""

    symbol: str
    source: str
    function: Callable[..., tuple[Any, ...]]
    arg_types: tuple[str, ...]
    operands: tuple[str, ...]  # the metadata's operand expressions, for error messages
    constant_smem: int | None  # the dynamic shared memory size when it is a constant
    cooperative: bool = False  # every block resident at once (T.sync_grid): cuLaunchCooperativeKernel


def launch_values(artifact: CompiledArtifact, launch: KernelLaunch) -> LaunchValues:
    """Generate and compile ``_launch_values(<params>, <symbols>)`` for one launch.

    It returns ``(gx, gy, gz, bx, by, bz, dynamic_smem, operands)`` where ``operands`` holds
    a data pointer (int) per ``"param:<i>"`` operand and the value of every other one,
    converted for packing (bfloat16 -> bits). Call it as ``function(*call_args, **symbols)``
    with ArgumentBinder.bind's results. Raises CompileError for metadata it cannot use.
    """
    where = f"kernel {artifact.kernel_name!r}, launch of {launch.symbol!r}"
    symbols = artifact.input_symbols
    names: dict[str, str] = {}  # metadata name -> name in the generated source
    signature: list[str] = []
    for i, param in enumerate(artifact.params):
        local = param.name if _safe(param.name) else f"{_PREFIX}p{i}"
        signature.append(local)
        if not param.is_tensor:
            names[param.name] = local
    for symbol in symbols:
        if not _safe(symbol) or symbol in signature:
            raise CompileError(f"{where}: symbolic dimension {symbol!r} cannot be passed by name "
                               "(not an identifier, or also a parameter's name); rename it")
        signature.append(symbol)
        names[symbol] = symbol
    if len(launch.args) != len(launch.arg_types):
        raise CompileError(f"{where}: {len(launch.args)} operands but {len(launch.arg_types)} arg_types")

    def expr(text: str, what: str) -> str:
        try:
            tree = ast.parse(text, mode="eval")
            return ast.unparse(_Rewriter(names).visit(tree))
        except (SyntaxError, _Rejected) as err:
            raise CompileError(f"{where}: {what} {text!r} cannot be evaluated on the host ({err}); "
                               "the launch metadata is corrupt or uses a name no argument binds "
                               "(symbolic strides?)") from None

    operands = []
    encoders: dict[str, Any] = {}  # generated name -> TensorMapEncoder
    for k, (arg, arg_type) in enumerate(zip(launch.args, launch.arg_types)):
        if arg_type == "tensormap":
            operands.append(_tensor_map_operand(arg, k, artifact, signature, expr, encoders, where))
            continue
        if arg_type not in ARG_FORMATS:
            raise CompileError(f"{where}: operand #{k} ({arg}) has type {arg_type!r}, which nvrtc "
                               f"cannot pass; supported: {', '.join(ARG_FORMATS)}")
        if arg.startswith("param:"):
            index = int(arg.removeprefix("param:")) if arg[6:].isdigit() else -1
            if not 0 <= index < len(artifact.params) or not artifact.params[index].is_tensor:
                raise CompileError(f"{where}: operand #{k} {arg!r} names no tensor parameter")
            operands.append(f"{signature[index]}.data_ptr()")
        else:
            value = expr(arg, f"operand #{k}")
            operands.append(f"{_PREFIX}bfloat16({value})" if arg_type == "bfloat16" else value)
    if len(launch.grid) != 3 or len(launch.block) != 3:
        raise CompileError(f"{where}: grid and block need three extents each")
    extents = [expr(e, "grid extent") for e in launch.grid] + [expr(e, "block extent") for e in launch.block]
    smem = expr(launch.dynamic_smem, "dynamic shared memory size")
    source = _emit(signature, extents, smem, operands)
    filename = f"<tilelang-nvrtc {artifact.kernel_name}:{launch.symbol}>"
    namespace = dict(_GLOBALS)
    namespace.update(encoders)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - see the module docstring
    # tracebacks through the generated function show its source
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    constant = None
    if not any(isinstance(n, ast.Name) for n in ast.walk(ast.parse(smem, mode="eval"))):
        constant = int(eval(smem, dict(_GLOBALS)))  # checked above: no names, no calls but min/max/int/float
    return LaunchValues(launch.symbol, source, namespace["_launch_values"], tuple(launch.arg_types),
                        tuple(launch.args), constant, launch.cooperative)


def _tensor_map_operand(arg: str, k: int, artifact: CompiledArtifact, signature: list[str],
                        expr: Callable[[str, str], str], encoders: dict[str, Any], where: str) -> str:
    """The generated call that encodes operand #k's tensor map (a ``"tensormap:<json>"``
    operand of core's launch metadata) from its tensor's address, dimensions and strides."""
    import json

    from .tensor_map import TensorMapEncoder

    try:
        recipe = json.loads(arg.removeprefix("tensormap:"))
        index, rank = int(recipe["param"]), int(recipe["rank"])
        dims, strides = list(recipe["dims"]), list(recipe["strides"])
    except (ValueError, KeyError, TypeError) as err:
        raise CompileError(f"{where}: operand #{k} is a corrupt tensor-map recipe ({err})") from None
    if not 0 <= index < len(artifact.params) or not artifact.params[index].is_tensor or \
            len(dims) != rank or len(strides) != rank - 1:
        raise CompileError(f"{where}: operand #{k}'s tensor map names no tensor parameter or has the wrong rank")
    name = f"{_PREFIX}tensor_map{k}"
    encoders[name] = TensorMapEncoder(recipe, where)
    dims_text = ", ".join(expr(str(d), f"operand #{k} dimension") for d in dims)
    strides_text = ", ".join(expr(str(d), f"operand #{k} stride") for d in strides)
    return f"{name}({signature[index]}.data_ptr(), ({dims_text},), ({strides_text}{',' if strides else ''}))"


def _emit(signature: list[str], extents: list[str], smem: str, operands: list[str]) -> str:
    lines = [f"def _launch_values({', '.join(signature)}):", "    return ("]
    lines += [f"        {e}," for e in extents]
    lines.append(f"        {smem},")
    lines.append("        (" + ", ".join(operands) + ("," if len(operands) == 1 else "") + "),")
    lines.append("    )")
    return "\n".join(lines) + "\n"


class OperandBuffer:
    """Preallocated storage for one launch's operands and the ``void**`` array that
    ``cuLaunchKernel`` reads (one pointer per kernel parameter, into the storage).

    ``pack(*operands)`` writes all operands with a single ``struct.pack_into``; the driver
    copies the values at launch time, so the storage is reused by the next call.
    """

    def __init__(self, arg_types: tuple[str, ...]) -> None:
        fmt, offsets, offset = "<", [], 0
        for arg_type in arg_types:
            code = ARG_FORMATS[arg_type]
            size = struct.calcsize("<" + code)
            pad = -offset % size  # natural alignment of each operand
            fmt += "x" * pad + code
            offset += pad
            offsets.append(offset)
            offset += size
        self.format = struct.Struct(fmt)
        self.offsets = tuple(offsets)
        self.storage = (ctypes.c_char * max(offset, 1))()
        base = ctypes.addressof(self.storage)
        self.params = (ctypes.c_void_p * max(len(offsets), 1))(*[base + o for o in offsets])
        # NULL kernelParams for a kernel without parameters
        self.params_address = ctypes.addressof(self.params) if offsets else 0

    def pack(self, *operands: Any) -> None:
        self.format.pack_into(self.storage, 0, *operands)

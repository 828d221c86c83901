"""The ``@cute.jit`` launch function of a generated module: tensors arrive as typed pointers
(``make_ptr`` per call is the cheapest conversion of a torch tensor: from_dlpack costs about
4x more per call, measured on the H200, issue 12), then the scalars the launches need as
their CuTe DSL types — scalar parameters and symbolic dimensions alike, named in the
module's ``LAUNCH_SCALARS`` ((name, type) pairs, the execution backend's contract) — and
the stream. Each scalar is also bound under its own name, so that grid, block and tensor
sizes (Python expressions over those names, from the launch metadata) read as written."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from tilelang.plugin import CompileError

from . import cute_tma
from .cute_emit import dtype_of

#: names the launch function defines itself
RESERVED = {"cute", "cutlass", "cuda", "stream", "launch"}


def flat_size(buffer: Any, kernel: str) -> str:
    """The element count of a parameter buffer: an int, or a Python expression over the
    symbolic dimensions (non-negative, so // and % round alike on device values)."""
    from tilelang.plugin import python_expr
    from tvm import tirx

    size: Any = buffer.shape[0] if len(buffer.shape) else tirx.const(1, "int32")
    for d in list(buffer.shape)[1:]:
        size = size * d
    try:
        # a cast of a dimension (int(M)) is its value here: the launch's scalars are integers
        return python_expr(tvm_simplify(size)).replace("int(", "(")
    except Exception as err:  # python_expr names what it cannot write
        raise CompileError(f"cutedsl codegen, kernel {kernel!r}: buffer {buffer.name!r} has the extent "
                           f"{list(buffer.shape)}, which the launch cannot compute: {err}") from err


def tvm_simplify(expr: Any) -> Any:
    from tvm.sym.analyzer import Analyzer

    return Analyzer().simplify(expr)


def _names(expr: str) -> list[str]:
    tree = ast.parse(expr, mode="eval")
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called]


def launch_scalars(launches: list[dict[str, Any]], printers: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, CuTe DSL type) of every scalar the launch function takes, in order: the
    launches' scalar operands first, then names only their sizes use (int32)."""
    found: dict[str, str] = {}
    for launch in launches:
        printer = printers.get(launch["symbol"])
        for arg, param in zip(launch["args"], printer.func.params if printer is not None else ()):
            if arg.startswith("param:"):
                continue
            if type(param.ty).__name__ == "PointerType":  # `a_ptr: T.ptr`, a bare address
                raise CompileError(f"cutedsl codegen: kernel {launch['symbol']!r} takes the pointer parameter "
                                   f"{arg!r} (T.ptr); this backend takes tensors as typed CuTe tensors only. "
                                   "Declare it T.Tensor(shape, dtype), or compile the kernel for cuda")
            if not arg.isidentifier():
                raise CompileError(f"cutedsl codegen: kernel {launch['symbol']!r} takes the scalar operand {arg!r}; "
                                   "this backend passes scalars as they are, not expressions of them")
            found.setdefault(arg, dtype_of(param.ty.dtype, f"scalar operand {arg!r}"))
    for launch in launches:
        printer = printers.get(launch["symbol"])
        sizes = [size for size, _ in printer.param_sizes.values()] if printer is not None else []
        for expr in [*launch["grid"], *launch["block"], *sizes]:
            for name in _names(expr):
                found.setdefault(name, "cutlass.Int32")
    clash = sorted(RESERVED & set(found)) + sorted(n for n in found if n.startswith("s_") or n[1:].isdigit())
    if clash:
        raise CompileError(f"cutedsl codegen: the launch needs the names {clash}, which the generated launch "
                           "function uses itself; rename them in the kernel")
    return list(found.items())


def launch_function(launches: list[dict[str, Any]], printers: dict[str, Any]) -> list[str]:
    params = sorted({int(a.split(":")[1]) for launch in launches for a in launch["args"] if a.startswith("param:")})
    scalars = launch_scalars(launches, printers)
    signature = [*(f"p{i}: cute.Pointer" for i in params), *(f"s_{n}: {t}" for n, t in scalars)]
    out = [f"LAUNCH_SCALARS = {tuple((n, t.split('.')[-1]) for n, t in scalars)!r}", "", "",
           "@cute.jit", f"def launch({', '.join(signature)}, stream: cuda.CUstream):"]
    out += [f"    {name} = s_{name}" for name, _ in scalars]
    for launch in launches:
        out.extend(_launch_lines(launch, printers))
    if not launches:
        out.append("    pass")
    return out


def _launch_lines(launch: dict[str, Any], printers: dict[str, Any]) -> Iterator[str]:
    symbol = launch["symbol"]
    printer = printers.get(symbol)
    if printer is None:
        raise CompileError(f"cutedsl codegen: launch of {symbol!r}, which is not a device kernel of this module")
    operands = []
    for arg, param in zip(launch["args"], printer.params):
        if not arg.startswith("param:"):
            operands.append(arg)
            continue
        size = printer.param_sizes.get(param, ("1", ""))[0]
        # a flat view: TIR indexes every buffer by its row-major offset
        operands.append(f"cute.make_tensor(p{arg.split(':')[1]}, cute.make_layout({size}))")
    pointers = {param: f"p{arg.split(':')[1]}" for arg, param in zip(launch["args"], printer.params)
                if arg.startswith("param:")}
    for atom in printer.tma_atoms.values():  # each launch encodes its tensor maps (cute_tma.py)
        yield from ("    " + line for line in cute_tma.host_atom(atom["name"], f"{atom['name']}_tensor",
                                                                 pointers[atom["tensor"]], atom["view"],
                                                                 atom["smem_layout"], atom["shape"]))
        operands += [atom["name"], f"{atom['name']}_tensor"]
    grid, block = (f"[{', '.join(launch[k])}]" for k in ("grid", "block"))
    smem = printer.smem_bytes + (1024 if printer.has_smem else 0)  # room to align the first tile
    yield f"    {symbol}({', '.join(operands)}).launch(grid={grid}, block={block}, smem={smem}, stream=stream)"

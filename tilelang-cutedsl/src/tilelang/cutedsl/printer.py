"""Lowered device TIR -> CuTe DSL Python (``@cute.kernel`` per device kernel, one ``@cute.jit``
launcher that launches them in order).

What reaches here is the CUDA pipeline's output without vectorization: flat buffers,
thread-bound ``launch_thread`` scopes, serial loops, scalar loads and stores, block barriers.
Each global buffer is a 1-D view of the caller's tensor (``cute.make_tensor`` over its
iterator, so that TIR's row-major flat offsets index it), each shared buffer a tensor from
CuTe's ``SmemAllocator`` (in a swizzled ``ComposedLayout`` when ``T.ext.swizzled_shared``
asked for it), each local buffer a register tensor (``cute.make_rmem_tensor``). Anything
else is a CompileError naming the construct, never silently wrong code.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tilelang.plugin import ALIGNMENT_ATTR, CompileError

from . import atomics, cute_emit, tma_ring
from .cute_emit import dtype_of
from .cute_statements import CuteStatements
from .gemm import MMA_ATTR, WGMMA_ATTR
from .launch_source import flat_size, launch_function
from .stages import STAGES_ATTR
from .transform import SWIZZLE_ATTR
from .vector_access import VectorAccesses

THREAD_TAGS = {
    "threadIdx.x": "cute.arch.thread_idx()[0]", "threadIdx.y": "cute.arch.thread_idx()[1]",
    "threadIdx.z": "cute.arch.thread_idx()[2]", "blockIdx.x": "cute.arch.block_idx()[0]",
    "blockIdx.y": "cute.arch.block_idx()[1]", "blockIdx.z": "cute.arch.block_idx()[2]",
}
# FloorDiv is Python's // in both of CuTe DSL's worlds (trace-time ints and arith.floordivsi);
# % is not (trace-time ints floor, arith.remsi truncates), so FloorMod, Div and Mod on
# integers go through the helpers of INTEGER_HELPERS
BINARY = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^",
          "EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "And": "&", "Or": "|"}
CALL_BINARY = {"tirx.shift_right": ">>", "tirx.shift_left": "<<", "tirx.bitwise_and": "&",
               "tirx.bitwise_or": "|", "tirx.bitwise_xor": "^"}
MATH = {"tirx.exp": "exp", "tirx.exp2": "exp2", "tirx.log": "log", "tirx.log2": "log2", "tirx.log10": "log10",
        "tirx.sqrt": "sqrt", "tirx.rsqrt": "rsqrt", "tirx.fabs": "abs", "tirx.tanh": "tanh", "tirx.sin": "sin",
        "tirx.cos": "cos", "tirx.floor": "floor", "tirx.ceil": "ceil", "tirx.pow": "pow", "tirx.erf": "erf",
        "tirx.round": "round", "tirx.trunc": "trunc", "tirx.nearbyint": "roundeven"}
INTEGER_HELPERS = '''

def _tl_floormod(a, b):
    return a - (a // b) * b


def _tl_truncdiv(a, b):
    q = a // b
    r = a - q * b
    return cutlass.select_((r != 0) & ((a < 0) != (b < 0)), q + 1, q)


def _tl_truncmod(a, b):
    return a - _tl_truncdiv(a, b) * b
'''
INTEGER_OPS = {"FloorMod": "_tl_floormod", "Div": "_tl_truncdiv", "Mod": "_tl_truncmod"}
SHARED, LOCAL = ("shared", "shared.dyn"), ("local", "local.fragment", "local.var")
VECTORIZED, UNROLLED = 2, 3  # tirx.ForKind's (without importing TVM at module import)
UNROLL_LIMIT = 32  # iterations; longer constant loops stay loops
SMEM_ALIGN = 128  # bytes; 1024 for swizzled tiles, whose pattern repeats over absolute addresses


def canonical_op(name: str) -> str:
    """TVM registers some builtins as ``prim.*`` (``prim.if_then_else``): one spelling."""
    return "tirx." + name[5:] if name.startswith("prim.") else name


def _literal(value: float) -> str:
    """A Python literal; inf and nan (a max reduction's identity is -inf) as float('...')."""
    return repr(value) if math.isfinite(value) else f"float('{value}')"


class KernelPrinter(CuteStatements, VectorAccesses):
    """Prints one device PrimFunc as a ``@cute.kernel`` function."""

    def __init__(self, name: str, func: Any, swizzles: dict[str, list[int]],
                 mma: dict[str, dict[str, Any]] | None = None, stages: dict[str, int] | None = None,
                 wgmma_tiles: dict[str, dict[str, Any]] | None = None, alignment: int = 0) -> None:
        self.name, self.func = name, func
        self.stages = stages or {}  # staged tile name -> stages (stages.py)
        self.wgmma_tiles = wgmma_tiles or {}  # tile name -> its GMMA layout (gemm.py)
        self.stage_sizes: dict[str, int] = {}  # printed tile name -> elements of one stage
        self.alignment = alignment  # bytes every tensor argument is aligned to (the binder checks)
        self.vector_loads: dict[tuple[int, str], tuple[str, str]] = {}  # of the vector loop printed now
        self.vector_var: Any = None
        self.constexpr_vars: set[int] = set()  # loop variables that are Python ints while tracing
        self.vector_binds: list[tuple[Any, Any]] = []
        self.stage_align: dict[str, int] = {}  # printed tile name -> alignment of each of its stages
        self.mma = mma or {}  # accumulator buffer name -> its tiled MMA (gemm.py)
        self.mma_names: dict[str, str] = {}  # accumulator buffer name -> tiled MMA variable
        self.prologue: list[str] = []
        self.buffer_names: dict[str, str] = {}  # printed name -> the buffer's own name
        self.dtypes: dict[str, Any] = {}  # printed name -> dtype
        self.names: dict[int, str] = {}
        self.used: set[str] = {"cute", "cutlass", "smem"}
        self.lines: list[str] = []
        self.smem_bytes = 0
        self.has_smem = False
        self.swizzles = swizzles
        self.guards: list[str] = []  # conditions of the if_then_else branches being printed
        self.tma_rings: dict[int, int] = {}  # TMA ring id -> stages (tma_ring.py)
        self.tma_atoms: dict[tuple[str, str], dict[str, Any]] = {}  # (tensor, tile) -> its TMA atom
        self.params = [self.bind(p) for p in func.params]
        self.param_sizes: dict[str, tuple[int, str]] = {}

    # -- names ----------------------------------------------------------------------------
    def bind(self, var: Any) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in str(var.name)) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, i = base, 1
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        self.names[hash(var)] = name
        return name

    def var(self, var: Any) -> str:
        name = self.names.get(hash(var))
        if name is None:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: variable {var.name!r} is used before "
                               "it is defined (a construct this printer does not follow)")
        return name

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    # -- statements -----------------------------------------------------------------------
    def stmt(self, node: Any, depth: int) -> None:
        kind = type(node).__name__
        handler = getattr(self, f"stmt_{kind}", None)
        if handler is None:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: statement {kind} is not supported:\n{node}")
        handler(node, depth)

    def stmt_SeqStmt(self, node: Any, depth: int) -> None:
        for s in node.seq:
            self.stmt(s, depth)

    def stmt_DeclBuffer(self, node: Any, depth: int) -> None:
        # TVM 0.27: ``buffer.data`` is a ``tirx.buffer_data`` call; the statement holds the var
        buffer = node.buffer
        data = self.names.get(hash(node.data))
        if data is None or data not in self.params:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: buffer {buffer.name!r} views memory "
                               "that is not a kernel parameter")
        self.param_sizes[data] = (flat_size(buffer, self.name), str(buffer.dtype))
        self.names[hash(buffer)] = data
        self.dtypes[data] = buffer.dtype

    def stmt_AllocBuffer(self, node: Any, depth: int) -> None:
        buffer = node.buffer
        scope, size = buffer.scope(), 1
        for d in buffer.shape:
            size *= int(d)
        name, dtype = self.bind(buffer), dtype_of(buffer.dtype, f"buffer {buffer.name!r}")
        self.buffer_names[name], self.dtypes[name] = str(buffer.name), buffer.dtype
        if scope in LOCAL and str(buffer.name) in self.mma:
            for line in cute_emit.accumulator(name, self.tiled_mma(str(buffer.name)), self.mma[str(buffer.name)]):
                self.emit(depth, line)
            return
        if scope in SHARED and str(buffer.name) in self.wgmma_tiles:
            tile = self.wgmma_tiles[str(buffer.name)]
            size *= tile["stages"]
            self.has_smem = True
            self.smem_bytes = -(-self.smem_bytes // 1024) * 1024 + size * buffer.dtype.bits // 8
            for line in cute_emit.wgmma_tile(name, tile, dtype):
                self.emit(depth, line)
            return
        if scope in SHARED:
            self.stage_sizes[name] = size
            size *= self.stages.get(str(buffer.name), 1)
            layout = f"cute.make_layout({size})"
            align = SMEM_ALIGN
            swizzle = self.swizzles.get(str(buffer.name))
            if swizzle is not None:
                bits, base, shift = swizzle
                layout = f"cute.make_composed_layout(cute.make_swizzle({bits}, {base}, {shift}), 0, {layout})"
                align = 1024
            self.has_smem = True
            self.smem_bytes = -(-self.smem_bytes // align) * align + size * buffer.dtype.bits // 8
            stage_bytes = size // self.stages.get(str(buffer.name), 1) * buffer.dtype.bits // 8
            self.stage_align[name] = min(align, stage_bytes & -stage_bytes)
            self.emit(depth, f"{name} = smem.allocate_tensor({dtype}, {layout}, byte_alignment={align})")
        elif scope in LOCAL:
            self.emit(depth, f"{name} = cute.make_rmem_tensor(cute.make_layout({size}), {dtype})")
        else:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: buffer {buffer.name!r} in scope {scope!r}")

    def stmt_AttrStmt(self, node: Any, depth: int) -> None:
        if node.attr_key == "thread_extent":
            tag = str(node.node.thread_tag)
            if tag not in THREAD_TAGS:
                raise CompileError(f"cutedsl codegen, kernel {self.name!r}: thread tag {tag!r}")
            self.emit(depth, f"{self.bind(node.node.var)} = {THREAD_TAGS[tag]}")
        self.stmt(node.body, depth)

    def stmt_Bind(self, node: Any, depth: int) -> None:
        value = self.expr(node.value)
        self.emit(depth, f"{self.bind(node.var)} = {value}")

    def stmt_LetStmt(self, node: Any, depth: int) -> None:
        self.stmt_Bind(node, depth)
        self.stmt(node.body, depth)

    def stmt_For(self, node: Any, depth: int) -> None:
        if node.kind == VECTORIZED and self.vector_loop(node, depth):
            return
        start, extent = self.expr(node.min), self.expr(node.extent)
        stop = extent if start == "0" else f"{start} + {extent}"
        # short constant loops unroll while tracing, so that a register tensor's index is a
        # constant (a dynamic index would put the tensor in local memory)
        short = start.isdigit() and extent.isdigit() and int(extent) <= UNROLL_LIMIT
        # a main loop of CuTe copies and GEMMs stays a loop: unrolled, it is compiled per trip
        short = short and "tl_cute_" not in str(node.body) or node.kind == UNROLLED
        loop = "cutlass.range_constexpr" if short else "range"
        if short:
            self.constexpr_vars.add(hash(node.loop_var))
        self.emit(depth, f"for {self.bind(node.loop_var)} in {loop}({start}, {stop}):")
        self.body(node.body, depth + 1)

    def stmt_IfThenElse(self, node: Any, depth: int) -> None:
        self.emit(depth, f"if {self.expr(node.condition)}:")
        self.body(node.then_case, depth + 1)
        if node.else_case is not None:
            self.emit(depth, "else:")
            self.body(node.else_case, depth + 1)

    def stmt_BufferStore(self, node: Any, depth: int) -> None:
        self.emit(depth, f"{self.load_target(node.buffer, node.indices)} = {self.expr(node.value)}")

    def stmt_Evaluate(self, node: Any, depth: int) -> None:
        value = node.value
        if type(value).__name__ == "IntImm":
            return
        op = getattr(getattr(value, "op", None), "name", None)
        if op == "tirx.tvm_storage_sync":
            self.emit(depth, "cute.arch.sync_threads()")
            return
        if op == "tirx.tvm_access_ptr" and int(value.args[4].value) == 0:
            return  # an address of no access: it only kept a tile's bytes its own (core's block passes)
        if op == "tirx.call_extern" and str(value.args[0].value).startswith(atomics.PREFIX):
            self.emit(depth, self.expr(value))  # the previous value, unused
            return
        if op == "tirx.call_extern" and str(value.args[0].value).startswith("tl_cute_"):
            for line in self.cute_statement(str(value.args[0].value), list(value.args[1:])):
                self.emit(depth, line)
            return
        raise CompileError(f"cutedsl codegen, kernel {self.name!r}: statement {value} is not supported")

    def body(self, node: Any, depth: int) -> None:
        before = len(self.lines)
        self.stmt(node, depth)
        if len(self.lines) == before:
            self.emit(depth, "pass")

    # -- expressions ----------------------------------------------------------------------
    def load_target(self, buffer: Any, indices: Any) -> str:
        if len(indices) != 1:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: buffer {buffer.name!r} is not flat")
        index = indices[0]
        if type(index).__name__ in ("Ramp", "Broadcast"):
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: vector access to {buffer.name!r}")
        name = self.names.get(hash(buffer))
        if name is None:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: buffer {buffer.name!r} is used "
                               "before it is declared")
        element = self.vector_element(buffer, index)
        if element is not None:
            return element
        if self.guards:
            # if_then_else is lazy and select_ is not: under a false guard, read offset 0
            # (always inside the tensor) instead of the offset the guard protects
            guard = " & ".join(self.guards)
            return f"{name}[cutlass.select_({guard}, {self.expr(index)}, 0)]"
        return f"{name}[{self.expr(index)}]"

    def expr(self, node: Any) -> str:
        kind = type(node).__name__
        if kind == "IntImm":
            if str(node.dtype) == "bool":
                return "True" if node.value else "False"
            value = int(node.value)
            return str(value) if str(node.dtype) == "int32" else f"{dtype_of(node.dtype, 'a constant')}({value})"
        if kind == "FloatImm":
            return f"{dtype_of(node.dtype, 'a constant')}({_literal(float(node.value))})"
        if kind in ("Var", "SizeVar"):
            return self.var(node)
        if kind in ("BufferLoad", "TensorLoad"):
            return self.load_target(getattr(node, "buffer", None) or node.source, node.indices)
        if kind in BINARY:
            return f"({self.expr(node.a)} {BINARY[kind]} {self.expr(node.b)})"
        if kind in INTEGER_OPS:
            if str(node.dtype).startswith(("float", "bfloat")):
                if kind != "Div":
                    raise CompileError(f"cutedsl codegen, kernel {self.name!r}: {kind} of floating-point values")
                return f"({self.expr(node.a)} / {self.expr(node.b)})"
            return f"{INTEGER_OPS[kind]}({self.expr(node.a)}, {self.expr(node.b)})"
        if kind in ("Min", "Max"):
            return f"cutlass.{kind.lower()}({self.expr(node.a)}, {self.expr(node.b)})"
        if kind == "Not":
            return f"(~{self.expr(node.a)})"
        if kind == "BitwiseNot":  # XOR with all ones: ~ is the printer's Boolean not
            bits = node.dtype.bits
            ones = (1 << bits) - 1 if str(node.dtype).startswith("uint") else -1
            return f"({self.expr(node.a)} ^ {dtype_of(node.dtype, 'a bitwise not')}({ones}))"
        if kind == "Cast":
            target = dtype_of(node.dtype, "a cast")
            inner = node.value
            if type(inner).__name__ in ("IntImm", "FloatImm"):
                return f"{target}({_literal(inner.value)})"
            if self.trace_time(inner):  # a Python int while tracing: no .to
                return f"{target}({self.expr(inner)})"
            return f"({self.expr(inner)}).to({target})"
        if kind == "Select":
            return self.select(node.dtype, node.condition, node.true_value, node.false_value)
        if kind == "Call":
            return self.call(node)
        raise CompileError(f"cutedsl codegen, kernel {self.name!r}: expression {kind} is not supported: {node}")

    def trace_time(self, expr: Any) -> bool:
        """Every variable of ``expr`` is a range_constexpr loop's (so it is a Python int)."""
        import tvm_ffi
        from tvm import tirx

        found: list[bool] = []
        tvm_ffi.structural_walk(expr, (tirx.Var, lambda v: found.append(hash(v) in self.constexpr_vars)))
        return bool(found) and all(found)

    def select(self, dtype: Any, cond: Any, a: Any, b: Any) -> str:
        return (f"{dtype_of(dtype, 'a select')}(cutlass.select_({self.expr(cond)}, {self.expr(a)}, "
                f"{self.expr(b)}))")

    def call(self, node: Any) -> str:
        op = canonical_op(node.op.name)
        args = list(node.args)
        if op in CALL_BINARY:
            return f"({self.expr(args[0])} {CALL_BINARY[op]} {self.expr(args[1])})"
        if op == "tirx.call_extern" and str(args[0].value) == tma_ring.PRODUCER:
            # a whole warp: CuTe's TMA copy elects its issuing lane itself (elect.sync over all 32)
            return "(cute.arch.make_warp_uniform(cute.arch.warp_idx()) == 0)"
        if op == "tirx.call_extern" and str(args[0].value) == "tl_cute_acc_coord":  # epilogue.py
            accumulator = self.operand(args[1])[0]
            return f"{accumulator}_coord[{self.expr(args[2])}][{self.expr(args[3])}]"
        if op == "tirx.call_extern" and str(args[0].value).startswith(atomics.PREFIX):
            name, rest = str(args[0].value), args[1:]
            if name == atomics.PREFIX + "ordered":  # (order, the atomic call)
                inner = rest[1]
                return atomics.atomic_call(self, str(inner.args[0].value), list(inner.args[1:]), int(rest[0].value))
            return atomics.atomic_call(self, name, rest)
        if op in MATH:
            return f"cute.math.{MATH[op]}({', '.join(self.expr(a) for a in args)})"
        if op == "tirx.if_then_else":
            cond = self.expr(args[0])
            self.guards.append(cond)
            a = self.expr(args[1])
            self.guards[-1] = f"(~{cond})"
            b = self.expr(args[2])
            self.guards.pop()
            return f"{dtype_of(node.dtype, 'a select')}(cutlass.select_({cond}, {a}, {b}))"
        if op in ("tirx.likely", "tirx.tvm_thread_invariant"):  # hints to TVM's passes
            return self.expr(args[0])
        if op == "tirx.sigmoid":
            x = self.expr(args[0])
            return f"({dtype_of(node.dtype, 'sigmoid')}(1.0) / ({dtype_of(node.dtype, 'sigmoid')}(1.0) + cute.math.exp(-{x})))"
        raise CompileError(f"cutedsl codegen, kernel {self.name!r}: call to {op} is not supported")

    def print(self) -> list[str]:
        types = [f"{dtype_of(p.ty.dtype, f'parameter {p.name!r}')}" if type(p.ty).__name__ == "PrimType"
                 else "cute.Tensor" for p in self.func.params]
        self.stmt(self.func.body, 1)
        params = [f"{p}: {t}" for p, t in zip(self.params, types)]
        for atom in self.tma_atoms.values():  # built by the launch function, after the tensors
            params += [f"{atom['name']}: cute.CopyAtom", f"{atom['name']}_tensor: cute.Tensor"]
        header = [f"@cute.kernel\ndef {self.name}({', '.join(params)}):"]
        self.lines[0:0] = ["    " + line for line in self.prologue]
        if self.has_smem:
            self.lines.insert(0, "    smem = cutlass.memory.SmemAllocator()")
        if not self.lines:
            self.lines.append("    pass")
        return header + self.lines


def _launches(mod: Any) -> list[dict[str, Any]]:
    attrs = mod.attrs
    raw = attrs.get("tilelang.launches") if attrs is not None else None
    if raw is None:
        raise CompileError("cutedsl codegen: the device module has no launch metadata (CaptureLaunchMetadata)")
    return json.loads(str(raw))


def launch_params(mod: Any) -> list[int]:
    """The host parameter indices ``launch`` takes, in order (one pointer each)."""
    return sorted({int(a.split(":")[1]) for launch in _launches(mod) for a in launch["args"]
                   if a.startswith("param:")})


def generate(mod: Any) -> str:
    """CuTe DSL source of every device kernel of ``mod`` plus ``launch(*pointers, stream)``."""
    printers: dict[str, KernelPrinter] = {}
    out = ["# CuTe DSL source generated by tilelang-cutedsl", "import cuda.bindings.driver as cuda",
           "import cutlass", "import cutlass.cute as cute", "import cutlass.memory", INTEGER_HELPERS]
    raw = mod.attrs.get(SWIZZLE_ATTR) if mod.attrs is not None else None
    swizzles = json.loads(str(raw)) if raw is not None else {}
    raw = mod.attrs.get(MMA_ATTR) if mod.attrs is not None else None
    mma = json.loads(str(raw)) if raw is not None else {}
    raw = mod.attrs.get(STAGES_ATTR) if mod.attrs is not None else None
    stages = json.loads(str(raw)) if raw is not None else {}
    raw = mod.attrs.get(ALIGNMENT_ATTR) if mod.attrs is not None else None
    alignment = int(raw) if raw is not None else 0
    raw = mod.attrs.get(WGMMA_ATTR) if mod.attrs is not None else None
    wgmma_tiles = json.loads(str(raw)) if raw is not None else {}
    if wgmma_tiles:
        out[-1:-1] = ["import cutlass.utils as utils", "import cutlass.utils.hopper_helpers as sm90_utils"]
    for gvar, func in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
        printer = KernelPrinter(gvar.name_hint, func, swizzles, mma, stages, wgmma_tiles, alignment)
        out += [*printer.print(), "", ""]
        printers[gvar.name_hint] = printer
    out += launch_function(_launches(mod), printers)
    return "\n".join(out) + "\n"

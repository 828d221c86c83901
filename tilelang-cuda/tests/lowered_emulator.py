"""A numpy interpreter for the CUDA device IR that the pipeline hands to codegen, so that
tensor-core and warp-shuffle kernels can be run, and checked against numpy, without a GPU.

It runs the lowered ``PrimFunc`` itself — every index, pointer offset, shuffle mask and
lane operand the passes emitted — not a model of what the passes mean to emit: one block
at a time, all of its threads in step, each value an array over the block's threads (a
second axis for vector lanes). Memory is bytes: global tensors are the caller's arrays,
shared memory one address space per block, local buffers one row per thread; memory
that nothing wrote reads as NaN (all bits set), and an access outside its buffer raises.

The instructions behind the backend's helpers (``tl_device.h``, the generated
``tl_wgmma_*``) are emulated from their definitions in the PTX ISA (ldmatrix, mma.sync
m16n8k16, cp.async groups, wgmma descriptors and fragments, shfl.sync.bfly) in
``lowered_instructions.py``. Threads run in lockstep, so a missing barrier goes unnoticed:
this checks the arithmetic of addresses and operands, not synchronization.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
import tvm.ir.prim.expr as E
import tvm_ffi
from tvm import tirx

_STORAGE = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "int8": np.int8,
            "uint8": np.uint8, "int16": np.int16, "uint16": np.uint16, "int32": np.int32,
            "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64, "bool": np.bool_,
            "bfloat16": np.uint16,  # bfloat16 as its bits: copied, never computed with (see _arith)
            "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8,  # so are the 8-bit floats
            "float8_e8m0fnu": np.uint8}
_BITS_ONLY = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu")
_FP8_KINDS = {"float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}  # (widened to floats by their bits)
_DTYPE = re.compile(r"^([a-z]+\d*(?:_[a-z0-9]+?)?)(?:x(\d+))?$")
_MATH = {"exp2f": np.exp2, "expf": np.exp, "__expf": np.exp, "exp2": np.exp2, "fabsf": np.abs,
         "sqrtf": np.sqrt, "rsqrtf": lambda v: 1 / np.sqrt(v), "logf": np.log, "log2f": np.log2, "__logf": np.log}


def _type_of(expr: Any) -> str:
    """The scalar type of an expression ("" for a Var whose type is not a plain dtype)."""
    try:
        dtype = getattr(expr, "dtype", None) or expr.ty.dtype  # a Var's type is its .ty
        return dtype_parts(dtype)[0]
    except (AttributeError, EmulationError):
        return ""


def _key(var: Any) -> int:
    """Variables index the interpreter's tables by identity (a Var's == builds an EQ node)."""
    return var.__chandle__()


class EmulationError(Exception):
    """The lowered kernel did something the hardware would not do, or that this emulator
    does not model (an unknown extern, a divergent warp instruction, an access out of
    bounds); the message says which statement and why."""


def dtype_parts(dtype: Any) -> tuple[str, int]:
    """("float16", 8) for float16x8."""
    match = _DTYPE.match(str(dtype))
    if match is None or match.group(1) not in _STORAGE:
        raise EmulationError(f"dtype {dtype} is not emulated")
    return match.group(1), int(match.group(2) or 1)


def storage(dtype: Any) -> np.dtype:
    return np.dtype(_STORAGE[dtype_parts(dtype)[0]])


def compute(values: np.ndarray, dtype: Any) -> np.ndarray:
    """Values of a TIR type in the numpy type arithmetic uses: integers in 64 bits, wrapped
    to the type's width as the GPU's registers wrap them (an int32 ``x << 28`` is negative)."""
    scalar, _ = dtype_parts(dtype)
    if scalar.startswith(("int", "uint")) and scalar != "uint64":
        values = np.asarray(values).astype(np.int64)
        bits = int(scalar.removeprefix("u").removeprefix("int"))
        if bits == 64:
            return values
        if scalar.startswith("u"):
            return values & ((1 << bits) - 1)
        return ((values + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))
    return np.asarray(values).astype(_STORAGE[scalar])


def bf16_floats(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 given as their bits (the top half of a float32)."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def bf16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bits of float values, rounded to nearest even as CUDA's __float2bfloat16."""
    x = np.asarray(values).astype(np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def fp8_values(bits: np.ndarray, kind: str) -> np.ndarray:
    """float64 values of 8-bit floats given as their bits: "e4m3" (OCP E4M3, bias 7, no
    infinities, S.1111.111 a NaN) or "e5m2" (bias 15, IEEE-style infinities and NaNs)."""
    bits = np.asarray(bits).astype(np.int64)
    mantissa_bits, bias = (3, 7) if kind == "e4m3" else (2, 15)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exponent = (bits >> mantissa_bits) & (0x7F >> mantissa_bits)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    scale = float(1 << mantissa_bits)
    normal = (1 + mantissa / scale) * np.exp2(exponent.astype(np.float64) - bias)
    values = np.where(exponent == 0, mantissa / scale * 2.0 ** (1 - bias), normal)
    top = (0x7F >> mantissa_bits)
    if kind == "e4m3":
        values = np.where((exponent == top) & (mantissa == (1 << mantissa_bits) - 1), np.nan, values)
    else:
        values = np.where(exponent == top, np.where(mantissa == 0, np.inf, np.nan), values)
    return sign * values


def fp8_bits(values: np.ndarray, kind: str) -> np.ndarray:
    """8-bit float bits of float values as cuda_fp8.h's conversions with ``__NV_SATFINITE``
    give them (what ``__nv_fp8_e4m3(x)`` / ``__nv_fp8_e5m2(x)`` do): rounded to nearest,
    ties to an even code; beyond the largest finite value (infinities too) that value; NaN
    0x7F."""
    x = np.asarray(values).astype(np.float64)
    codes = np.arange(128)
    magnitudes = fp8_values(codes, kind)
    codes, magnitudes = codes[np.isfinite(magnitudes)], magnitudes[np.isfinite(magnitudes)]
    a = np.minimum(np.abs(np.nan_to_num(x, nan=0.0)), magnitudes[-1])
    hi = np.clip(np.searchsorted(magnitudes, a), 0, len(codes) - 1)
    lo = np.clip(hi - 1, 0, len(codes) - 1)
    below, above = a - magnitudes[lo], magnitudes[hi] - a
    pick_hi = (above < below) | ((above == below) & (codes[hi] % 2 == 0))
    code = np.where(pick_hi, codes[hi], codes[lo])
    bits = np.where(np.signbit(x), code | 0x80, code)
    return np.where(np.isnan(x), 0x7F, bits).astype(np.uint8)


def e8m0_values(bits: np.ndarray) -> np.ndarray:
    """float64 values of float8_e8m0fnu bits: 2^(bits - 127); 0xFF is NaN."""
    bits = np.asarray(bits).astype(np.int64)
    return np.where(bits == 0xFF, np.nan, np.exp2(bits.astype(np.float64) - 127))


def e8m0_bits(values: np.ndarray) -> np.ndarray:
    """float8_e8m0fnu bits of float values as CUDA converts them (cuda_fp8.h's
    ``__nv_fp8_e8m0(float)``, upstream's ``__tl_cvt_*_to_e8m0``: cudaRoundPosInf,
    __NV_SATFINITE): the power of two at or above |x| (the sign is dropped), at least
    2^-127, at most 2^127 (infinities too); NaN is 0xFF."""
    x = np.abs(np.asarray(values).astype(np.float64))
    mantissa, exponent = np.frexp(x)  # x = mantissa * 2^exponent, mantissa in [0.5, 1)
    ceil_log2 = np.where(mantissa == 0.5, exponent - 1, exponent).astype(np.int64)
    biased = np.clip(ceil_log2, -127, 127) + 127
    biased = np.where((x == 0) | np.isinf(x), np.where(x == 0, 0, 254), biased)
    return np.where(np.isnan(x), 0xFF, biased).astype(np.uint8)


@dataclass
class Memory:
    """Bytes of one allocation: (size,) shared by the block, or (threads, size) per thread;
    ``base`` is the shared-space address of byte 0 (what a wgmma descriptor holds)."""

    data: np.ndarray
    per_thread: bool
    name: str
    base: int = 0
    shared: bool = False

    @property
    def size(self) -> int:
        return self.data.shape[-1]


@dataclass
class Pointer:
    """``T.address_of(buf[i])``: an allocation and, per thread, a byte offset into it."""

    memory: Memory
    offset: np.ndarray


def _slot(arg: str) -> int | str | tuple[str, str]:
    """A launch argument: "param:3" (the function's parameter 3), "<kind>:name" (a
    T.alloc_global workspace, by name), or a bare name (a symbolic shape's value)."""
    if arg.startswith("param:"):
        return int(arg.split(":")[1])
    return arg.split(":")[1] if ":" in arg else ("scalar", arg)


class LoweredKernel:
    """Runs the device module of a lowered artifact (``tilelang.lower(...).device_mod``) on
    numpy arrays, one per kernel parameter, in the order of the launch's arguments; ``externs``
    maps an extern call's name to its emulation ``f(kernel, args, call) -> value``."""

    def __init__(self, device_mod: Any, externs: Callable[[str], Callable[..., Any]], index: int | None = None) -> None:
        """``index``: which of the function's kernels (in launch order) where it launches
        several; their ``T.alloc_global`` workspaces are then passed by name
        (``kernel(*arrays, workspaces={"glse": ...})``)."""
        self._extern_for = externs  # name -> the instruction's emulation (lowered_instructions.py)
        launches = json.loads(str(device_mod.attrs["tilelang.launches"]))
        if index is None and len(launches) != 1:
            raise EmulationError(f"expected one device kernel, found {len(launches)}: pass index=")
        launch = launches[index or 0]
        self.func = next(f for gv, f in device_mod.functions.items() if gv.name_hint == launch["symbol"])
        self.arg_slots = [_slot(a) for a in launch["args"]]
        self.block = [int(d) for d in launch["block"]]  # threadIdx.x, .y, .z extents
        if not all(d > 0 for d in self.block):
            raise EmulationError(f"the launch's thread block {launch['block']} is not a static shape")
        self.threads = int(np.prod(self.block))  # linear thread ids: x fastest, as CUDA numbers warps
        self.calls: dict[str, int] = {}  # extern name -> times executed (what the test ran)
        self.shared_bases: dict[Any, int] = {}
        self.shared_size = 0
        self._plan_shared()

    # -- set-up --------------------------------------------------------------------------
    def _plan_shared(self) -> None:
        """Every shared allocation gets a fixed, 1 KiB-aligned place in the block's shared
        space (the dynamic buffer at 0: swizzled tiles rely on that alignment)."""
        found: list[Any] = []

        def visit(node: Any) -> None:
            if isinstance(node, tirx.AllocBuffer) and node.buffer.scope().startswith("shared"):
                found.append(node.buffer)

        tvm_ffi.structural_walk(self.func.body, (tirx.AllocBuffer, visit))
        found.sort(key=lambda b: b.scope() != "shared.dyn")
        for buffer in found:
            self.shared_bases[_key(buffer)] = self.shared_size
            self.shared_size += -(-self._bytes(buffer) // 1024) * 1024

    @staticmethod
    def _bytes(buffer: Any) -> int:
        size = storage(buffer.dtype).itemsize * dtype_parts(buffer.dtype)[1]
        for extent in buffer.shape:
            size *= int(extent)
        return size

    def __call__(self, *arrays: Any, workspaces: dict[str, np.ndarray] | None = None,
                 scalars: dict[str, int] | None = None) -> None:
        """``scalars``: the values of the symbolic shapes (T.dynamic) the launch passes."""
        self.env: dict[Any, Any] = {}
        self.memory: dict[Any, Memory] = {}
        self.smem = np.full(self.shared_size, 0xFF, np.uint8)
        self.tids = np.arange(self.threads)
        self.mask = np.ones(self.threads, bool)
        self.in_block = False  # inside the block's first threadIdx binding
        for param, slot in zip(self.func.params, self.arg_slots):
            if isinstance(slot, tuple):  # a symbolic shape
                if slot[1] not in (scalars or {}):
                    raise EmulationError(f"the kernel takes the shape variable {slot[1]}: pass scalars={{...}}")
                value = scalars[slot[1]]
            else:
                value = (workspaces or {})[slot] if isinstance(slot, str) else arrays[slot]
            if isinstance(value, np.ndarray):
                if not value.flags.c_contiguous:
                    raise EmulationError(f"argument {slot} must be C-contiguous")
                self.memory[_key(param)] = Memory(value.reshape(-1).view(np.uint8), False, param.name)
            else:
                self.env[_key(param)] = np.full(self.threads, value)
        self.exec(self.func.body)

    # -- statements ----------------------------------------------------------------------
    def exec(self, stmt: Any) -> None:
        kind = type(stmt).__name__
        handler = getattr(self, f"_exec_{kind}", None)
        if handler is None:
            raise EmulationError(f"statement {kind} is not emulated: {stmt}")
        handler(stmt)

    def _exec_SeqStmt(self, stmt: Any) -> None:
        for s in stmt.seq:
            self.exec(s)

    def _exec_Bind(self, stmt: Any) -> None:
        self.env[_key(stmt.var)] = self.eval(stmt.value)

    def _exec_DeclBuffer(self, stmt: Any) -> None:
        """``decl_buffer(data=ptr)``: a view of the memory ``ptr`` points to."""
        data = stmt.data
        if isinstance(data, tvm.ir.Call) and str(data.op.name) == "tirx.buffer_data":
            data = data.args[0]  # another buffer's data: alias its memory
        if data is None or _key(data) not in self.memory:
            raise EmulationError(f"buffer {stmt.buffer.name} is declared over unallocated data {stmt.data}")
        self.memory[_key(stmt.buffer)] = self.memory[_key(data)]

    def _exec_AllocBuffer(self, stmt: Any) -> None:
        buffer = stmt.buffer
        size = self._bytes(buffer)
        if buffer.scope().startswith("local"):
            self.memory[_key(buffer)] = Memory(np.full((self.threads, size), 0xFF, np.uint8), True, buffer.name)
        elif _key(buffer) in self.shared_bases:
            base = self.shared_bases[_key(buffer)]
            self.memory[_key(buffer)] = Memory(self.smem[base:base + size], False, buffer.name, base, True)
        else:
            raise EmulationError(f"allocation {buffer.name} in scope {buffer.scope()} is not emulated")

    def _exec_Evaluate(self, stmt: Any) -> None:
        self.eval(stmt.value)

    def _exec_AttrStmt(self, stmt: Any) -> None:
        if stmt.attr_key != "thread_extent":
            return self.exec(stmt.body)
        tag, var = stmt.node.thread_tag, stmt.node.var
        extent = self.uniform(stmt.value, f"{tag} extent")  # (a grid over a symbolic shape too)
        if tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            axis = "xyz".index(tag[-1])
            if extent != self.block[axis]:
                raise EmulationError(f"{tag} extent {extent} differs from the launch's {self.block[axis]}")
            self.env[_key(var)] = (self.tids // int(np.prod(self.block[:axis]))) % extent
            if self.in_block:  # the block's second or third axis
                return self.exec(stmt.body)
            self.smem[:] = 0xFF  # a new block: nothing in shared memory yet
            self.pending: list[list[Any]] = []  # committed cp.async groups
            self.group: list[Any] = []  # cp.async copies not committed yet
            self.in_block = True
            try:
                return self.exec(stmt.body)
            finally:
                self.in_block = False
        if not tag.startswith("blockIdx"):
            raise EmulationError(f"thread binding {tag} is not emulated")
        for value in range(extent):
            self.env[_key(var)] = np.full(self.threads, value)
            self.exec(stmt.body)

    def _exec_For(self, stmt: Any) -> None:
        start, extent = self.uniform(stmt.min, "loop start"), self.uniform(stmt.extent, "loop extent")
        step = 1 if stmt.step is None else self.uniform(stmt.step, "loop step")
        for value in range(start, start + extent, step):
            self.env[_key(stmt.loop_var)] = np.full(self.threads, value)
            self.exec(stmt.body)

    def _exec_While(self, stmt: Any) -> None:
        """Each thread leaves the loop when its condition is false; the others go on (the
        threads still run in step: a thread that left only stops writing)."""
        outer = self.mask
        try:
            for _ in range(_WHILE_LIMIT):
                self.mask = self.mask & self.eval(stmt.condition).astype(bool)
                if not self.mask.any():
                    return
                self.exec(stmt.body)
            raise EmulationError(f"a while loop ran {_WHILE_LIMIT} iterations: {stmt.condition}")
        finally:
            self.mask = outer

    def _exec_IfThenElse(self, stmt: Any) -> None:
        cond = self.eval(stmt.condition).astype(bool)
        outer = self.mask
        try:
            self.mask = outer & cond
            if self.mask.any():
                self.exec(stmt.then_case)
            self.mask = outer & ~cond
            if stmt.else_case is not None and self.mask.any():
                self.exec(stmt.else_case)
        finally:
            self.mask = outer

    def _exec_BufferStore(self, stmt: Any) -> None:
        buffer = stmt.buffer
        index = self._index(stmt.indices)
        value = np.broadcast_to(self._lanes_like(self.eval(stmt.value), index), index.shape)
        self._check_vector_alignment(stmt.indices, self._byte_offset(buffer, index), buffer)
        self.write(self.memory_of(buffer), self._byte_offset(buffer, index), value, storage(buffer.dtype))

    def uniform(self, expr: Any, what: str) -> int:
        return self.uniform_value(self.eval(expr), f"{what} {expr}")

    def uniform_value(self, values: np.ndarray, what: str) -> int:
        values = values[self.mask]
        if values.size and (values != values[0]).any():
            raise EmulationError(f"{what} differs between threads")
        return int(values[0]) if values.size else 0

    # -- memory --------------------------------------------------------------------------
    def memory_of(self, buffer: Any) -> Memory:
        memory = self.memory.get(_key(buffer))
        if memory is None:
            raise EmulationError(f"buffer {buffer.name} is used before it is allocated")
        return memory

    def _index(self, indices: Any) -> np.ndarray:
        if len(indices) != 1:
            raise EmulationError(f"expected flattened (1-d) accesses, got {len(indices)} indices")
        return self.eval(indices[0])

    @staticmethod
    def _byte_offset(buffer: Any, index: np.ndarray) -> np.ndarray:
        return (index + int(buffer.elem_offset)) * storage(buffer.dtype).itemsize

    @staticmethod
    def _lanes_like(value: np.ndarray, like: np.ndarray) -> np.ndarray:
        return value[:, None] if value.ndim < like.ndim else value

    def _positions(self, memory: Memory, offset: np.ndarray, width: int, mask: np.ndarray) -> np.ndarray:
        """Byte positions (offset..offset+width per element), bounds-checked where active."""
        if mask.ndim > offset.ndim:  # a vector select's lanes around a scalar access
            mask = mask.any(axis=-1)
        active = np.broadcast_to(self._lanes_like(mask, offset), offset.shape)
        bad = active & ((offset < 0) | (offset + width > memory.size))
        if bad.any():
            thread = np.argwhere(bad)[0][0]
            raise EmulationError(f"thread {thread} accesses bytes {int(offset[bad][0])}.."
                                 f"{int(offset[bad][0]) + width} of {memory.name} ({memory.size} bytes)")
        return np.where(active, offset, 0)[..., None] + np.arange(width)

    def read(self, memory: Memory, offset: np.ndarray, dtype: np.dtype, mask: np.ndarray | None = None) -> np.ndarray:
        mask = self.mask if mask is None else mask
        positions = self._positions(memory, offset, dtype.itemsize, mask)
        if memory.per_thread:
            threads = self.tids.reshape((-1,) + (1,) * (positions.ndim - 1))
            raw = memory.data[threads, positions]
        else:
            raw = memory.data[positions]
        return np.ascontiguousarray(raw).view(dtype)[..., 0]

    def write(self, memory: Memory, offset: np.ndarray, values: np.ndarray, dtype: np.dtype,
              mask: np.ndarray | None = None) -> None:
        mask = self.mask if mask is None else mask
        positions = self._positions(memory, offset, dtype.itemsize, mask)
        raw = np.ascontiguousarray(np.asarray(values).astype(dtype))[..., None].view(np.uint8)
        active = np.broadcast_to(self._lanes_like(mask, offset), offset.shape)
        if memory.per_thread:
            threads = np.broadcast_to(self.tids.reshape((-1,) + (1,) * (offset.ndim - 1)), offset.shape)
            memory.data[threads[active][:, None], positions[active]] = raw[active]
        else:
            memory.data[positions[active]] = raw[active]

    # -- expressions ---------------------------------------------------------------------
    def eval(self, expr: Any) -> Any:
        kind = type(expr).__name__
        if isinstance(expr, (E.IntImm, E.FloatImm)):
            if _type_of(expr) == "bfloat16":  # a constant's bits
                return bf16_bits(np.full(self.threads, expr.value, np.float32))
            return compute(np.full(self.threads, expr.value), expr.dtype)
        if isinstance(expr, E.Var) or kind == "Var":
            if _key(expr) not in self.env:
                raise EmulationError(f"variable {expr} has no value")
            return self.env[_key(expr)]
        handler = getattr(self, f"_eval_{kind}", None)
        if handler is not None:
            return handler(expr)
        binary = _BINARY.get(kind)
        if binary is None:
            raise EmulationError(f"expression {kind} is not emulated: {expr}")
        a, b = self.eval(expr.a), self.eval(expr.b)
        bits_only = {_type_of(expr.a), _type_of(expr)} & set(_BITS_ONLY)
        if bits_only == {"bfloat16"}:  # in float32, rounded to bfloat16 (cuda_bf16.h's arithmetic)
            a, b = bf16_floats(a), bf16_floats(b)
            a, b = self._lanes_like(a, b), self._lanes_like(b, a)
            result = binary(a, b)
            return result if kind in _COMPARE else bf16_bits(result)
        if bits_only:
            raise EmulationError(f"{bits_only.pop()} arithmetic is not emulated: {expr}")
        a, b = self._lanes_like(a, b), self._lanes_like(b, a)
        result = binary(a, b)
        return result if kind in _COMPARE else compute(result, expr.dtype)

    def _check_vector_alignment(self, indices: Any, offset: np.ndarray, buffer: Any) -> None:
        """A contiguous vector access (a Ramp of stride 1: one ld/st of lanes x the element)
        must start at a multiple of its size, or the GPU faults (misaligned address)."""
        ramp = indices[0] if len(indices) == 1 else None
        if not (type(ramp).__name__ == "Ramp" and isinstance(ramp.stride, E.IntImm) and ramp.stride.value == 1):
            return
        size = int(ramp.lanes) * storage(buffer.dtype).itemsize
        active = np.broadcast_to(self._lanes_like(self.mask, offset), offset.shape)[..., 0]
        bad = active & (offset[..., 0] % size != 0)
        if bad.any():
            raise EmulationError(f"thread {int(np.argwhere(bad)[0][0])} accesses {size} bytes of {buffer.name} at byte "
                                 f"{int(offset[..., 0][bad][0])}, not a multiple of {size} (misaligned address)")

    def _eval_TensorLoad(self, expr: Any) -> np.ndarray:
        buffer = expr.source
        index = self._index(expr.indices)
        self._check_vector_alignment(expr.indices, self._byte_offset(buffer, index), buffer)
        values = self.read(self.memory_of(buffer), self._byte_offset(buffer, index), storage(buffer.dtype))
        return compute(values, buffer.dtype)

    def _eval_Cast(self, expr: Any) -> np.ndarray:
        source = _type_of(expr.value)
        if source in _FP8_KINDS and _type_of(expr).startswith("float") and _type_of(expr) not in _BITS_ONLY:
            return compute(fp8_values(self.eval(expr.value), _FP8_KINDS[source]), expr.dtype)  # widening: exact
        bits_only = {_type_of(expr), source} & set(_BITS_ONLY)
        if _type_of(expr) in _FP8_KINDS and source != "float8_e8m0fnu":  # narrowing: one rounding
            value = self.eval(expr.value)
            if source in _FP8_KINDS:
                value = fp8_values(value, _FP8_KINDS[source])
            elif source == "bfloat16":
                value = bf16_floats(value)
            return fp8_bits(value, _FP8_KINDS[_type_of(expr)])
        if "float8_e8m0fnu" in bits_only:
            value = self.eval(expr.value)
            if source == "float8_e8m0fnu":
                value = e8m0_values(value)
            elif source == "bfloat16":
                value = bf16_floats(value)
            if _type_of(expr) == "float8_e8m0fnu":
                return e8m0_bits(value)
            return bf16_bits(value) if _type_of(expr) == "bfloat16" else compute(value, expr.dtype)
        if bits_only == {"bfloat16"}:
            if source == "bfloat16" and _type_of(expr) == "bfloat16":
                return self.eval(expr.value)
            if source == "bfloat16":  # widening: exact
                return compute(bf16_floats(self.eval(expr.value)), expr.dtype)
            return bf16_bits(self.eval(expr.value))
        if bits_only:
            raise EmulationError(f"{bits_only.pop()} conversions are not emulated: {expr}")
        return compute(self.eval(expr.value).astype(storage(expr.dtype)), expr.dtype)

    def _eval_Ramp(self, expr: Any) -> np.ndarray:
        return self.eval(expr.base)[:, None] + self.eval(expr.stride)[:, None] * np.arange(int(expr.lanes))

    def _eval_Broadcast(self, expr: Any) -> np.ndarray:
        return np.repeat(self.eval(expr.value)[:, None], int(expr.lanes), axis=1)

    def _eval_Select(self, expr: Any) -> np.ndarray:
        return self._choose(expr.condition, expr.true_value, expr.false_value)

    def _eval_Not(self, expr: Any) -> np.ndarray:
        return ~self.eval(expr.a).astype(bool)

    def _eval_Let(self, expr: Any) -> np.ndarray:
        self.env[_key(expr.var)] = self.eval(expr.value)
        return self.eval(expr.body)

    def _choose(self, cond: Any, then: Any, otherwise: Any) -> np.ndarray:
        """Each side evaluated only where it is chosen (a guard keeps its loads in bounds)."""
        c = self.eval(cond).astype(bool)
        outer = self.mask
        try:
            self.mask = self._lanes_like(outer, c) & c  # (threads, lanes) for a vector condition
            t = self.eval(then)
            self.mask = self._lanes_like(outer, c) & ~c
            f = self.eval(otherwise)
        finally:
            self.mask = outer
        return np.where(self._lanes_like(c, t), t, f)

    def _eval_BitwiseNot(self, expr: Any) -> Any:
        value = np.asarray(self.eval(expr.a))
        return compute(~value.astype(np.uint64 if _type_of(expr) == "uint64" else np.int64), expr.dtype)

    def _eval_Call(self, expr: Any) -> Any:
        op = str(expr.op.name)
        args = expr.args
        if op in ("tirx.call_extern", "tirx.call_pure_extern"):
            name = str(args[0].value)
            self.calls[name] = self.calls.get(name, 0) + 1
            if name in _MATH:
                value = self.eval(args[1])
                return compute(_MATH[name](value.astype(np.float32)), expr.dtype)
            return self._extern_for(name)(self, [self.eval_arg(a) for a in args[1:]], expr)
        if op.startswith("tirx.cuda.__"):  # TVM's CUDA intrinsics as ops: the CUDA function of that name
            name = op.removeprefix("tirx.cuda.")
            self.calls[name] = self.calls.get(name, 0) + 1
            return self._extern_for(name)(self, [self.eval_arg(a) for a in args], expr)
        if op == "tirx.tvm_access_ptr":  # (type annotation, buffer, element offset, extent, access mask)
            buffer, offset = args[1], self.eval(args[2])
            itemsize = storage(args[0].dtype).itemsize
            return Pointer(self.memory_of(buffer), (offset + int(buffer.elem_offset)) * itemsize)
        if op == "tirx.address_of":
            load = args[0]
            index = self._index(load.indices)
            return Pointer(self.memory_of(load.source), self._byte_offset(load.source, index))
        if op in ("tirx.tvm_storage_sync", "tirx.tvm_thread_invariant", "tirx.likely"):
            return self.eval(args[0]) if op != "tirx.tvm_storage_sync" else None
        if op in ("tirx.if_then_else", "prim.if_then_else"):
            return self._choose(args[0], args[1], args[2])
        if op == "tirx.isnan":
            return np.isnan(self.eval(args[0]))
        if op == "tirx.reinterpret":  # the same bytes per thread, read as the new type
            source = _type_of(args[0])
            value = np.asarray(self.eval(args[0])).astype(storage(source))
            threads = value.shape[0]
            _, lanes = dtype_parts(expr.dtype)
            out = np.ascontiguousarray(value).reshape(threads, -1).view(storage(expr.dtype))
            return compute(out if lanes > 1 else out[:, 0], expr.dtype)
        raise EmulationError(f"intrinsic {op} is not emulated: {expr}")

    def eval_arg(self, arg: Any) -> Any:
        if isinstance(arg, tvm.ir.StringImm) or type(arg).__name__ == "StringImm":
            return str(arg.value)
        return self.eval(arg)


_WHILE_LIMIT = 1 << 16  # iterations before a while loop counts as endless
_COMPARE = {"EQ", "NE", "LT", "LE", "GT", "GE", "And", "Or"}
_BINARY = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "Div": lambda a, b: np.true_divide(a, b) if a.dtype.kind == "f" else np.trunc(a / b).astype(a.dtype),
    "Mod": np.fmod, "FloorDiv": np.floor_divide, "FloorMod": np.mod, "Min": np.fmin, "Max": np.fmax,
    "BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or, "BitwiseXor": np.bitwise_xor,
    "RShift": np.right_shift, "LShift": np.left_shift,
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
    "And": np.logical_and, "Or": np.logical_or,
}

"""The instructions behind the CUDA backend's device helpers, in numpy, for the lowered-IR
interpreter (lowered_emulator.py). Each follows its definition in the PTX ISA, not the
backend's layout code: a wrong operand, offset, mask or descriptor in the emitted IR gives
a wrong result here, as it would on the GPU.

* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 ("Warp-level matrix load instruction"):
  lanes 8q..8q+7 give the row addresses of matrix q; thread t receives row t / 4, columns
  2 (t % 4) and + 1 of each matrix (of its transpose with .trans) in register q.
* mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} ("Matrix Fragments for mma.m16n8k16
  with floating point type"), g = lane / 4, t = lane % 4: A register j holds row
  g + 8 (j % 2), columns 2t + 8 (j / 2) + {0, 1}; B register j holds column g, rows
  2t + 8j + {0, 1}; C register j holds row g + 8 (j / 2), column 2t + j % 2.
* mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 ("Matrix Fragments for mma.m16n8k8",
  .tf32): A register j holds row g + 8 (j % 2), column t + 4 (j / 2); B register j holds
  column g, row t + 4j. The helper rounds each operand to TF32 first (cvt.rna.tf32.f32:
  10 mantissa bits, to nearest, ties away from zero).
* cp.async.cg.shared.global 16 bytes, commit_group, wait_group n ("Data movement"): a copy
  lands when a wait leaves at most n newer groups pending — never earlier.
* wgmma.mma_async m64nNk16, k32 for 8-bit types, k8 for TF32 (the float32's top 19 bits)
  ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
  shared operands read through matrix descriptors in the canonical layouts ("Shared Memory
  Matrix Layout"), swizzled on absolute addresses; register A is the m16n8k16 A fragment
  of the warp's 16 rows; D register i of warp w holds row 16 w + lane / 4 + 8 (i / 2 % 2),
  column 8 (i / 4) + 2 (lane % 4) + i % 2.
* shfl.sync.{bfly,idx,down,up}.b32 (``__shfl_xor_sync``, ``__shfl_sync``,
  ``__shfl_down_sync``, ``__shfl_up_sync``; "Data Movement and Conversion Instructions:
  shfl.sync"): with c = ((32 - width) << 8) | clamp (0 for up, else 31), segmask = c[12:8],
  maxLane = (lane & segmask) | (clamp & ~segmask), a lane reads lane j (bfly: lane ^ b,
  idx: (lane & segmask) | (b & ~segmask), down: lane + b, up: lane - b) when j <= maxLane
  (up: j >= maxLane), else its own value; a lane outside the member mask, or reading one
  outside it, is undefined: an error.
* vote.sync.{ballot,any,all} and activemask ("Parallel Synchronization and Communication
  Instructions"), match.{any,all}.sync, bar.red.{popc,and,or} (``__syncthreads_count/and/or``):
  over the lanes of the member mask (ballot: bit i = lane i), the block for bar.red.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from lowered_emulator import (
    EmulationError,
    LoweredKernel,
    Pointer,
    bf16_bits,
    bf16_floats,
    compute,
    e8m0_bits,
    e8m0_values,
    fp8_values,
    storage,
)
from tilelang.cuda.transform.conversions import CONVERSIONS

WARP = 32
_WGMMA = re.compile(r"^tl_wgmma_m64n(\d+)k(8|16|32)_(f16|bf16|e4m3|e5m2|s8|tf32)_([01r])([01])(z?)$")


def lowered_kernel(device_mod: Any, index: int | None = None) -> LoweredKernel:
    """The device kernel of ``tilelang.lower(...).device_mod`` (the ``index``-th, where the
    function launches several), runnable on numpy arrays with these instructions."""
    return LoweredKernel(device_mod, extern_for, index)


def extern_for(name: str) -> Callable[..., Any]:
    if name in EXTERNS:
        return EXTERNS[name]
    match = _WGMMA.match(name)
    if match is not None:
        n, _, kind, a_form, b_mn, zero = match.groups()  # (the depth follows from the kind)
        return lambda kernel, args, call: _wgmma(kernel, args, int(n), kind, a_form, int(b_mn), zero == "z")
    if name in CONVERSIONS:
        return lambda kernel, args, call: _paired_conversion(kernel, call, CONVERSIONS[name])
    raise EmulationError(f"extern {name} is not emulated (lowered_instructions.py)")


def _paired_conversion(kernel: LoweredKernel, call: Any, target: str) -> np.ndarray:
    """tl_convert.h's __tl_cvt_*: the lanes converted as a cast to ``target`` converts them
    (the emulator's own casts), returned as the integer of their bits, as the C helper does."""
    from tvm import tirx

    source = call.args[1]
    lanes = tvm.DataType(str(source.ty.dtype)).lanes
    vector = f"{target}x{lanes}"
    values = np.asarray(kernel.eval(tirx.Cast(vector, source)))
    threads = values.shape[0]
    raw = np.ascontiguousarray(values.astype(storage(vector)).reshape(threads, lanes))
    return compute(raw.view(storage(str(call.dtype))).reshape(threads), str(call.dtype))


def _whole_warps(kernel: LoweredKernel, name: str, size: int = WARP) -> None:
    """Warp (or warpgroup) instructions are issued by all of their threads or none."""
    groups = kernel.mask.reshape(-1, size)
    if (groups.any(axis=1) & ~groups.all(axis=1)).any():
        raise EmulationError(f"{name}: only part of a {size}-thread group executes it")


def _halves(kernel: LoweredKernel, pointer: Pointer, count: int, dtype: str = "f16") -> np.ndarray:
    """(threads, count) 16-bit values at each thread's pointer, as float64 (bf16 widened by hand)."""
    offsets = pointer.offset[:, None] + 2 * np.arange(count)
    if dtype == "bf16":
        bits = kernel.read(pointer.memory, offsets, np.dtype(np.uint16)).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    return kernel.read(pointer.memory, offsets, np.dtype(np.float16)).astype(np.float64)


def _floats(kernel: LoweredKernel, pointer: Pointer, count: int) -> tuple[np.ndarray, np.ndarray]:
    offsets = pointer.offset[:, None] + 4 * np.arange(count)
    return offsets, kernel.read(pointer.memory, offsets, np.dtype(np.float32)).astype(np.float64)


# -- ldmatrix / mma.sync --------------------------------------------------------------------
def _ldmatrix(kernel: LoweredKernel, args: list[Any], trans: bool, count: int = 4) -> None:
    """ldmatrix.x{count}: lanes 8q..8q+7 give the rows of matrix q; each thread receives
    two 16-bit values of each matrix (one register per matrix)."""
    dst, src = args
    _whole_warps(kernel, "ldmatrix")
    if not src.memory.shared:
        raise EmulationError(f"ldmatrix reads {src.memory.name}, which is not in shared memory")
    lanes = (np.arange(kernel.threads) % WARP) < 8 * count  # the lanes whose addresses it reads
    address = src.memory.base + src.offset
    if (address[kernel.mask & lanes] % 16).any():
        raise EmulationError("ldmatrix: a row address is not 16-byte aligned")
    rows = kernel.read(src.memory, src.offset[:, None] + 2 * np.arange(8), np.dtype(np.uint16),
                       mask=kernel.mask & lanes)
    matrices = rows.reshape(-1, 4, 8, 8)[:, :count]  # warp, matrix q (lanes 8q..8q+7), row, column
    lane = np.arange(WARP)
    row, col = lane // 4, 2 * (lane % 4)
    if trans:
        regs = np.stack([matrices[:, :, col + e, row] for e in (0, 1)], axis=-1)  # warp, q, lane, half
    else:
        regs = np.stack([matrices[:, :, row, col + e] for e in (0, 1)], axis=-1)
    regs = regs.transpose(0, 2, 1, 3).reshape(kernel.threads, 2 * count)
    kernel.write(dst.memory, dst.offset[:, None] + 2 * np.arange(2 * count), regs, np.dtype(np.uint16))


def _add_c_fragments(c: np.ndarray, D: np.ndarray, g: np.ndarray, t: np.ndarray) -> None:
    """Adds each warp's 16 x 8 product ``D`` into the threads' m16n8 accumulator registers
    ``c`` (threads x 4): register j holds row g + 8 (j / 2), column 2t + j % 2."""
    for j in range(4):
        c[:, j] += D[:, g + 8 * (j // 2), 2 * t + j % 2].reshape(-1)


def _mma_m16n8k16(kernel: LoweredKernel, args: list[Any], dtype: str, acc: str = "f32") -> None:
    c_ptr, a_ptr, b_ptr = args
    _whole_warps(kernel, "mma.sync")
    a, b = _halves(kernel, a_ptr, 8, dtype), _halves(kernel, b_ptr, 4, dtype)
    if acc == "f16":
        c_offsets = c_ptr.offset[:, None] + 2 * np.arange(4)
        c = kernel.read(c_ptr.memory, c_offsets, np.dtype(np.float16)).astype(np.float64)
    else:
        c_offsets, c = _floats(kernel, c_ptr, 4)
    warps = kernel.threads // WARP
    lane = np.arange(WARP)
    g, t = lane // 4, lane % 4
    A, B = np.zeros((warps, 16, 16)), np.zeros((warps, 16, 8))
    for j in range(4):
        for e in range(2):
            A[:, g + 8 * (j % 2), 2 * t + 8 * (j // 2) + e] = a[:, 2 * j + e].reshape(warps, WARP)
    for j in range(2):
        for e in range(2):
            B[:, 2 * t + 8 * j + e, g] = b[:, 2 * j + e].reshape(warps, WARP)
    D = A @ B
    _add_c_fragments(c, D, g, t)
    kernel.write(c_ptr.memory, c_offsets, c, np.dtype(np.float16 if acc == "f16" else np.float32))


def _mma_m16n8k32(kernel: LoweredKernel, args: list[Any], kind: str) -> None:
    """mma.m16n8k32 with 8-bit operands: A's registers hold four bytes of a row (a0..a3 row
    g, k 4t..; a4..a7 row g + 8; a8.. the next 16 k), B's four bytes of a column. ``kind``
    "s8" (int32 accumulators) or "e4m3"/"e5m2" (fp32 accumulators)."""
    c_ptr, a_ptr, b_ptr = args
    _whole_warps(kernel, "mma.sync")
    integer = kind == "s8"

    def operand(pointer: Pointer, count: int) -> np.ndarray:
        raw = kernel.read(pointer.memory, pointer.offset[:, None] + np.arange(count),
                          np.dtype(np.int8 if integer else np.uint8))
        return raw.astype(np.int64) if integer else fp8_values(raw, kind)

    a, b = operand(a_ptr, 16), operand(b_ptr, 8)
    acc = np.dtype(np.int32 if integer else np.float32)
    c_offsets = c_ptr.offset[:, None] + 4 * np.arange(4)
    c = kernel.read(c_ptr.memory, c_offsets, acc).astype(a.dtype)
    warps = kernel.threads // WARP
    lane = np.arange(WARP)
    g, t = lane // 4, lane % 4
    A, B = np.zeros((warps, 16, 32), a.dtype), np.zeros((warps, 32, 8), a.dtype)
    for r in range(4):
        for e in range(4):
            A[:, g + 8 * (r % 2), 4 * t + 16 * (r // 2) + e] = a[:, 4 * r + e].reshape(warps, WARP)
    for r in range(2):
        for e in range(4):
            B[:, 4 * t + 16 * r + e, g] = b[:, 4 * r + e].reshape(warps, WARP)
    D = A @ B
    _add_c_fragments(c, D, g, t)
    kernel.write(c_ptr.memory, c_offsets, c, acc)


def tf32_values(bits: np.ndarray, rounding: str = "rna") -> np.ndarray:
    """float32 bit patterns as the TF32 values the tensor cores take, in float64: rounded to
    10 mantissa bits, to nearest with ties away from zero (``rna``, cvt.rna.tf32.f32), or
    truncated (``rz``: the low 13 bits ignored). Infinities and NaNs pass unchanged."""
    bits = bits.astype(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    rounded = bits + np.uint32(0x1000) if rounding == "rna" else bits
    kept = np.where(special, bits, rounded & np.uint32(0xFFFFE000))
    return kept.astype(np.uint32).view(np.float32).astype(np.float64)


def _mma_m16n8k8_tf32(kernel: LoweredKernel, args: list[Any]) -> None:
    c_ptr, a_ptr, b_ptr = args
    _whole_warps(kernel, "mma.sync")

    def operand(pointer: Pointer, count: int) -> np.ndarray:
        return tf32_values(kernel.read(pointer.memory, pointer.offset[:, None] + 4 * np.arange(count),
                                       np.dtype(np.uint32)))

    a, b = operand(a_ptr, 4), operand(b_ptr, 2)
    c_offsets, c = _floats(kernel, c_ptr, 4)
    warps = kernel.threads // WARP
    lane = np.arange(WARP)
    g, t = lane // 4, lane % 4
    A, B = np.zeros((warps, 16, 8)), np.zeros((warps, 8, 8))
    for j in range(4):
        A[:, g + 8 * (j % 2), t + 4 * (j // 2)] = a[:, j].reshape(warps, WARP)
    for j in range(2):
        B[:, t + 4 * j, g] = b[:, j].reshape(warps, WARP)
    D = A @ B
    _add_c_fragments(c, D, g, t)
    kernel.write(c_ptr.memory, c_offsets, c, np.dtype(np.float32))


# -- cp.async ------------------------------------------------------------------------------
def _cp_async_16(kernel: LoweredKernel, args: list[Any]) -> None:
    dst, src, src_bytes = args
    active = kernel.mask
    if not dst.memory.shared or src.memory.per_thread or src.memory.shared:
        raise EmulationError(f"cp.async copies global -> shared, not {src.memory.name} -> {dst.memory.name}")
    if ((dst.memory.base + dst.offset)[active] % 16).any() or (src.offset[active] % 16).any():
        raise EmulationError("cp.async: a 16-byte copy is not 16-byte aligned")
    present = active[:, None] & (np.arange(16) < src_bytes[:, None])  # the rest is zero-filled
    data = np.where(present, kernel.read(src.memory, src.offset[:, None] + np.arange(16),
                                         np.dtype(np.uint8), present), 0)
    kernel.group.append((dst.memory, dst.offset[:, None] + np.arange(16), data, active.copy()))


def _copy_16_partial(kernel: LoweredKernel, args: list[Any]) -> None:
    """tl_copy_16_partial: src_bytes bytes read now (each address aligned to its element),
    zeros after them, one 16-byte store to shared memory."""
    dst, src, src_bytes, element_bytes = args
    active = kernel.mask
    if not dst.memory.shared or src.memory.shared:
        raise EmulationError(f"tl_copy_16_partial copies global -> shared, not {src.memory.name} -> {dst.memory.name}")
    if ((dst.memory.base + dst.offset)[active] % 16).any() or (src.offset[active] % element_bytes[active]).any():
        raise EmulationError("tl_copy_16_partial: a misaligned address")
    present = active[:, None] & (np.arange(16) < src_bytes[:, None])
    data = np.where(present, kernel.read(src.memory, src.offset[:, None] + np.arange(16), np.dtype(np.uint8),
                                         present), 0)
    kernel.write(dst.memory, dst.offset[:, None] + np.arange(16), data, np.dtype(np.uint8), active)


def _atomic_add_bf16(kernel: LoweredKernel, pointer: Any, value: Any) -> None:
    """bfloat16 atomic adds, one thread at a time (each sum rounded to bfloat16, as each
    atomic rounds; the order is the threads', which the GPU does not promise)."""
    for thread in np.flatnonzero(kernel.mask):
        mask = np.zeros_like(kernel.mask)
        mask[thread] = True
        old = kernel.read(pointer.memory, pointer.offset, np.dtype(np.uint16), mask)
        added = np.broadcast_to(value, kernel.mask.shape)
        kernel.write(pointer.memory, pointer.offset, bf16_bits(bf16_floats(old) + bf16_floats(added)),
                     np.dtype(np.uint16), mask)


def _atomic_add(kernel: LoweredKernel, args: list[Any], call: Any) -> np.ndarray | None:
    """atomicAdd(address, value): every active thread's value is added, those of threads
    at the same address included (summed first: the order of the GPU's adds is not
    modelled); it returns each thread's previous value as if the threads at one address
    added in thread order (one order the GPU may take)."""
    pointer, value = args
    previous = _add_atomically(kernel, pointer, value, str(call.args[2].dtype))
    return None if previous is None else compute(previous, call.dtype)


def _vector_atomic_add(kernel: LoweredKernel, args: list[Any], call: Any) -> None:
    """tl_atomic_add_<type>x<n>(address, v0, ..): atomicAdd of n consecutive elements, each
    added atomically (one vector atomic where the address is aligned to it, else element by
    element: the same sums)."""
    pointer, *values = args
    dtype = str(call.args[2].dtype)
    size = 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize
    for lane, value in enumerate(values):
        _add_atomically(kernel, Pointer(pointer.memory, pointer.offset + lane * size), value, dtype)


def _add_atomically(kernel: LoweredKernel, pointer: Any, value: Any, dtype_name: str) -> np.ndarray | None:
    """Adds every active thread's value; returns each thread's previous value (threads at
    one address in thread order), None for bfloat16 (not modelled)."""
    if dtype_name == "bfloat16":  # its bits: added as floats, the sum rounded once
        _atomic_add_bf16(kernel, pointer, value)
        return None
    dtype = np.dtype(dtype_name)
    exact = np.int64 if dtype.kind in "iu" else np.float64  # integers: every sum exact
    active = np.flatnonzero(kernel.mask)
    previous = np.zeros(kernel.mask.shape, exact)
    if not len(active):
        return previous
    offsets = np.broadcast_to(pointer.offset, kernel.mask.shape)[active]
    addresses, first, inverse = np.unique(offsets, return_index=True, return_inverse=True)
    values = np.broadcast_to(value, kernel.mask.shape)[active].astype(exact)
    sums = np.zeros(len(addresses), exact)
    np.add.at(sums, inverse, values)
    writers = np.zeros_like(kernel.mask)
    writers[active[first]] = True
    added = np.zeros(kernel.mask.shape, exact)
    added[active[first]] = sums
    old = kernel.read(pointer.memory, pointer.offset, dtype, writers).astype(exact)
    kernel.write(pointer.memory, pointer.offset, old + added, dtype, writers)
    before = np.zeros(len(active), exact)  # the adds of earlier threads at the same address
    for group in range(len(addresses)):
        members = np.flatnonzero(inverse == group)
        before[members] = np.cumsum(values[members]) - values[members]
    previous[active] = old[active[first]][inverse] + before
    return previous


def _cp_async_commit(kernel: LoweredKernel, args: list[Any]) -> None:
    kernel.pending.append(kernel.group)
    kernel.group = []


def _cp_async_wait(kernel: LoweredKernel, args: list[Any]) -> None:
    newest = kernel.uniform_value(args[0], "cp.async.wait_group count")
    landing = kernel.pending[:max(len(kernel.pending) - newest, 0)]
    kernel.pending = kernel.pending[len(landing):]
    for group in landing:
        for memory, offsets, data, mask in group:
            kernel.write(memory, offsets, data, np.dtype(np.uint8), mask)


# -- wgmma ---------------------------------------------------------------------------------
def _wgmma_desc(kernel: LoweredKernel, args: list[Any]) -> np.ndarray:
    pointer, lbo, sbo, mode = args
    if not pointer.memory.shared:
        raise EmulationError(f"a wgmma descriptor points into {pointer.memory.name}, not shared memory")
    address = (pointer.memory.base + pointer.offset).astype(np.uint64)
    field = np.uint64(0x3FFF)
    return (((address & np.uint64(0x3FFFF)) >> np.uint64(4)) |
            (((lbo.astype(np.uint64) >> np.uint64(4)) & field) << np.uint64(16)) |
            (((sbo.astype(np.uint64) >> np.uint64(4)) & field) << np.uint64(32)) |
            ((mode.astype(np.uint64) & np.uint64(3)) << np.uint64(62)))


def _wgmma_desc_add(kernel: LoweredKernel, args: list[Any]) -> np.ndarray:
    desc, distance = args
    if (distance.astype(np.int64) % 16 != 0).any() or (distance < 0).any():
        raise EmulationError("tl_wgmma_desc_add: the distance is not a non-negative multiple of 16 bytes")
    low = (desc & np.uint64(0xFFFFFFFF)) + (distance.astype(np.uint64) >> np.uint64(4))
    if (low >> np.uint64(14) != (desc & np.uint64(0xFFFFFFFF)) >> np.uint64(14)).any():
        raise EmulationError("tl_wgmma_desc_add: the start address leaves its 14-bit field")
    return (desc & np.uint64(0xFFFFFFFF00000000)) | (low & np.uint64(0xFFFFFFFF))


def descriptor_address(desc: int, mn: np.ndarray, k: np.ndarray, k_major: bool, dtype_bytes: int) -> np.ndarray:
    """Shared byte address of operand element (mn, k) read through ``desc``: the canonical
    layouts in CuTe notation (T elements per 16 bytes, c = swizzle bytes / 16), then the
    swizzle on the address bits (Swizzle<log2 c, 4, 3>)."""
    start, lbo = (desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4
    sbo, mode = ((desc >> 32) & 0x3FFF) << 4, desc >> 62
    t = 16 // dtype_bytes
    c = {0: 1, 1: 8, 2: 4, 3: 2}[mode]
    lbo, sbo = lbo // dtype_bytes, sbo // dtype_bytes
    if k_major and mode == 0:  # ((8,m),(T,2k)):((1T,SBO),(1,LBO))
        offset = mn % 8 * t + mn // 8 * sbo + k % t + k // t * lbo
    elif k_major:  # ((8,m),(T,2k)):((cT,SBO),(1,T))
        offset = mn % 8 * c * t + mn // 8 * sbo + k
    elif mode == 0:  # ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
        offset = mn % t + mn // t * sbo + k % 8 * t + k // 8 * lbo
    else:  # ((T,c,m),(8,k)):((1,T,LBO),(cT,SBO))
        offset = mn % t + mn // t % c * t + mn // (t * c) * lbo + k % 8 * c * t + k // 8 * sbo
    address = start + offset * dtype_bytes
    return address ^ (((address >> 7) & (c - 1)) << 4) if mode else address


_FP8 = ("e4m3", "e5m2")
_BYTES = (*_FP8, "s8")  # the 8-bit kinds: K-major operands, 32 deep


def _shared_operand(kernel: LoweredKernel, desc: np.ndarray, rows: int, mn_major: bool, kind: str) -> np.ndarray:
    """The (rows x k) operand (M x K of A, N x K of B) one warpgroup's descriptor reads:
    16 deep for 16-bit kinds, 32 for 8-bit ones and 8 for TF32 (those K-major only; TF32
    values are the float32's top 19 bits)."""
    if (desc != desc[0]).any():
        raise EmulationError("wgmma: the threads of a warpgroup pass different descriptors")
    size = 1 if kind in _BYTES else 4 if kind == "tf32" else 2
    if size != 2 and mn_major:
        raise EmulationError("wgmma: 8- and 32-bit operands are K-major only")
    mn, k = np.arange(rows)[:, None], np.arange(32 // size)[None, :]
    address = descriptor_address(int(desc[0]), mn, k, not mn_major, size)
    if (address < 0).any() or (address + size > kernel.smem.size).any() or (address % size).any():
        raise EmulationError("wgmma: a descriptor reads outside shared memory")
    if kind == "s8":
        return kernel.smem[address].view(np.int8).astype(np.int64)
    if kind == "tf32":
        words = np.ascontiguousarray(kernel.smem[address[..., None] + np.arange(4)]).view(np.uint32)[..., 0]
        return tf32_values(words, "rz")
    if size == 1:
        return fp8_values(kernel.smem[address], kind)
    raw = np.ascontiguousarray(kernel.smem[address[..., None] + np.arange(2)]).view(np.uint16)[..., 0]
    if kind == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return raw.view(np.float16).astype(np.float64)


def _wgmma(kernel: LoweredKernel, args: list[Any], n: int, kind: str, a_form: str, b_mn: int,
           zero: bool = False) -> None:
    """D += A B, or (``zero``, the "z" form: scale-d off) D = A B, D's old values unread."""
    d_ptr, a_arg, b_desc = args
    _whole_warps(kernel, "wgmma", 4 * WARP)
    acc = np.dtype(np.int32 if kind == "s8" else np.float32)  # (s8: int32 accumulators, exact in int64)
    d_offsets = d_ptr.offset[:, None] + 4 * np.arange(n // 2)
    d = kernel.read(d_ptr.memory, d_offsets, acc).astype(np.int64 if kind == "s8" else np.float64)
    if a_form == "r" and kind in (*_BYTES, "tf32"):
        raise EmulationError(f"wgmma: {kind} A from registers is not emulated")
    a_regs = _halves(kernel, a_arg, 8, kind) if a_form == "r" else None
    lane = np.arange(4 * WARP) % WARP
    warp = np.arange(4 * WARP) // WARP
    g, t = lane // 4, lane % 4
    for group in np.flatnonzero(kernel.mask.reshape(-1, 4 * WARP).all(axis=1)):
        threads = slice(group * 4 * WARP, (group + 1) * 4 * WARP)
        B = _shared_operand(kernel, b_desc[threads], n, bool(b_mn), kind).T  # K x N
        if a_regs is None:
            A = _shared_operand(kernel, a_arg[threads], 64, a_form == "1", kind)
        else:
            A = np.zeros((64, 16))
            for j in range(4):
                for e in range(2):
                    A[16 * warp + g + 8 * (j % 2), 2 * t + 8 * (j // 2) + e] = a_regs[threads, 2 * j + e]
        D = A @ B
        for i in range(n // 2):
            before = 0.0 if zero else d[threads, i]
            d[threads, i] = before + D[16 * warp + g + 8 * (i // 2 % 2), 8 * (i // 4) + 2 * t + i % 2]
    kernel.write(d_ptr.memory, d_offsets, d, acc)


# -- warp shuffles, votes and matches ---------------------------------------------------------
def _member(kernel: LoweredKernel, member: Any, name: str) -> np.ndarray:
    """The member mask's bit of each thread's lane; a lane that runs the call outside its
    mask, or a lane of the mask that does not run it (branched away), is undefined: an error."""
    lane = kernel.tids % WARP
    member = np.broadcast_to(np.asarray(member, np.int64), kernel.tids.shape)
    if (kernel.mask & (((member >> lane) & 1) == 0)).any():
        raise EmulationError(f"{name}: a lane runs the shuffle outside its member mask")
    for warp in np.unique(kernel.tids[kernel.mask] // WARP):
        lanes = slice(warp * WARP, (warp + 1) * WARP)
        named = (int(member[lanes][kernel.mask[lanes]][0]) >> np.arange(WARP)) & 1
        if (named[: len(kernel.mask[lanes])].astype(bool) & ~kernel.mask[lanes]).any():
            raise EmulationError(f"{name}: a lane of the member mask does not run the call (undefined)")
    return member


def _shuffle(mode: str) -> Callable[..., np.ndarray]:
    """shfl.sync.{up,down,bfly,idx}.b32 as CUDA's __shfl_*_sync calls it: c = ((32 - width)
    << 8) | clamp, clamp 0 for up and 31 otherwise; the source lane j of each mode, or the
    lane's own value where j is outside its segment."""
    name = {"up": "__shfl_up_sync", "down": "__shfl_down_sync", "bfly": "__shfl_xor_sync", "idx": "__shfl_sync"}[mode]

    def run(kernel: LoweredKernel, args: list[Any], call: Any) -> np.ndarray:
        member, value, b, width = args
        member = _member(kernel, member, name)
        lane = kernel.tids % WARP
        b = np.asarray(b, np.int64) & 31
        segmask = (WARP - np.asarray(width, np.int64)) & 31
        max_lane = (lane & segmask) | ((0 if mode == "up" else 31) & ~segmask)
        if mode == "up":
            source, inside = lane - b, lane - b >= max_lane
        elif mode == "down":
            source, inside = lane + b, lane + b <= max_lane
        elif mode == "bfly":
            source = lane ^ b
            inside = source <= max_lane
        else:
            source = (lane & segmask) | (b & ~segmask)
            inside = source <= max_lane
        source = np.where(inside, source, lane)
        thread = kernel.tids - lane + source
        if (kernel.mask & ((((member >> source) & 1) == 0) | ~kernel.mask[thread])).any():
            raise EmulationError(f"{name}: a lane reads a lane outside the member mask (undefined)")
        return compute(np.asarray(value)[thread], call.dtype)

    return run


def _per_warp(kernel: LoweredKernel, values: np.ndarray, combine: Callable[[np.ndarray], Any]) -> np.ndarray:
    """``combine`` of the active lanes' ``values`` of each thread's warp, for every thread."""
    out = np.zeros(kernel.tids.shape, np.int64)
    for warp in np.unique(kernel.tids // WARP):
        lanes = slice(warp * WARP, (warp + 1) * WARP)
        out[lanes] = combine(np.where(kernel.mask[lanes], values[lanes], 0), kernel.mask[lanes])
    return out


def _bits(flags: np.ndarray) -> int:
    return int(sum(1 << i for i, flag in enumerate(flags) if flag))


def _vote(kind: str) -> Callable[..., np.ndarray]:
    name = {"ballot": "__ballot_sync", "any": "__any_sync", "all": "__all_sync"}[kind]

    def run(kernel: LoweredKernel, args: list[Any], call: Any) -> np.ndarray:
        member, predicate = args
        member = _member(kernel, member, name)
        predicate = np.broadcast_to(np.asarray(predicate) != 0, kernel.tids.shape)
        named = ((member >> (kernel.tids % WARP)) & 1).astype(bool)
        if kind == "ballot":
            return _per_warp(kernel, predicate & named, lambda p, active: _bits(p & active))
        if kind == "any":
            return _per_warp(kernel, predicate & named, lambda p, active: int((p & active).any()))
        return _per_warp(kernel, predicate | ~named, lambda p, active: int(p[active].all()))

    return run


def _activemask(kernel: LoweredKernel, args: list[Any], call: Any) -> np.ndarray:
    return _per_warp(kernel, kernel.mask, lambda p, active: _bits(active))


def _match_any(kernel: LoweredKernel, args: list[Any], call: Any) -> np.ndarray:
    member, value = args
    member = _member(kernel, member, "__match_any_sync")
    value = np.broadcast_to(np.asarray(value), kernel.tids.shape)
    out = np.zeros(kernel.tids.shape, np.int64)
    for t in kernel.tids[kernel.mask]:
        warp = t - t % WARP
        same = [kernel.mask[warp + i] and (member[t] >> i) & 1 and value[warp + i] == value[t]
                for i in range(min(WARP, len(kernel.tids) - warp))]
        out[t] = _bits(same)
    return out


def _match_all(kernel: LoweredKernel, args: list[Any], call: Any) -> np.ndarray:
    member, value = args
    member = _member(kernel, member, "tl_match_all_sync")
    value = np.broadcast_to(np.asarray(value), kernel.tids.shape)
    out = np.zeros(kernel.tids.shape, np.int64)
    for t in kernel.tids[kernel.mask]:
        warp = t - t % WARP
        lanes = [warp + i for i in range(WARP) if (member[t] >> i) & 1]
        out[t] = member[t] if all(value[i] == value[t] for i in lanes) else 0
    return out


def _block_vote(kind: str) -> Callable[..., np.ndarray]:
    """__syncthreads_count/and/or: a barrier of the whole block, so every thread must run it."""
    def run(kernel: LoweredKernel, args: list[Any], call: Any) -> np.ndarray:
        if not kernel.mask.all():
            raise EmulationError(f"__syncthreads_{kind}: some threads of the block do not reach the barrier")
        predicate = np.broadcast_to(np.asarray(args[0]) != 0, kernel.tids.shape)
        total = {"count": int(predicate.sum()), "and": int(predicate.all()), "or": int(predicate.any())}[kind]
        return np.full(kernel.tids.shape, total, np.int64)

    return run


def fns_reference(mask: int, base: int, offset: int) -> int:
    """CUDA's __fns (PTX ``fns.b32``, its pseudocode): the ``offset``-th set bit of ``mask``
    from bit ``base`` up (offset > 0) or down (< 0); offset 0: ``base`` if that bit is set;
    0xFFFFFFFF where there is none."""
    mask, base = int(mask) & 0xFFFFFFFF, int(base) & 0xFFFFFFFF
    if offset == 0:
        return base if base < 32 and mask >> base & 1 else 0xFFFFFFFF
    step, count, pos = (1 if offset > 0 else -1), abs(int(offset)) - 1, base
    while 0 <= pos < 32:
        if mask >> pos & 1:
            if count == 0:
                return pos
            count -= 1
        pos += step
    return 0xFFFFFFFF


def _fns(kernel: LoweredKernel, args: list[Any], call: Any) -> np.ndarray:
    mask, base, offset = (np.broadcast_to(np.asarray(a, np.int64), kernel.tids.shape) for a in args)
    return np.vectorize(fns_reference, otypes=[np.int64])(mask, base, offset)


def _ffs(value: Any, bits: int) -> np.ndarray:
    """CUDA's __ffs / __ffsll: the one-based position of the lowest set bit, 0 for none."""
    x = np.asarray(value).astype(np.int64 if bits == 64 else np.int32).view(np.uint64 if bits == 64 else np.uint32)
    found = np.zeros(x.shape, np.int64)
    for position in range(bits, 0, -1):  # the lowest set bit writes last
        found = np.where((x >> np.array(position - 1, x.dtype)) & np.array(1, x.dtype) != 0, position, found)
    return found


def _no_op(kernel: LoweredKernel, args: list[Any], call: Any = None) -> None:
    return None


EXTERNS: dict[str, Callable[..., Any]] = {
    "tl_ldmatrix_x4": lambda kernel, args, call: _ldmatrix(kernel, args, False),
    "tl_ldmatrix_x4_trans": lambda kernel, args, call: _ldmatrix(kernel, args, True),
    "tl_mma_m16n8k16_f16_f32": lambda kernel, args, call: _mma_m16n8k16(kernel, args, "f16"),
    "tl_mma_m16n8k16_bf16_f32": lambda kernel, args, call: _mma_m16n8k16(kernel, args, "bf16"),
    "tl_mma_m16n8k16_f16_f16": lambda kernel, args, call: _mma_m16n8k16(kernel, args, "f16", acc="f16"),
    "tl_mma_m16n8k32_s8_s32": lambda kernel, args, call: _mma_m16n8k32(kernel, args, "s8"),
    "tl_mma_m16n8k32_e4m3_f32": lambda kernel, args, call: _mma_m16n8k32(kernel, args, "e4m3"),
    "tl_mma_m16n8k8_tf32_f32": lambda kernel, args, call: _mma_m16n8k8_tf32(kernel, args),
    "tl_mma_m16n8k32_e5m2_f32": lambda kernel, args, call: _mma_m16n8k32(kernel, args, "e5m2"),
    "tl_ldmatrix_x2": lambda kernel, args, call: _ldmatrix(kernel, args, False, count=2),
    "tl_ldmatrix_x2_trans": lambda kernel, args, call: _ldmatrix(kernel, args, True, count=2),
    "tl_cp_async_16": lambda kernel, args, call: _cp_async_16(kernel, args),
    "tl_copy_16_partial": lambda kernel, args, call: _copy_16_partial(kernel, args),
    "tl_cp_async_commit": lambda kernel, args, call: _cp_async_commit(kernel, args),
    "atomicAdd": _atomic_add,
    "tl_atomic_add_bf16": _atomic_add,  # atomicAdd of bfloat16 (a CAS loop before sm_80)
    **{f"tl_atomic_add_{t}": _vector_atomic_add for t in ("f32x2", "f32x4", "f16x2", "bf16x2")},
    "tl_cp_async_wait": lambda kernel, args, call: _cp_async_wait(kernel, args),
    "tl_wgmma_desc": lambda kernel, args, call: _wgmma_desc(kernel, args),
    "tl_wgmma_desc_add": lambda kernel, args, call: _wgmma_desc_add(kernel, args),
    # wgmma runs when issued: its operands and accumulators are already in place then (the
    # fence, commit and wait order the registers around it on the GPU)
    "tl_wgmma_fence": _no_op, "tl_wgmma_commit": _no_op, "tl_wgmma_wait": _no_op,
    "tl_fence_proxy_async": _no_op,
    "tl_named_barrier_sync": _no_op,  # threads run in lockstep here: every barrier is met
    "tl_named_barrier_arrive": _no_op,
    "tl_cp_async_mbarrier_arrive": _no_op,  # cp.async lands at once here
    "__shfl_xor_sync": _shuffle("bfly"),
    "__shfl_sync": _shuffle("idx"),
    "__shfl_down_sync": _shuffle("down"),
    "__shfl_up_sync": _shuffle("up"),
    "__ballot_sync": _vote("ballot"),
    "__any_sync": _vote("any"),
    "__all_sync": _vote("all"),
    "__activemask": _activemask,
    "__match_any_sync": _match_any,
    "tl_match_all_sync": _match_all,
    "__syncwarp": _no_op,  # the emulator runs a warp's lanes together
    "__syncthreads_count": _block_vote("count"),
    "__syncthreads_and": _block_vote("and"),
    "__syncthreads_or": _block_vote("or"),
    "__fns": _fns,
    "__ffs": lambda kernel, args, call: _ffs(args[0], 32),
    "__ffsll": lambda kernel, args, call: _ffs(args[0], 64),
    "__habs": lambda kernel, args, call: np.abs(args[0]),  # |x| of a half (T.abs of float16)
    # tl_device.h's float8_e8m0fnu conversions (CUDA's; test_float8_e8m0.py checks the C helpers
    # against cuda_fp8.h and against these references)
    "tl_cvt_float_to_e8m0": lambda kernel, args, call: compute(e8m0_bits(args[0]), "uint8"),
    "tl_cvt_double_to_e8m0": lambda kernel, args, call: compute(e8m0_bits(args[0]), "uint8"),
    "tl_cvt_e8m0_to_float": lambda kernel, args, call: e8m0_values(args[0]).astype(np.float32),
}

"""RoundBF16Stores: a value stored into a kernel's own bfloat16 buffer (or bound to a
bfloat16 name), and the result of each bfloat16 ``+ - * /``, is rounded to bfloat16 on the
CPU, as on the GPUs.

The CPU has no bfloat16 arithmetic, so TVM's ``BF16ComputeLegalize`` (in the shared
``flatten_and_vectorize``) computes in float32 and, for a buffer the kernel allocates
(``T.alloc_fragment`` / ``alloc_shared`` / ``alloc_local`` / ``alloc_var``) or a bfloat16
``Bind``, changes the storage itself to float32 and drops every cast to bfloat16: the
stored value kept its float32 bits, so a kernel read back values that CUDA (whose
``__nv_bfloat16`` stores round with ``__float2bfloat16_rn``) and upstream never see.
Tensor parameters were not affected: their stores are converted to 16 bits.

This pass runs before that one and wraps such a value ``v`` as
``bfloat16(round(float32(v)))``, where ``round`` is float32 -> float32 arithmetic on the
bits that the legalizer keeps: round to nearest, ties to even (add ``0x7FFF`` plus the
lowest kept bit, clear the low 16 bits), overflow to infinity, and a NaN stays a NaN with
its sign and high payload and the quiet bit set (as x86's ``VCVTNEPS2BF16`` does, Intel SDM
vol. 2; CUDA and torch give a canonical NaN, which compares the same). The legalizer then
drops the outer cast and stores the rounded float32, which a load reads back exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx
from tvm.sym.analyzer import Analyzer

from ...backend.pass_pipeline import prim_func_pass
from ...language.ops import is_call_to
from ...transform.reduce_kinds import isnan

_SIGN_EXP_MANTISSA7 = 0xFFFF0000  # the bits a bfloat16 keeps of a float32
_QUIET_BIT = 0x00400000


def _is_bf16(dtype: Any) -> bool:
    return str(dtype).split("x")[0] == "bfloat16"


def rounded_to_bf16(value: Any) -> Any:
    """``value`` (any float, vectors lane by lane) rounded to bfloat16, as a float32 value
    whose low 16 bits are zero."""
    lanes = tvm.DataType(str(value.ty)).lanes
    f32, u32 = ("float32", "uint32") if lanes == 1 else (f"float32x{lanes}", f"uint32x{lanes}")
    if str(value.ty) != f32:
        value = tirx.Cast(f32, value)
    # a literal is rounded here: TVM's C codegen reinterprets through a pointer to its operand
    constant = Analyzer().simplify(value)
    if isinstance(constant, tirx.FloatImm):
        return tirx.FloatImm(f32, float(_round_constant(constant.value)))

    def const(bits: int) -> Any:
        scalar = tirx.const(bits, "uint32")
        return scalar if lanes == 1 else tirx.Broadcast(scalar, lanes)

    bits = tirx.reinterpret(u32, value)
    lowest_kept = tirx.bitwise_and(tirx.shift_right(bits, const(16)), const(1))
    nearest_even = bits + lowest_kept + const(0x7FFF)
    quiet_nan = tirx.bitwise_or(bits, const(_QUIET_BIT))
    kept = tirx.Select(isnan(value), quiet_nan, nearest_even)
    return tirx.reinterpret(f32, tirx.bitwise_and(kept, const(_SIGN_EXP_MANTISSA7)))


def _round_constant(value: float) -> np.float32:
    bits = int(np.array(value, dtype=np.float32).view(np.uint32))
    if np.isnan(value):
        bits |= _QUIET_BIT
    else:
        bits += ((bits >> 16) & 1) + 0x7FFF
    return np.array(bits & _SIGN_EXP_MANTISSA7, dtype=np.uint32).view(np.float32)


def _as_stored(value: Any) -> Any:
    return tirx.Cast(str(value.ty), rounded_to_bf16(value))


def _own_buffers(body: Any) -> list[Any]:
    """The kernel's allocations and the views declared over them (not its parameters)."""
    own: list[Any] = []

    def on_alloc(node: Any) -> None:
        own.append(node.buffer)

    def on_decl(node: Any) -> None:
        data = node.data
        if is_call_to(data, "tirx.buffer_data") and any(data.args[0].same_as(b) for b in own):
            own.append(node.buffer)

    tvm_ffi.structural_walk(body, [(tirx.AllocBuffer, on_alloc), (tirx.DeclBuffer, on_decl)])
    return own


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    own = [b for b in _own_buffers(func.body) if _is_bf16(b.ty.dtype)]

    def on_store(store: Any) -> Any:
        if not any(store.buffer.same_as(b) for b in own):
            return store
        return tirx.BufferStore(store.buffer, _as_stored(store.value), store.indices)

    def on_bind(bind: Any) -> Any:
        if not _is_bf16(bind.var.ty):
            return bind
        return tirx.Bind(bind.var, _as_stored(bind.value))

    def on_arithmetic(node: Any) -> Any:
        # each bfloat16 + - * / rounds its result, as CUDA's __nv_bfloat16 operators do
        # (upstream's gdn wy_fast: K * Beta in bfloat16, then times a float32 gate)
        return _as_stored(node) if _is_bf16(node.ty.dtype) else node

    rules = [(tirx.Bind, on_bind), ((tirx.Add, tirx.Sub, tirx.Mul, tirx.Div), on_arithmetic)]
    if own:
        rules.append((tirx.BufferStore, on_store))
    body = tvm_ffi.structural_map(func.body, rules, order="post")
    return func if body.same_as(func.body) else func.with_body(body)


def RoundBF16Stores() -> Any:
    return prim_func_pass(_run, "tl.cpu.RoundBF16Stores")

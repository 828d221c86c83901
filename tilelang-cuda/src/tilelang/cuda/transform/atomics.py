"""LowerAtomics (CUDA): core's atomic lowering with CUDA's atomic functions (CUDA C++
Programming Guide, "Atomic Functions") and the helpers of ``tl_device.h`` that fill their
gaps: ``tl_atomic_max/min`` (a compare-and-swap loop) for floating max / min,
``tl_atomic_add_64`` for 64-bit integer adds, ``tl_atomic_add_bf16`` for bfloat16 adds
before sm_80 (``LowerAtomics(native_bf16=False)``; atomicAdd of bfloat16 from sm_80),
``tl_atomic_load/store``, and ``tl_atomic_ordered`` for a ``memory_order`` stronger than
relaxed (CUDA's atomics are relaxed; it puts ``__threadfence()`` before (release) and / or
after (acquire) the atomic). A tile atomic written with ``use_tma=True`` is served by these
element atomics where tma_reduce.py's bulk reductions cannot serve it (the same result).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import tvm_ffi
from tilelang.plugin import AtomicFunctions, prim_func_pass, substitute
from tilelang.plugin import LowerAtomics as _LowerAtomics
from tvm import tirx
from tvm.ir import StringImm, TensorLoad
from tvm.sym.analyzer import Analyzer

_FLOATS = ("float32", "float64", "float16", "bfloat16")
_BITWISE = ("int32", "uint32")
#: int64 / uint64 are `long` / `unsigned long` in TVM's CUDA source, for which CUDA declares
#: no overload: their adds go through tl_atomic_add_64 (atomicAdd on unsigned long long), the
#: other operations stay on 32-bit integers
_WIDE_ADDS = ("int64", "uint64")
CUDA_ATOMICS = AtomicFunctions(
    vendor="CUDA",
    rmw={
        "add": ("atomicAdd", ("float32", "float64", "int32", "uint32", *_WIDE_ADDS, "float16", "bfloat16")),
        "max": ("atomicMax", ("int32", "uint32", *_FLOATS)),
        "min": ("atomicMin", ("int32", "uint32", *_FLOATS)),
        "or": ("atomicOr", _BITWISE),
        "and": ("atomicAnd", _BITWISE),
        "xor": ("atomicXor", _BITWISE),
    },
    float_minmax={"max": "tl_atomic_max", "min": "tl_atomic_min"},
    helpers={("add", dtype): "tl_atomic_add_64" for dtype in _WIDE_ADDS},
    ordered="tl_atomic_ordered",
    load="tl_atomic_load",
    store="tl_atomic_store",
    # loads and stores move the element's bits: any 2-, 4- or 8-byte type
    access_dtypes=("int16", "uint16", "int32", "uint32", "int64", "uint64", *_FLOATS),
)


#: before sm_80: CUDA declares atomicAdd of bfloat16 from sm_80 on
CUDA_ATOMICS_BEFORE_SM80 = replace(CUDA_ATOMICS, helpers={**CUDA_ATOMICS.helpers,
                                                          ("add", "bfloat16"): "tl_atomic_add_bf16"})


def LowerAtomics(native_bf16: bool = True) -> Any:
    return _LowerAtomics(CUDA_ATOMICS if native_bf16 else CUDA_ATOMICS_BEFORE_SM80, "tl.cuda.LowerAtomics")


#: element dtype -> (lanes -> tl_device.h's vector add, the first sm_ version that has it)
_VECTOR_ADDS = {
    "float32": ({2: "tl_atomic_add_f32x2", 4: "tl_atomic_add_f32x4"}, 90),
    "float16": ({2: "tl_atomic_add_f16x2"}, 70),  # its unaligned fallback: atomicAdd of half, sm_70
    "bfloat16": ({2: "tl_atomic_add_bf16x2"}, 80),
}


def _packed(loop: Any, arch: int, analyzer: Any, simplifier: Any) -> Any:
    """``loop`` as vector adds, or None where it is not a loop of 2 or 4 atomicAdds (value
    discarded) of consecutive elements of one global buffer from an aligned first one.
    ``analyzer`` knows the function's lets; ``simplifier`` does not (the index keeps them)."""
    body = loop.body
    if isinstance(body, tirx.SeqStmt) and all(isinstance(st, tirx.Bind) for st in body.seq[:-1]):
        # CSE's lets of the loop's own values, read by the atomic: their values in place
        body = body.seq[-1]
        for bind in reversed(loop.body.seq[:-1]):
            body = substitute(body, [(bind.var, bind.value)])
    if not (loop.kind in (tirx.ForKind.SERIAL, tirx.ForKind.UNROLLED)  # one thread's own loop
            and isinstance(loop.min, tirx.IntImm) and loop.min.value == 0 and isinstance(loop.extent, tirx.IntImm)
            and isinstance(body, tirx.Evaluate) and isinstance(body.value, tirx.Call)):
        return None
    call, lanes, var = body.value, int(loop.extent.value), loop.loop_var
    if getattr(call.op, "name", None) != "tirx.call_extern" or len(call.args) != 3 \
            or not isinstance(call.args[0], StringImm) or call.args[0].value != "atomicAdd":
        return None
    address, value = call.args[1], call.args[2]
    load = address.args[0] if isinstance(address, tirx.Call) and getattr(address.op, "name", "") == "tirx.address_of" \
        and address.args and isinstance(address.args[0], TensorLoad) else None
    if load is None or len(load.indices) != 1 or load.source.scope() != "global":
        return None
    reads: list[Any] = []  # a value read from the buffer being added to would be read before the adds
    tvm_ffi.structural_walk(value, (TensorLoad, lambda ld: reads.append(ld) if ld.source.same_as(load.source) else None))
    if reads:
        return None
    functions, since = _VECTOR_ADDS.get(str(load.source.dtype), ({}, 0))
    width = 4 if lanes % 4 == 0 and 4 in functions else 2 if lanes % 2 == 0 and 2 in functions else 0
    if arch < since or not width or lanes > 4:
        return None
    index = load.indices[0]
    first = simplifier.simplify(substitute(index, [(var, tirx.const(0, var.ty))]))
    if not analyzer.can_prove_equal(index - first, var) \
            or not analyzer.can_prove_equal(tirx.floormod(first + load.source.elem_offset, width), 0):
        return None
    packs = []
    for start in range(0, lanes, width):
        lane_values = [substitute(value, [(var, tirx.const(start + i, var.ty))]) for i in range(width)]
        at = tirx.address_of(tirx.BufferLoad(load.source, [first + start if start else first]))
        packs.append(tirx.Evaluate(tirx.call_extern("void", functions[width], at, *lane_values)))
    return packs[0] if len(packs) == 1 else tirx.SeqStmt(packs)


def PackAtomicAdds(arch: int) -> Any:
    """A loop of 2 or 4 atomicAdds to consecutive global elements (what TVM's vectorizer
    leaves of a vectorized tile atomic: it scalarizes a vectorized loop around a call) as
    one vector add each (``tl_atomic_add_f32x2/x4``: float2 / float4 atomicAdd, sm_90;
    ``..._f16x2``, ``..._bf16x2``: sm_70 / sm_80), where the index of the first element is
    a multiple of the vector (tensor parameters are 16-byte aligned: the launchers check
    it; a tensor made from a pointer need not be, so the helpers test the address and add
    element by element where it is not aligned). Each element is still added atomically;
    the adds of one thread to distinct elements commute."""

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        if arch < 70:
            return func
        analyzer, simplifier = Analyzer(), Analyzer()
        binds: list[Any] = []  # CSE's lets (cse_v = the address's common part): their values
        tvm_ffi.structural_walk(func.body, (tirx.Bind, binds.append))
        for bind in binds:
            if sum(b.var.same_as(bind.var) for b in binds) == 1 and str(bind.var.ty).startswith("int"):
                analyzer.bind(bind.var, bind.value)
        changed = [False]

        def on_for(loop: Any) -> Any:
            packed = _packed(loop, arch, analyzer, simplifier)
            if packed is None:
                return loop
            changed[0] = True
            return packed

        body = tvm_ffi.structural_map(func.body, (tirx.For, on_for), order="post")
        return func.with_body(body) if changed[0] else func

    return prim_func_pass(run, "tl.cuda.PackAtomicAdds")

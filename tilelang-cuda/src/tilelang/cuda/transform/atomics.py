"""LowerAtomics (CUDA): core's atomic lowering with CUDA's atomic functions (CUDA C++
Programming Guide, "Atomic Functions") and the helpers of ``tl_device.h`` that fill their
gaps: ``tl_atomic_max/min`` (a compare-and-swap loop) for floating max / min,
``tl_atomic_add_64`` for 64-bit integer adds, ``tl_atomic_add_bf16`` for bfloat16 adds
before sm_80 (``LowerAtomics(native_bf16=False)``; atomicAdd of bfloat16 from sm_80),
``tl_atomic_load/store``, and ``tl_atomic_ordered`` for a ``memory_order`` stronger than
relaxed (CUDA's atomics are relaxed; it puts ``__threadfence()`` before (release) and / or
after (acquire) the atomic). A tile atomic written with ``use_tma=True`` is served by these
element atomics (the same result; this backend has no TMA bulk reduction).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tilelang.plugin import AtomicFunctions
from tilelang.plugin import LowerAtomics as _LowerAtomics

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

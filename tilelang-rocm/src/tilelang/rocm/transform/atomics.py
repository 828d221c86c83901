"""LowerAtomics (ROCm): core's atomic lowering with HIP's atomic functions (HIP
Programming Guide, "Atomic Functions"; they are named as CUDA names them) and the helpers
of ``hip_device.h``: ``tl_hip_atomic_max/min`` (compare-and-swap loops) for floating max /
min, ``tl_hip_atomic_load/store`` and ``tl_hip_atomic_ordered`` for orders stronger than
relaxed. The helpers are not called ``tl_atomic_*``: the CUDA backend's source hook, a
process-wide TVM global, prepends its CUDA header to any source that names those."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import AtomicFunctions
from tilelang.plugin import LowerAtomics as _LowerAtomics

_BITWISE = ("int32", "uint32")
#: HIP 5.2's overloads: no 16-bit atomicAdd, atomicCAS on 32- and 64-bit words only
HIP_ATOMICS = AtomicFunctions(
    vendor="HIP",
    rmw={
        "add": ("atomicAdd", ("float32", "float64", "int32", "uint32")),
        "max": ("atomicMax", ("int32", "uint32", "float32", "float64")),
        "min": ("atomicMin", ("int32", "uint32", "float32", "float64")),
        "or": ("atomicOr", _BITWISE),
        "and": ("atomicAnd", _BITWISE),
        "xor": ("atomicXor", _BITWISE),
    },
    float_minmax={"max": "tl_hip_atomic_max", "min": "tl_hip_atomic_min"},
    ordered="tl_hip_atomic_ordered",
    load="tl_hip_atomic_load",
    store="tl_hip_atomic_store",
    access_dtypes=("int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64",
                   "float16", "bfloat16"),
)


def LowerAtomics() -> Any:
    return _LowerAtomics(HIP_ATOMICS, "tl.rocm.LowerAtomics")

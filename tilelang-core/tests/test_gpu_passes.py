"""Core's GPU-neutral passes (tilelang.transform.gpu) on their own, with the parameters a
GPU backend passes: no GPU backend is involved."""

from __future__ import annotations

import pytest
import tilelang
import tilelang.language as T
import tvm
import tvm_ffi
from tilelang.backend.pass_pipeline import take_pass_error
from tilelang.language.ops import ATOMIC_RMW_ELEMENT
from tilelang.transform import LowerTileOps
from tilelang.transform.gpu import (
    ALIGNMENT_ATTR,
    AtomicFunctions,
    LowerAtomics,
    PartitionParallelLoops,
)
from tvm import tirx


def _add(dtype="float32"):
    @T.prim_func
    def add(A: T.Tensor((64, 64), dtype), B: T.Tensor((64, 64), dtype)):
        with T.Kernel(2, threads=64) as bx:
            for i, j in T.Parallel(32, 64):
                B[bx * 32 + i, j] = A[bx * 32 + i, j] + A[bx * 32 + i, j]

    return add


def _partitioned(func, max_vector_bytes):
    mod = tvm.IRModule({"main": func})
    mod = tvm.transform.Sequential([LowerTileOps(), PartitionParallelLoops(max_vector_bytes)])(mod)
    return mod["main"]


def _vector_lanes(func) -> list[int]:
    lanes = []
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda f: lanes.append(int(f.extent.value))
                                        if f.kind == tirx.ForKind.VECTORIZED else None))
    return lanes


@pytest.mark.parametrize("max_bytes,dtype,lanes", [(16, "float32", 4), (8, "float32", 2), (4, "float32", 1),
                                                   (16, "float16", 8), (32, "float16", 16)])
def test_vectors_are_as_wide_as_the_backend_allows(max_bytes, dtype, lanes):
    func = _partitioned(_add(dtype), max_bytes)
    assert _vector_lanes(func) == ([lanes] if lanes > 1 else [])
    alignment = func.attrs.get(ALIGNMENT_ATTR) if func.attrs else None
    assert (int(alignment) if alignment is not None else 0) == (max_bytes if lanes > 1 else 0)


@pytest.mark.parametrize("bad", [0, 3, 64])
def test_a_vector_width_no_gpu_has_is_refused(bad):
    with pytest.raises(tilelang.ManifestError, match=rf"PartitionParallelLoops\(max_vector_bytes={bad}\) in a "
                                                     r"backend's pipeline: use the target's widest access"):
        PartitionParallelLoops(bad)


ACME = AtomicFunctions(vendor="ACME", rmw={"add": ("acme_add", ("float32",)), "max": ("acme_max", ("int32", "float32")),
                                           "min": ("acme_min", ("int32",)), "or": ("acme_or", ()),
                                           "and": ("acme_and", ()), "xor": ("acme_xor", ())},
                       float_minmax={"max": "acme_fmax"}, ordered="acme_ordered", load="acme_load",
                       store="acme_store", access_dtypes=("float32",))


def test_atomic_functions_are_the_dialects():
    assert ACME.function("add", "float32") == "acme_add"
    assert ACME.function("max", "int32") == "acme_max"
    assert ACME.function("max", "float32") == "acme_fmax"  # floating max: the dialect's helper
    assert ACME.function("add", "int32") is None


def _atomic(dtype, order="relaxed"):
    @T.prim_func
    def atomic(A: T.Tensor((64,), dtype), O: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                T.atomic_add(O[0], A[i], memory_order=order)

    return atomic


def _lowered_atomics(func):
    try:
        mod = tvm.transform.Sequential([LowerTileOps(), LowerAtomics(ACME)])(tvm.IRModule({"main": func}))
    except Exception as err:  # noqa: BLE001 - as the engine does: the pass's own error, not TVM's wrapper
        raise (take_pass_error() or err) from None
    calls = []
    tvm_ffi.structural_walk(mod["main"].body, (tvm.ir.Call, lambda c: calls.append(c)))
    return [str(c.args[0].value) for c in calls if str(c.op.name) == "tirx.call_extern"], calls


def test_atomics_lower_to_the_dialects_functions():
    names, calls = _lowered_atomics(_atomic("float32"))
    assert names == ["acme_add"] and not any(str(c.op.name) == ATOMIC_RMW_ELEMENT for c in calls)
    names, _ = _lowered_atomics(_atomic("float32", order="release"))
    assert sorted(names) == ["acme_add", "acme_ordered"]  # acme_ordered(3, acme_add(...))


def test_a_type_the_dialect_lacks_is_refused_with_its_types():
    @T.prim_func
    def int_add(A: T.Tensor((64,), "int32"), O: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                T.atomic_add(O[0], A[i])

    with pytest.raises(tilelang.LanguageError, match=r"T.atomic_add on O \(int32\): ACME has atomic adds for "
                                                     r"float32; use one of those types"):
        _lowered_atomics(int_add)

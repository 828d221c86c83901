"""T.__ffs (upstream's spelling of CUDA's __ffs / __ffsll), as integer arithmetic: on the
CPU (llvm and c) against Python's, and lowered for CUDA (nvcc)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.backend
import tilelang.language as T
from tilelang.errors import LanguageError


def bit_search_kernel():
    @T.prim_func
    def main(M: T.Tensor((64,), "uint32"), B: T.Tensor((64,), "int32"), L: T.Tensor((64,), "int64")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                B[i] = T.__ffs(M[i])
                L[i] = T.cast(T.__ffs(T.cast(M[i], "uint64") << T.uint64(32)), "int64")

    return main


def ffs(x: int) -> int:
    return 0 if x == 0 else (x & -x).bit_length()


def masks() -> np.ndarray:
    m = np.random.default_rng(0).integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    m[:5] = [0, 1 << 31, 0xFFFFFFFF, 0b1000, 0x80000001]
    return m


def expected(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.array([ffs(int(x)) for x in m], np.int32), np.array([ffs(int(x) << 32) for x in m], np.int64)


@pytest.mark.parametrize("target", ["llvm", "c"])
def test_bit_searches_on_the_cpu(target):
    m = masks()
    b, wide = np.zeros(64, np.int32), np.zeros(64, np.int64)
    tilelang.compile(bit_search_kernel(), target=target)(m, b, wide)
    eb, ewide = expected(m)
    np.testing.assert_array_equal(b, eb)
    np.testing.assert_array_equal(wide, ewide)


def test_ffs_compiles_for_cuda():
    if "cuda" not in tilelang.backend.registered_backends():
        pytest.skip("tilelang-cuda is not installed")
    source = tilelang.lower(bit_search_kernel(), target={"kind": "cuda", "arch": "sm_90"}).device_source
    # CUDA's own functions (tilelang-cuda's FindFirstSet), as upstream's source has them
    assert "__ffs(" in source and "__ffsll(" in source and "__popc" not in source


def test_bit_searches_check_their_operands():
    with pytest.raises(LanguageError, match=r"T.__ffs: expected a 32 or 64-bit integer, got float32"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int32")):
            with T.Kernel(1, threads=4):
                for i in T.Parallel(4):
                    B[i] = T.__ffs(A[i])

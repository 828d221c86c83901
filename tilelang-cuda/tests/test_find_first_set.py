"""T.__ffs on CUDA (transform/warp_ops.py's FindFirstSet): CUDA's ``__ffs`` / ``__ffsll``
instead of core's arithmetic, which names its operand three times: a ballot inside was
taken three times. Checked in the source, with nvcc and in the lowered-IR emulator against
Python's lowest set bit (upstream's test_ffs_ballot_sync: the first lane at or above 7)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.cuda import toolchain

SM90 = {"kind": "cuda", "arch": "sm_90"}


def first_set_kernel():
    @T.prim_func
    def main(M: T.Tensor((32,), "uint64"), S: T.Tensor((32,), "int32"), B: T.Tensor((32,), "int32"),
             C: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            B[tx] = T.__ffs(M[tx])
            C[tx] = T.__ffs(S[tx])
            S[tx] = T.__ffs(T.ballot_sync(tx >= 7)) - 1

    return main


def ffs(x: int, bits: int) -> int:
    x &= (1 << bits) - 1
    return 0 if x == 0 else (x & -x).bit_length()


def test_ffs_is_cudas_own_and_takes_its_operand_once():
    source = tilelang.lower(first_set_kernel(), target=SM90).device_source
    kernel = source[source.index('extern "C" __global__'):]
    assert kernel.count("__ffsll(") == 2 and kernel.count("__ffs(") == 1
    assert kernel.count("__ballot_sync(") == 1 and "__popc" not in kernel
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90a", "ffs")[:4] == b"\x7fELF"


def test_ffs_as_lowered_equals_the_lowest_set_bit():
    rng = np.random.default_rng(5)
    m = rng.integers(0, 2**63, 32, dtype=np.int64).astype(np.uint64) << np.uint64(1)
    m[:4] = [0, 1 << 63, 1, 0xFFFF000000000000]
    s = rng.integers(-2**31, 2**31, 32, dtype=np.int64).astype(np.int32)
    s[:3] = [0, -2**31, -1]
    b, c = np.zeros(32, np.int32), np.zeros(32, np.int32)
    given = s.copy()
    lowered_kernel(tilelang.lower(first_set_kernel(), target=SM90).device_mod)(m, s, b, c)
    np.testing.assert_array_equal(b, [ffs(int(x), 64) for x in m])
    np.testing.assert_array_equal(c, [ffs(int(x), 32) for x in given])
    np.testing.assert_array_equal(s, np.full(32, 7))  # the lowest lane whose predicate holds


@pytest.mark.gpu
def test_ffs_of_a_ballot_on_the_gpu():
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(first_set_kernel(), target="cuda")
    m = torch.tensor([0, 1, 6, 1 << 40] + [3] * 28, dtype=torch.uint64, device="cuda")
    s = torch.full((32,), -8, dtype=torch.int32, device="cuda")
    b, c = torch.zeros(32, dtype=torch.int32, device="cuda"), torch.zeros(32, dtype=torch.int32, device="cuda")
    kernel(m, s, b, c)
    assert b.tolist()[:4] == [0, 1, 2, 41] and c.tolist() == [4] * 32 and s.tolist() == [7] * 32

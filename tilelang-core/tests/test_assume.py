"""T.assume: a promise to the compiler. Over parameters and symbolic dimensions only, the
packed entry point checks it before the call runs (upstream's "Assume: <condition>");
elsewhere it is removed once the middle end ran (transform/assumes.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LaunchError

N = T.dynamic("N")


@T.prim_func
def fill_window(A: T.Tensor((N,), T.float32), start: T.int32):
    with T.Kernel(1, threads=1):
        T.assume(N % 4 == 0)
        for i in T.serial(4):
            T.assume(start + i < N)  # over a loop index: removed, never checked
            A[start + i] = A[start + i] + 1.0


@T.prim_func
def guarded(A: T.Tensor((N,), T.float32), flag: T.int32):
    with T.Kernel(1, threads=1):
        if flag > 0:
            T.assume(N > 100)  # under a branch: not every call makes this promise
            A[0] = 1.0


@pytest.mark.parametrize("backend", ["tvm_ffi", "cython"])
def test_an_assumption_over_the_parameters_is_checked_when_called(backend):
    kernel = tilelang.compile(fill_window, target="cpu", execution_backend=backend)
    a = np.arange(8, dtype=np.float32)
    kernel(a, 2)
    expected = np.arange(8, dtype=np.float32)
    expected[2:6] += 1.0
    np.testing.assert_array_equal(a, expected)
    b = np.zeros(6, dtype=np.float32)
    with pytest.raises(LaunchError, match=r"Assume: N % 4 == 0"):
        kernel(b, 0)
    np.testing.assert_array_equal(b, 0.0)  # refused before anything ran


def test_an_assumption_under_a_branch_is_not_hoisted():
    kernel = tilelang.compile(guarded, target="cpu")
    a = np.zeros(8, dtype=np.float32)
    kernel(a, 0)  # N = 8 breaks the promise, but the branch that makes it is not taken
    np.testing.assert_array_equal(a, 0.0)


def test_assumptions_leave_no_call_in_the_lowered_code():
    artifact = tilelang.lower(fill_window, target="cpu")
    host = str(artifact.host_mod)
    assert "T.assume" not in host
    assert host.count('"Assume: N % 4 == 0"') == 1

"""T.pdl_trigger / T.pdl_sync (upstream's programmatic dependent launch): on the CPU they
order nothing the call does not already order, and are dropped. T.sync_grid (a barrier for
the whole grid) cannot be: the CPU refuses it by name."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError

N = 1024


@T.prim_func
def producer_consumer(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32), C: T.Tensor((N,), T.float32)):
    with T.Kernel(N // 256, threads=256) as bx:
        for i in T.Parallel(256):
            B[bx * 256 + i] = A[bx * 256 + i] + 1.0
        T.pdl_trigger()
    with T.Kernel(N // 256, threads=256) as bx2:
        T.pdl_sync()
        for i in T.Parallel(256):
            C[bx2 * 256 + i] = B[bx2 * 256 + i] * 2.0


@pytest.mark.parametrize("backend", [("cpu", "tvm_ffi"), ("c", "cython")])
def test_a_dependent_pair_of_kernels_runs_in_order(backend):
    a = np.arange(N, dtype=np.float32)
    b, c = np.zeros(N, np.float32), np.zeros(N, np.float32)
    tilelang.compile(producer_consumer, target=backend[0], execution_backend=backend[1])(a, b, c)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(c, (a + 1) * 2)


def test_outside_a_kernel_they_are_refused():
    with pytest.raises(LanguageError, match=r"T.pdl_sync\(\) is only valid inside a T.Kernel frame"):
        T.pdl_sync()


# -- T.sync_grid: a barrier for the whole grid ------------------------------------------------
def _grid_sync_kernel():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.Kernel(4, threads=64) as bx:
            for i in T.Parallel(64):
                A[bx * 64 + i] = A[bx * 64 + i] + 1.0
            T.sync_grid()
            for i in T.Parallel(64):
                A[bx * 64 + i] = A[255 - bx * 64 - i]

    return main


def test_sync_grid_on_a_backend_without_cooperative_launches_is_refused_at_its_line():
    """The CPU runs the blocks one after another: no block could wait for the others."""
    with pytest.raises(LanguageError, match=r"kernel 'main': T.sync_grid\(\) is a barrier for the whole grid, "
                                            r"which target backend 'cpu' cannot launch .*split it into two kernels "
                                            r"at the barrier(.|\n)*test_grid_dependencies.py:\d+"):
        tilelang.compile(_grid_sync_kernel(), target="cpu")


def test_sync_grid_outside_a_kernel_is_refused():
    with pytest.raises(LanguageError, match=r"T.sync_grid\(\) is only valid inside a T.Kernel frame"):
        T.sync_grid()


def test_a_launch_recorded_before_cooperative_launches_reads_as_a_plain_one():
    """Artifacts cached by an earlier version have no "cooperative" key."""
    from tilelang.engine.artifact import KernelLaunch

    old = {"symbol": "k", "args": ["param:0"], "arg_types": ["handle"], "grid": ["1", "1", "1"],
           "block": ["32", "1", "1"], "dynamic_smem": "0"}
    assert KernelLaunch.from_dict(old).cooperative is False
    assert KernelLaunch.from_dict({**old, "cooperative": True}).cooperative is True

"""Where a fragment that only the block's plain per-thread code touches lives, run as lowered.

A fragment no tile op and no T.Parallel reads is placed by how it is written: a store of
each thread's own value at a thread-free index makes it every thread's registers (as
upstream keeps it); a store under a one-thread guard (``tx == 0``) keeps it in shared
memory for the others to read. Kernels go through ``tilelang.lower`` for sm_80 and the
device IR is interpreted in numpy (lowered_emulator.py), compared with numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel

SM80 = {"kind": "cuda", "arch": "sm_80"}


def run(device_mod, *arrays) -> None:
    lowered_kernel(device_mod)(*arrays)


def scalar_fragment_kernel():
    """upstream's mHC pre kernel's norm: a one-element fragment every thread updates in
    the block's scalar code (``rms[0] = T.rsqrt(rms[0] / n + eps)``)."""

    @T.prim_func
    def rms_scale(S: T.Tensor((4,), "float32"), X: T.Tensor((4, 96), "float32"), Y: T.Tensor((4, 96), "float32")):
        with T.Kernel(4, threads=96) as bx:
            rms = T.alloc_fragment(1, "float32")
            rms[0] = 0.0
            for i in T.serial(2):
                rms[0] += S[bx] * 0.5
            rms[0] = T.rsqrt(rms[0] / 96.0 + 1e-6)
            for j in T.Parallel(96):
                Y[bx, j] = X[bx, j] * rms[0]

    return rms_scale


def test_a_fragment_every_thread_updates_in_scalar_code_is_each_threads_own():
    """In shared memory the read-modify-write of one element by 96 threads raced: a warp
    could read rms[0] after another warp had stored its rsqrt (wrong values in some rows,
    different from run to run). Upstream keeps such a fragment as every thread's registers."""
    artifact = tilelang.lower(scalar_fragment_kernel(), target=SM80)
    assert "float rms_ptr[1]" in artifact.device_source  # a register array of each thread
    rng = np.random.default_rng(0)
    s = rng.uniform(1, 4, 4).astype(np.float32)
    x = rng.standard_normal((4, 96)).astype(np.float32)
    y = np.zeros((4, 96), np.float32)
    run(artifact.device_mod, s, x, y)
    np.testing.assert_allclose(y, x / np.sqrt(s / 96.0 + 1e-6)[:, None], rtol=1e-5)


def test_a_fragment_each_thread_stores_its_own_value_in_is_each_threads_own():
    """A producer role's prefetched rows (upstream's seesaw sparse MLA: ``idx[r] =
    Indices[..., (tx - 256) // 8]`` under ``if tx >= 256``): one element, a value per
    thread, through the let-bound ``tx`` of ``T.get_thread_binding()``. In shared memory
    the 64 threads stored into one element and all read the last store."""

    @T.prim_func
    def gather(Index: T.Tensor((64,), "int32"), X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128):
            rows = T.alloc_fragment([2], "int32")
            tx = T.get_thread_binding()
            if tx >= 64:
                rows[0] = Index[tx - 64]
                rows[1] = tx - 64
                Y[rows[1]] = X[rows[0]] * 2.0

    artifact = tilelang.lower(gather, target=SM80)
    assert "int rows_ptr[2]" in artifact.device_source  # each thread's own registers
    rng = np.random.default_rng(3)
    index = rng.permutation(64).astype(np.int32)
    x = rng.standard_normal(64).astype(np.float32)
    y = np.zeros(64, np.float32)
    run(artifact.device_mod, index, x, y)
    np.testing.assert_array_equal(y, x[index] * 2)


def test_a_fragment_one_thread_stores_into_is_read_by_all_threads():
    """``if tx == 0: first[0] = X[tx] * 2``: one thread's value (the index expression names
    the thread, but only thread 0 passes), for every thread to read: shared memory, as
    before, where each thread's own registers would leave the others without it."""

    @T.prim_func
    def broadcast(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            first = T.alloc_fragment([1], "float32")
            tx = T.get_thread_binding()
            if tx == 0:
                first[0] = X[tx] * 2.0
            T.sync_threads()
            Y[tx] = first[0] + X[tx]

    artifact = tilelang.lower(broadcast, target=SM80)
    assert "float first_ptr[1]" not in artifact.device_source
    x = np.random.default_rng(4).standard_normal(64).astype(np.float32)
    y = np.zeros(64, np.float32)
    run(artifact.device_mod, x, y)
    np.testing.assert_allclose(y, x[0] * 2 + x, rtol=1e-6)


@pytest.mark.gpu
def test_a_scalar_fragment_on_the_gpu():
    import torch  # the gpu marker skips the test where torch sees no CUDA GPU

    kernel = tilelang.compile(scalar_fragment_kernel())
    s = torch.rand(4, device="cuda") * 3 + 1
    x = torch.randn(4, 96, device="cuda")
    for _ in range(50):
        y = torch.zeros(4, 96, device="cuda")
        kernel(s, x, y)
        torch.testing.assert_close(y, x / torch.sqrt(s / 96.0 + 1e-6)[:, None])

"""Names assigned inside a ``while`` body, and local buffers inside loops, on the CPU.

Each such name is a one-element local buffer; TVM's LowerTVMBuiltin gave it a runtime
workspace allocated in every iteration and freed once after the loop, which LLVM refused
("Instruction does not dominate all uses") and the C compiler too
(cpu/transform/local_allocations.py)."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T

BACKENDS = [
    pytest.param(("cpu", "tvm_ffi"), id="llvm"),
    pytest.param(("c", "tvm_ffi"), id="c"),
    pytest.param(("c", "cython"), id="c-cython"),
]
N = 37


def _compile(func, backend, out_idx):
    target, execution = backend
    return tilelang.compile(func, out_idx=out_idx, target=target, execution_backend=execution)


def _rand(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype("float32")


@T.prim_func
def _names_in_while(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=1) as _:
        i = T.alloc_var("int32")
        i = 0
        while i < N:
            t = A[i] * 2
            if t > 0:
                u = t + 1
                B[i] = u
            else:
                B[i] = t
            i += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_names_assigned_in_while_body(backend):
    a = _rand(N)
    got = _compile(_names_in_while, backend, [-1])(a)
    np.testing.assert_allclose(got, np.where(a * 2 > 0, a * 2 + 1, a * 2), rtol=1e-6)


ROWS, COLS, TILE = 6, 300, 512  # a 2 KiB tile: above the stack limit, a workspace


@T.prim_func
def _tile_in_while(A: T.Tensor((ROWS, COLS), "float32"), B: T.Tensor((ROWS,), "float32")):
    with T.Kernel(ROWS, threads=1) as row:
        j = T.alloc_var("int32")
        j = 0
        while j < 2:
            tile = T.alloc_local((TILE,), "float32")
            for c in T.serial(COLS):
                tile[c] = A[row, c] * (j + 1)
            total = T.alloc_var("float32")
            total = 0.0
            for c in T.serial(COLS):
                total += tile[COLS - 1 - c]
            B[row] = total
            j += 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_tile_allocated_in_while_body(backend):
    a = _rand(ROWS, COLS)
    got = _compile(_tile_in_while, backend, [-1])(a)
    np.testing.assert_allclose(got, 2 * a.sum(axis=1), rtol=1e-4, atol=1e-4)


STEPS = 300_000  # a stack that grew by one scalar slot per iteration would overflow


@T.prim_func
def _many_iterations(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=1) as _:
        k = T.alloc_var("int32")
        k = 0
        acc = T.alloc_var("float32")
        acc = 0.0
        while k < STEPS:
            v = A[k % N]
            acc += v
            k += 1
        B[0] = acc


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_while_loop_allocates_nothing_per_iteration(backend):
    a = np.ones(N, dtype="float32")
    got = _compile(_many_iterations, backend, [-1])(a)
    assert got[0] == pytest.approx(float(STEPS), rel=1e-3)

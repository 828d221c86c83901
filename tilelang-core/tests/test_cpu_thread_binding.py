"""``T.thread_binding`` of a kernel's own thread axis on the CPU: the loop variable is that
thread index (as core's BindNestedThreadLoops makes it on the GPU); before, TVM's CPU
codegen stopped with "cannot handle for type launch_thread"."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError

BACKENDS = [
    pytest.param(("cpu", "tvm_ffi"), id="llvm"),
    pytest.param(("c", "tvm_ffi"), id="c"),
    pytest.param(("c", "cython"), id="c-cython"),
]
M, K, THREADS = 16, 256, 32


def _compile(func, backend):
    target, execution = backend
    return tilelang.compile(func, out_idx=[-1], target=target, execution_backend=execution)


def _operands(rows, cols):
    rng = np.random.default_rng(0)
    return rng.standard_normal((rows, cols)).astype("float32"), rng.standard_normal(cols).astype("float32")


@T.prim_func
def _gemv_shared_partials(A: T.Tensor((M, K), "float32"), x: T.Tensor((K,), "float32"),
                          y: T.Tensor((M,), "float32")):
    with T.Kernel(M, threads=THREADS) as row:
        partial = T.alloc_shared((THREADS,), "float32")
        for kr in T.thread_binding(0, THREADS, thread="threadIdx.x"):
            acc = T.alloc_var("float32")
            acc = 0.0
            for j in T.serial(K // THREADS):
                acc += A[row, j * THREADS + kr] * x[j * THREADS + kr]
            partial[kr] = acc
        T.sync_threads()
        total = T.alloc_var("float32")
        total = 0.0
        for t in T.serial(THREADS):
            total += partial[t]
        y[row] = total


@pytest.mark.parametrize("backend", BACKENDS)
def test_gemv_threads_bound_by_loop_sum_through_shared(backend):
    a, x = _operands(M, K)
    np.testing.assert_allclose(_compile(_gemv_shared_partials, backend)(a, x), a @ x, rtol=1e-4, atol=1e-4)


N_PART = 4  # rows per block, one per threadIdx.y; threadIdx.x splits each row's sum


@T.prim_func
def _gemv_allreduce(A: T.Tensor((M, K), "float32"), x: T.Tensor((K,), "float32"),
                    y: T.Tensor((M,), "float32")):
    with T.Kernel(M // N_PART, threads=(THREADS, N_PART)) as bx:
        accum = T.alloc_local((1,), "float32")
        reduced = T.alloc_local((1,), "float32")
        kr = T.thread_binding(0, THREADS, thread="threadIdx.x")
        ni = T.thread_binding(0, N_PART, thread="threadIdx.y")
        T.clear(accum)
        for j in T.serial(K // THREADS):
            accum[0] += A[bx * N_PART + ni, kr * (K // THREADS) + j] * x[kr * (K // THREADS) + j]
        with T.attr(T.comm_reducer(lambda a, b: a + b, [T.cast(0, "float32")]), "reduce_scope",
                    T.reinterpret(T.uint64(0), dtype="handle")):
            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), accum[0], True, reduced[0], kr, dtype="handle"))
        if kr == 0:
            y[bx * N_PART + ni] = reduced[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_gemv_thread_allreduce_over_bound_index(backend):
    """upstream's dequantize GEMV form: kr and ni bound by assignment, reduced over kr."""
    a, x = _operands(M, K)
    np.testing.assert_allclose(_compile(_gemv_allreduce, backend)(a, x), a @ x, rtol=1e-4, atol=1e-4)


@T.prim_func
def _partial_extent(A: T.Tensor((THREADS,), "float32"), B: T.Tensor((THREADS,), "float32")):
    with T.Kernel(1, threads=THREADS) as _:
        for t in T.thread_binding(0, THREADS // 2, thread="threadIdx.x"):
            B[t] = A[t]


def test_thread_loop_of_another_extent_is_refused_by_name():
    with pytest.raises(LanguageError, match=r"loop 't' is bound to 'threadIdx.x'.*T.serial"):
        tilelang.compile(_partial_extent, out_idx=[-1], target="cpu")

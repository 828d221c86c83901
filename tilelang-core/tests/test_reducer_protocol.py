"""Reducer misuse that would give a wrong result is refused with the reducer's name and a
fix, as upstream's reducer v2 refuses it (its test_tilelang_language_reducer_v2.py), while
upstream's first reducer form (T.clear, then ``r[i] += v``) keeps working."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import LanguageError


def test_an_update_before_init_is_refused():
    with pytest.raises(LanguageError, match=r"T.reducer_update of reducer 'acc' before T.reducer_init: it holds "
                                            r"no started value; call T.reducer_init\(acc\) first"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                T.finalize_reducer(acc)
                B[0] = acc[0]


def test_an_update_after_finalize_is_refused():
    with pytest.raises(LanguageError, match=r"after T.finalize_reducer closed its reduction"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                T.reducer_init(acc)
                T.finalize_reducer(acc)
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])


def test_a_second_init_before_finalize_is_refused():
    with pytest.raises(LanguageError, match=r"double T.reducer_init of reducer 'acc': the reduction the first one "
                                            r"opened was not finalized"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                T.reducer_init(acc)
                T.reducer_init(acc)


def test_a_starting_value_of_another_dtype_is_refused():
    with pytest.raises(LanguageError, match=r"the starting value's dtype float16 does not match reducer 'acc' "
                                            r"\(float32\); write T.cast\(value, 'float32'\)"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                T.reducer_init(acc, T.float16(1.0))


def test_a_reducer_updated_and_never_finalized_is_refused():
    with pytest.raises(LanguageError, match=r"kernel: reducer 'acc' is updated and never finalized: the block's "
                                            r"threads see its combined values only after T.finalize_reducer"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                T.reducer_init(acc)
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                B[0] = acc[0]


def test_the_first_reducer_form_must_be_finalized_too():
    with pytest.raises(LanguageError, match=r"reducer 'r' is updated and never finalized"):
        @T.prim_func
        def kernel(A: T.Tensor((32,), T.float32)):
            with T.Kernel(1, threads=32):
                r = T.alloc_reducer(32, T.float32)
                T.clear(r)
                for i in T.Parallel(32):
                    r[i] += A[i]
                T.copy(r, A)


def test_an_update_every_thread_runs_is_refused():
    """Outside a T.Parallel loop each of the 32 threads would add A[0]: 32 * A[0]."""
    with pytest.raises(LanguageError, match=r"kernel: reducer 'acc' is updated outside any T.Parallel loop "
                                            r"\(`(.|\n)*`\): every thread of the block would combine the same value"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                T.reducer_init(acc)
                T.reducer_update(acc[0], A[0])
                T.finalize_reducer(acc)
                B[0] = acc[0]


def test_an_update_of_a_reduction_t_clear_opened_is_refused():
    """Upstream's two reducer forms do not mix: T.clear opens the first (``r[i] += v``)."""
    with pytest.raises(LanguageError, match=r"T.reducer_update of reducer 'acc', whose reduction T.clear / T.fill "
                                            r"opened \(the first reducer form, updated as `r\[i\] \+= v`\); the "
                                            r"two forms do not mix: open it with T.reducer_init\(acc\) instead"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                T.clear(acc)
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                T.finalize_reducer(acc)
                B[0] = acc[0]


def test_a_plain_update_of_a_reduction_reducer_init_opened_is_refused_at_its_line():
    with pytest.raises(LanguageError, match=r"kernel: illegal store to reducer 'acc' \(`acc\[0\] = .*`\): "
                                            r"T.reducer_init opens it, so it is updated only with "
                                            r"T.reducer_update\(acc\[0\], v\)(.|\n)*acc\[0\] \+= A\[i\]"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                T.reducer_init(acc)
                for i in T.Parallel(8):
                    acc[0] += A[i]
                T.finalize_reducer(acc)
                B[0] = acc[0]


def _epochs():
    # a reduction per iteration of a serial loop, and the first form (T.clear, +=): both
    # allowed, and each gives numpy's result
    @T.prim_func
    def kernel(A: T.Tensor((4, 8), T.float32), B: T.Tensor((4,), T.float32), C: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=32):
            total = T.alloc_fragment((1,), T.float32)
            for k in T.serial(4):
                acc = T.alloc_reducer((1,), T.float32, op="max")
                T.reducer_init(acc, T.float32(-100))
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[k, i])
                T.finalize_reducer(acc, total)
                B[k] = total[0]
            old = T.alloc_reducer((1,), T.float32, op="sum")
            T.clear(old)
            for i, j in T.Parallel(4, 8):
                old[0] += A[i, j]
            T.finalize_reducer(old)
            C[0] = old[0]

    return kernel


def test_epochs_and_the_first_form_still_compile_and_agree_with_numpy():
    a = np.random.default_rng(3).integers(-8, 9, (4, 8)).astype("float32")
    b, c = np.zeros(4, "float32"), np.zeros(1, "float32")
    tilelang.compile(_epochs(), target="cpu")(a, b, c)
    np.testing.assert_array_equal(b, a.max(axis=1))
    np.testing.assert_array_equal(c, [a.sum()])


@pytest.mark.skipif(importlib.util.find_spec("tilelang.cuda") is None, reason="tilelang-cuda is not installed")
def test_an_update_one_thread_runs_under_a_guard_is_accepted():
    @T.prim_func
    def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
        with T.Kernel(1, threads=32):
            once = T.alloc_reducer((1,), T.float32, op="sum")
            T.reducer_init(once)
            if T.get_thread_binding() == 0:
                T.reducer_update(once[0], A[0])
            T.finalize_reducer(once)
            B[0] = once[0]

    assert "atomicAdd" in tilelang.lower(kernel, target={"kind": "cuda", "arch": "sm_90"}).device_source


@pytest.mark.parametrize("batch,message", [
    (0, r"T.finalize_reducer: batch must be >= 1 \(an int\), got 0"),
    (128, r"T.finalize_reducer: batch 128 exceeds total output elements \(64\) of reducer 'acc'"),
    (3, r"T.finalize_reducer: batch 3 must evenly divide the 64 output elements of reducer 'acc'"),
])
def test_finalize_batch_is_checked_as_upstream_checks_it(batch, message):
    # upstream's test_finalize_reducer_invalid_batch cases (its messages' words)
    with pytest.raises(LanguageError, match=message):
        @T.prim_func
        def kernel(A: T.Tensor((64, 8), T.float32), B: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64):
                acc = T.alloc_reducer(64, T.float32, op="sum")
                T.clear(acc)
                for i, j in T.Parallel(64, 8):
                    acc[i] += A[i, j]
                T.finalize_reducer(acc, batch=batch)
                T.copy(acc, B)


# -- program order: reads before the finalize, and the finalize's scope (upstream's reducer v2
# refuses the same kernels; here a read before the finalize races with the atomic updates)
def test_a_read_before_finalize_is_refused_at_its_line():
    with pytest.raises(LanguageError, match=r"kernel: illegal read of reducer 'acc' before T.finalize_reducer: "
                                            r"until then it holds the threads' partial values; (.|\n)*"
                                            r"test_reducer_protocol.py:\d+:\d+\n \d+ \| +B\[0\] = acc\[0\]"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                T.reducer_init(acc)
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                if T.get_thread_binding() == 0:
                    B[0] = acc[0]
                T.finalize_reducer(acc)


def test_a_copy_out_of_the_first_form_before_finalize_is_refused():
    with pytest.raises(LanguageError, match=r"illegal read of reducer 'acc' before T.finalize_reducer"):
        @T.prim_func
        def kernel(A: T.Tensor((64, 8), T.float32), B: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64):
                acc = T.alloc_reducer(64, T.float32, op="sum")
                T.clear(acc)
                for i, j in T.Parallel(64, 8):
                    acc[i] += A[i, j]
                T.copy(acc, B)
                T.finalize_reducer(acc)


def test_a_finalize_outside_the_loop_of_its_init_is_refused():
    with pytest.raises(LanguageError, match=r"kernel: T.finalize_reducer\(acc\) is not in the scope of its "
                                            r"T.reducer_init: the two must be inside the same loops"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                for _ in T.serial(4):
                    T.reducer_init(acc)
                    for i in T.Parallel(8):
                        T.reducer_update(acc[0], A[i])
                T.finalize_reducer(acc)
                B[0] = acc[0]


def test_a_finalize_in_a_loop_its_init_is_not_in_is_refused():
    with pytest.raises(LanguageError, match=r"T.finalize_reducer\(acc\) is not in the scope of its T.reducer_init"):
        @T.prim_func
        def kernel(A: T.Tensor((8,), T.float32), B: T.Tensor((1,), T.float32)):
            with T.Kernel(1, threads=32):
                acc = T.alloc_reducer((1,), T.float32, op="sum")
                result = T.alloc_fragment((1,), T.float32)
                T.reducer_init(acc)
                for _ in T.serial(4):
                    for i in T.Parallel(8):
                        T.reducer_update(acc[0], A[i])
                    T.finalize_reducer(acc, result)
                B[0] = result[0]


def test_a_finalize_under_a_condition_in_the_inits_scope_agrees_with_numpy():
    """Upstream's test_finalize_in_conditional_refinement: a block that skips the branch
    leaves its partial values unread."""

    @T.prim_func
    def kernel(A: T.Tensor((8,), T.float32), S: T.Tensor((2,), T.int32), B: T.Tensor((2,), T.float32)):
        with T.Kernel(2, threads=32) as bx:
            acc = T.alloc_reducer((1,), T.float32, op="sum")
            T.reducer_init(acc)
            if S[bx] < 0:
                B[bx] = 0.0
            else:
                for i in T.Parallel(8):
                    T.reducer_update(acc[0], A[i])
                result = T.alloc_fragment((1,), T.float32)
                T.finalize_reducer(acc, result)
                B[bx] = result[0]

    a = np.arange(1, 9, dtype="float32")
    b = np.full(2, np.nan, "float32")
    tilelang.compile(kernel, target="cpu")(a, np.array([-1, 1], "int32"), b)
    np.testing.assert_array_equal(b, [0.0, a.sum()])

"""Element accesses that may leave a global tensor are guarded (transform/safe_memory.py,
upstream's LegalizeSafeMemoryAccess): such a write is skipped, such a read gives 0; what
the analyzer proves inside (loop, block and thread ranges, enclosing conditions) is left
as written. On the CPU, run: the memory past the tensor stays as it was."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import tvm_ffi
from tilelang.transform.safe_memory import guard_global_accesses
from tvm import tirx

N, BLOCK = 96, 64  # two blocks of 64 over 96 elements: the second block's last 32 are outside


def edge_kernel(n=N):
    @T.prim_func
    def edge(A: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, BLOCK), threads=BLOCK) as bx:
            for j in T.Parallel(BLOCK):
                if A[0] >= 0:  # a condition that does not bound the index (upstream's grouped GEMM)
                    C[bx * BLOCK + j] = A[bx * BLOCK + j] + 1

    return edge


def guards(func) -> list[str]:
    found = []

    def on_if(node):
        found.append(str(node.condition))

    tvm_ffi.structural_walk(func.body, [(tirx.IfThenElse, on_if)])
    calls = []
    tvm_ffi.structural_walk(func.body, [(tirx.Call, lambda c: calls.append(str(c)))])
    return found + [c for c in calls if "if_then_else" in c]


def test_a_write_past_the_tensor_is_guarded_and_its_reads_under_the_guard_are_not():
    guarded = guard_global_accesses(edge_kernel())
    text = str(guarded)
    assert "if bx * 64 + j < 96:" in text
    assert "if_then_else" not in text  # A[bx * 64 + j] is read only where the write happens


def test_accesses_the_analyzer_proves_inside_are_left_as_written():
    func = edge_kernel(128)  # 64 divides 128: every access is inside
    assert guard_global_accesses(func).same_as(func)

    @T.prim_func
    def guarded_by_user(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for j in T.Parallel(BLOCK):
                if bx * BLOCK + j < N:
                    C[bx * BLOCK + j] = A[bx * BLOCK + j] * 2
                C[j] = T.if_then_else(bx * BLOCK + j < N, A[bx * BLOCK + j], 0.0)

    assert guard_global_accesses(guarded_by_user).same_as(guarded_by_user)


def test_a_read_that_may_leave_its_tensor_gives_zero():
    @T.prim_func
    def shifted(A: T.Tensor((N,), "float32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(2, threads=BLOCK) as bx:
            for j in T.Parallel(BLOCK):
                C[bx * BLOCK + j] = A[bx * BLOCK + j]

    text = str(guard_global_accesses(shifted))
    assert "T.if_then_else(bx * 64 + j < 96, A[bx * 64 + j], T.float32(0.0))" in text
    a = np.arange(1, N + 1, dtype=np.float32)
    c = np.full(128, -1, np.float32)
    tilelang.compile(shifted, target="cpu")(a, c)
    np.testing.assert_array_equal(c, np.concatenate([a, np.zeros(32, np.float32)]))


@pytest.mark.parametrize("target", ["cpu", "c"])
def test_on_the_cpu_the_memory_past_the_tensor_is_untouched(target):
    backing = np.full(128, -7, np.float32)
    c = backing[:N]  # the tensor C, with 32 elements of other data after it
    a = np.arange(N, dtype=np.float32)
    tilelang.compile(edge_kernel(), target=target)(a, c)
    np.testing.assert_array_equal(c, a + 1)
    np.testing.assert_array_equal(backing[N:], -7)


def test_the_pass_config_turns_it_off():
    assert "< 96" in tilelang.lower(edge_kernel(), target="c").kernel_source
    off = tilelang.lower(edge_kernel(), target="c", pass_configs={"tl.disable_safe_memory_legalize": True})
    assert "< 96" not in off.kernel_source


def test_the_run_time_bounds_check_still_reports_the_access():
    """``tl.bounds_check`` reports an access outside its tensor at run time
    (test_reliability_bounds.py); the guard would hide it, so it is not added then."""
    from tilelang.errors import LaunchError

    kernel = tilelang.compile(edge_kernel(), target="c", pass_configs={"tl.bounds_check": True})
    with pytest.raises(LaunchError, match=r"tl.bounds_check: out-of-bounds write to C\[bx \* 64 \+ j\]"):
        kernel(np.zeros(N, np.float32), np.zeros(N, np.float32))


def test_an_atomic_whose_target_may_leave_its_tensor_happens_only_inside():
    """``T.atomic_add(Out[Idx[i]], 1)`` with rows an index tensor picks: an index past
    ``Out`` adds nothing (before, it added into the memory after ``Out``)."""
    @T.prim_func
    def scatter(Idx: T.Tensor((64,), "int32"), Out: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                T.atomic_add(Out[Idx[i]], 1.0)

    idx = np.arange(64, dtype=np.int32) % 12  # rows 8..11 are outside
    backing = np.zeros(16, np.float32)
    tilelang.compile(scatter, target="c")(idx, backing[:8])
    np.testing.assert_array_equal(backing[:8], [np.count_nonzero(idx == r) for r in range(8)])
    np.testing.assert_array_equal(backing[8:], 0)


def test_an_index_a_t_assume_bounds_is_left_as_written():
    """Upstream's ``T.assume(l + i >= 0 and l + i < N)`` before ``A[l + i] = 0`` removes the
    guard (test_tilelang_language_assume.py); the promise covers the statements after it in
    its block, not those before it. Run on the CPU where the promise holds."""

    def build(assume_first: bool):
        n = T.dynamic("n")

        @T.prim_func
        def fill(A: T.Tensor((n,), "float32"), lo: T.int32, hi: T.int32, x: T.Tensor((n,), "int32")):
            with T.Kernel(1, threads=1):
                for i in T.serial(hi - lo):
                    if assume_first:
                        T.assume(lo + i >= 0 and x[lo + i] >= 0)
                        A[lo + i] = 1.0
                        A[x[lo + i]] = 2.0
                    else:
                        A[lo + i] = 1.0
                        T.assume(lo + i >= 0)

        return fill

    assert guards(guard_global_accesses(build(True))) == []  # a loaded index (x[...] >= 0) too
    assert guards(guard_global_accesses(build(False))) == ["lo + i >= 0"]  # assumed only after the write
    kernel = tilelang.compile(build(True), target="cpu")
    a = np.zeros(8, np.float32)
    x = np.array([7, 6, 5, 4, 3, 2, 1, 0], np.int32)
    kernel(a, 2, 5, x)
    np.testing.assert_array_equal(a, [0, 0, 1, 2, 1, 2, 0, 0])

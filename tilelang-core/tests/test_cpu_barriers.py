"""Kernels that read their thread index and sync their threads, on the CPU.

A block's threads run one after another here; with T.sync_threads() they run in phases
between the barriers (tilelang/cpu/transform/barrier_phases.py), so data one thread leaves
in shared memory before a barrier is there for every other thread after it. Each kernel is
compared with numpy exactly (the arithmetic is the same, in the same order per element).
"""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError

RNG = np.random.default_rng(7)


def run(func, *arrays):
    tilelang.compile(func, target="cpu")(*arrays)


def test_threads_read_what_others_wrote_across_barriers_in_a_loop() -> None:
    """Each thread writes one element of a shared tile and, after the barrier, reads its
    mirror; a local accumulator lives across both barriers of every iteration."""
    n = 256

    @T.prim_func
    def mirror(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // 128, threads=128) as bx:
            S = T.alloc_shared((128,), "float32")
            acc = T.alloc_local((1,), "float32")
            tx = T.get_thread_binding()
            acc[0] = 0
            for k in range(3):
                S[tx] = A[bx * 128 + tx] * (k + 1)
                T.sync_threads()
                acc[0] += S[127 - tx]
                T.sync_threads()
            B[bx * 128 + tx] = acc[0]

    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros_like(a)
    run(mirror, a, b)
    flipped = a.reshape(-1, 128)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(b, flipped * 1 + flipped * 2 + flipped * 3)


def test_tree_reduction_in_shared_memory() -> None:
    """The classic GPU row sum: halve the active threads after each barrier."""
    rows, width = 4, 64

    @T.prim_func
    def row_sum(A: T.Tensor((rows, width), "float32"), B: T.Tensor((rows,), "float32")):
        with T.Kernel(rows, threads=width) as bx:
            S = T.alloc_shared((width,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[bx, tx]
            T.sync_threads()
            for level in T.serial(6):
                step = width // 2 >> level
                if tx < step:
                    S[tx] += S[tx + step]
                T.sync_threads()
            if tx == 0:
                B[bx] = S[0]

    a = RNG.integers(-8, 8, (rows, width)).astype(np.float32)  # exact sums in any order
    b = np.zeros(rows, np.float32)
    run(row_sum, a, b)
    np.testing.assert_array_equal(b, a.sum(axis=1))


def test_two_dimensional_threads_transpose_through_a_tile() -> None:
    n = 32

    @T.prim_func
    def transpose(A: T.Tensor((n, n), "float32"), B: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=(n, 8)):
            S = T.alloc_shared((n, n), "float32")
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            for i in T.serial(n // 8):
                S[ty * (n // 8) + i, tx] = A[ty * (n // 8) + i, tx]
            T.sync_threads()
            for i in T.serial(n // 8):
                B[ty * (n // 8) + i, tx] = S[tx, ty * (n // 8) + i]

    a = RNG.standard_normal((n, n)).astype(np.float32)
    b = np.zeros_like(a)
    run(transpose, a, b)
    np.testing.assert_array_equal(b, a.T)


def test_a_value_bound_before_a_barrier_is_each_threads_own_after_it() -> None:
    n = 64

    @T.prim_func
    def shifted(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=n):
            S = T.alloc_shared((n,), "float32")
            tx = T.get_thread_binding()
            mine = A[tx] * T.float32(2)
            S[tx] = A[tx]
            T.sync_threads()
            B[tx] = mine + S[(tx + 1) % n]

    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros_like(a)
    run(shifted, a, b)
    np.testing.assert_array_equal(b, a * 2 + np.roll(a, -1))


def test_a_barrier_under_a_branch_every_thread_takes_alike() -> None:
    n = 128

    @T.prim_func
    def odd_blocks_reverse(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(n // 32, threads=32) as bx:
            S = T.alloc_shared((32,), "float32")
            tx = T.get_thread_binding()
            S[tx] = A[bx * 32 + tx]
            if bx % 2 == 1:
                T.sync_threads()
                B[bx * 32 + tx] = S[31 - tx]
            else:
                B[bx * 32 + tx] = S[tx]

    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros_like(a)
    run(odd_blocks_reverse, a, b)
    want = a.reshape(-1, 32).copy()
    want[1::2] = want[1::2, ::-1]
    np.testing.assert_array_equal(b, want.reshape(-1))


def test_a_barrier_some_threads_skip_is_an_error_at_its_line() -> None:
    @T.prim_func
    def half_sync(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            if tx < 32:
                T.sync_threads()
            A[tx] = 0

    with pytest.raises(LanguageError) as info:
        run(half_sync, np.zeros(64, np.float32))
    message = str(info.value)
    assert "T.sync_threads() inside a branch that depends on the thread index" in message
    assert "Move the barrier out of the branch" in message
    assert "test_cpu_barriers.py:" in message and "T.sync_threads()" in message.splitlines()[-1]


def test_a_loop_whose_trip_count_differs_per_thread_is_an_error() -> None:
    @T.prim_func
    def ragged(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=8):
            tx = T.get_thread_binding()
            for _ in T.serial(tx):
                T.sync_threads()
            A[tx] = 1

    with pytest.raises(LanguageError, match=r"T.sync_threads\(\) inside a loop that depends on the thread index"):
        run(ragged, np.zeros(8, np.float32))


def test_tile_ops_and_a_fragment_live_across_barriers() -> None:
    """T.copy and T.gemm (tile ops, the same in every thread) beside per-thread code: the
    accumulator fragment crosses two barriers, so each thread keeps its slot of it."""
    m = n = k = 32

    @T.prim_func
    def gemm_then_rows(A: T.Tensor((m, k), "float32"), B: T.Tensor((k, n), "float32"), C: T.Tensor((m, n), "float32")):
        with T.Kernel(1, threads=m):
            A_s = T.alloc_shared((m, k), "float32")
            B_s = T.alloc_shared((k, n), "float32")
            C_l = T.alloc_fragment((m, n), "float32")
            C_s = T.alloc_shared((m, n), "float32")
            tx = T.get_thread_binding()
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(C_l)
            T.gemm(A_s, B_s, C_l)
            T.sync_threads()
            T.copy(C_l, C_s)
            T.sync_threads()
            for j in T.serial(n):
                C[tx, j] = C_s[(tx + 1) % m, j] + C_l[tx, j]

    a = RNG.integers(-4, 5, (m, k)).astype(np.float32)  # exact products and sums
    b = RNG.integers(-4, 5, (k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    run(gemm_then_rows, a, b, c)
    product = a @ b
    np.testing.assert_array_equal(c, np.roll(product, -1, axis=0) + product)


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_thread_allreduce_across_a_thread_axis(kind: str) -> None:
    """Upstream's split-K gemv (examples/gemv, splitk_gemv_vectorized_tvm): each of 8 threads
    along y sums its share of a row, T.tvm_thread_allreduce over y combines them, and the
    first thread writes the row's result (on the CPU: slots in a shared tile, in phases)."""
    n, k, block_n, reducers, tile = 16, 128, 4, 8, 16
    is_sum = kind == "sum"

    @T.prim_func
    def gemv(A: T.Tensor((k,), "float32"), B: T.Tensor((n, k), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(n // block_n, threads=(block_n, reducers)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            part = T.alloc_local((1,), "float32")
            part[0] = 0 if is_sum else -T.infinity("float32")
            for i in T.serial(tile):
                product = A[tk * tile + i] * B[bn * block_n + tn, tk * tile + i]
                part[0] = part[0] + product if is_sum else T.max(part[0], product)
            total = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda x, y: x + y if is_sum else T.max(x, y),
                                       [T.float32(0) if is_sum else -T.infinity("float32")]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), part[0], True, total[0], tk, dtype="handle"))
            if tk == reducers - 1:  # every thread holds the result
                C[bn * block_n + tn] = total[0]

    a = RNG.integers(-4, 5, k).astype(np.float32)
    b = RNG.integers(-4, 5, (n, k)).astype(np.float32)
    c = np.zeros(n, np.float32)
    run(gemv, a, b, c)
    np.testing.assert_array_equal(c, b @ a if is_sum else (b * a).max(axis=1))


def test_a_loop_bounded_by_a_count_every_thread_read_from_shared_memory() -> None:
    """Upstream's top-k selector: ``n = s_count[0]`` into each thread's own variable, then a
    loop of ``ceildiv(n, threads)`` steps with barriers in it, and ``if done: break`` in a
    loop with barriers. Every thread holds the same values, so the loop runs around the
    phases with the first thread's copy; the break leaves that loop, not the threads'."""
    threads = 32

    @T.prim_func
    def gather_sum(A: T.Tensor((100,), "float32"), N: T.Tensor((1,), "int32"), B: T.Tensor((threads,), "float32")):
        with T.Kernel(1, threads=threads):
            s_count = T.alloc_shared((1,), "int32")
            S = T.alloc_shared((threads,), "float32")
            n = T.alloc_var(T.int32)
            acc = T.alloc_var(T.float32, 0.0)
            rounds = T.alloc_var(T.int32, 0)
            tx = T.get_thread_binding()
            if tx == 0:
                s_count[0] = N[0]
            T.sync_threads()
            n = s_count[0]
            for s in T.serial(T.ceildiv(n, threads)):
                if s * threads + tx < n:
                    S[tx] = A[s * threads + tx]
                else:
                    S[tx] = 0.0
                T.sync_threads()
                acc += S[(tx + 1) % threads]
                T.sync_threads()
            for r in T.serial(10):
                if rounds >= 3:
                    break
                rounds += 1
                T.sync_threads()
            B[tx] = acc + rounds * 1000.0

    a = RNG.standard_normal(100).astype(np.float32)
    for count in (70, 100, 5):
        b = np.zeros(threads, np.float32)
        run(gather_sum, a, np.array([count], np.int32), b)
        padded = np.zeros(-(-count // threads) * threads, np.float32)
        padded[:count] = a[:count]
        steps = padded.reshape(-1, threads)
        expected = np.zeros(threads, np.float32)
        for step in steps:
            expected += np.roll(step, -1)
        np.testing.assert_allclose(b, expected + 3000.0, rtol=1e-6, atol=1e-5)


def test_named_barriers_in_a_branch_of_their_threads() -> None:
    """Upstream's top-k cumsum: ``if tx < R:`` then a Hillis-Steele scan over R threads with
    ``T.sync_threads(3, R)`` (a named barrier of exactly the branch's threads): each phase
    runs the R threads, the others skip the branch as on a GPU."""
    threads, R = 64, 16

    @T.prim_func
    def suffix_scan(A: T.Tensor((R,), "int32"), B: T.Tensor((R,), "int32")):
        with T.Kernel(1, threads=threads):
            S = T.alloc_shared((R + 1,), "int32")
            v = T.alloc_var(T.int32)
            tx = T.get_thread_binding()
            if tx < R:
                S[tx] = A[tx]
            if tx == R:
                S[R] = 0
            T.sync_threads()
            if tx < R:
                for i in T.serial(4):
                    offset = 1 << i
                    T.sync_threads(3, R)
                    if tx < R - offset:
                        v = S[tx] + S[tx + offset]
                    T.sync_threads(3, R)
                    if tx < R - offset:
                        S[tx] = v
            T.sync_threads()
            if tx < R:
                B[tx] = S[tx]

    a = RNG.integers(0, 100, R).astype(np.int32)
    b = np.zeros(R, np.int32)
    run(suffix_scan, a, b)
    np.testing.assert_array_equal(b, np.cumsum(a[::-1])[::-1])


def test_a_named_barrier_over_other_threads_than_its_branch_is_an_error() -> None:
    @T.prim_func
    def mismatched(A: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((64,), "int32")
            tx = T.get_thread_binding()
            if tx < 32:
                S[tx] = tx
                T.sync_threads(3, 64)
                A[tx] = S[31 - tx]

    with pytest.raises(LanguageError, match=r"named barrier .* outside a branch whose threads are exactly its "
                                            r"arrive count"):
        run(mismatched, np.zeros(64, np.int32))


def test_a_loop_bounded_by_an_atomics_previous_value_is_still_an_error() -> None:
    """An atomic's previous value differs between threads even where its operands do not."""

    @T.prim_func
    def ticket(A: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=8):
            counter = T.alloc_shared((1,), "int32")
            n = T.alloc_var(T.int32)
            tx = T.get_thread_binding()
            n = T.atomic_add(counter[0], 1, return_prev=True)
            for _ in T.serial(n):
                T.sync_threads()
            A[tx] = n

    with pytest.raises(LanguageError, match=r"T.sync_threads\(\) inside a loop that depends on the thread index"):
        run(ticket, np.zeros(8, np.int32))


def test_a_block_barrier_beside_named_ones_in_a_branch_of_some_threads_is_an_error() -> None:
    """A named barrier makes a thread-range branch run in phases of its threads; a whole-block
    T.sync_threads() in that branch would still be one that the other threads skip."""

    @T.prim_func
    def mixed(A: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            S = T.alloc_shared((64,), "int32")
            tx = T.get_thread_binding()
            if tx < 32:
                S[tx] = tx
                T.sync_threads(3, 32)
                T.sync_threads()
                A[tx] = S[31 - tx]

    with pytest.raises(LanguageError, match=r"T.sync_threads\(\) inside a branch that depends on the thread index"):
        run(mixed, np.zeros(64, np.int32))


def test_a_parallel_nests_shared_updates_happen_once_in_a_kernel_that_reads_its_thread_index() -> None:
    """A T.Parallel nest's iterations are spread over a GPU block's threads, so each update
    happens once. Here each thread runs the whole nest (for its own copy of the fragments):
    an atomic sum, a reducer's update and a read-modify-write of a shared tile in such a
    nest had counted once per thread (64x the sum) until the first thread alone ran them."""
    n = 64

    @T.prim_func
    def updates(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), total: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=n):
            S = T.alloc_shared((n,), "float32")
            src = T.alloc_fragment((n,), "float32")
            T.copy(A, src)
            for i in T.Parallel(n):
                S[i] = 1.0
            for i in T.Parallel(n):
                S[i] = S[i] + src[i]
            for i, j in T.Parallel(8, n // 8):
                T.atomic_add(total[0], A[i * (n // 8) + j])
            acc = T.alloc_reducer((1,), "float32", op="sum")
            T.reducer_init(acc)
            for i in T.Parallel(n):
                T.reducer_update(acc[0], src[i])
            result = T.alloc_fragment((1,), "float32")
            T.finalize_reducer(acc, result)
            tx = T.get_thread_binding()
            B[tx] = S[n - 1 - tx]
            if tx == 0:
                total[1] = result[0]

    a = RNG.integers(-8, 9, n).astype(np.float32)  # exact sums in any order
    b = np.zeros(n, np.float32)
    total = np.zeros(2, np.float32)
    run(updates, a, b, total)
    np.testing.assert_array_equal(b, 1 + a[::-1])
    np.testing.assert_array_equal(total, [a.sum(), a.sum()])

"""Upstream's explicit warp-specialized language on the CPU (tilelang/cpu/transform/warp_roles.py):
T.ws roles run as agents in program order, barriers are phase counters, T.tma_copy is a copy.
Results are compared with numpy; a wait that program order cannot satisfy, and kernels the
CPU cannot run this way, are errors naming the line."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError, LaunchError


def _line(func, text: str) -> int:
    source, first = inspect.getsourcelines(func)
    return first + next(i for i, line in enumerate(source) if text in line)


def ws_gemm(M: int, N: int, K: int, block_M: int = 64, block_N: int = 64, block_K: int = 32, stages: int = 2):
    """Upstream's barrier-pipelined warp-specialized GEMM: a producer role fills a ring of
    `stages` shared slots (full/empty barriers per slot), a consumer role multiplies."""

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // block_N, M // block_M, threads=256) as (bx, by):
            A_shared = T.alloc_shared((stages, block_M, block_K), "float16")
            B_shared = T.alloc_shared((stages, block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            bars = T.alloc_barrier([128] * (2 * stages))  # full[s] = bars[s], empty[s] = bars[stages + s]
            with T.ws(0):
                T.clear(C_local)
            for ko in range(K // block_K):
                with T.ws(1):
                    T.mbarrier_wait_parity(bars[ko % stages + stages], ((ko // stages) % 2) ^ 1)
                    T.tma_copy(A[by * block_M:(by + 1) * block_M, ko * block_K:(ko + 1) * block_K],
                               A_shared[ko % stages, :, :], barrier=bars[ko % stages])
                    T.tma_copy(B[ko * block_K:(ko + 1) * block_K, bx * block_N:(bx + 1) * block_N],
                               B_shared[ko % stages, :, :], barrier=bars[ko % stages])
                    T.set_max_nreg(40, 0)
                    T.mbarrier_arrive(bars[ko % stages])
                with T.ws(0):
                    T.mbarrier_wait_parity(bars[ko % stages], (ko // stages) % 2)
                    T.gemm(A_shared[ko % stages, :, :], B_shared[ko % stages, :, :], C_local)
                    T.fence_proxy_async()
                    T.mbarrier_arrive(bars[ko % stages + stages])
            with T.ws(0):
                T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


@pytest.mark.parametrize("stages", [1, 2])
def test_a_warp_specialized_gemm_runs_on_the_cpu(stages):
    M, N, K = 128, 128, 160  # 5 K blocks: the slots and their parities wrap
    kernel = tilelang.compile(ws_gemm(M, N, K, stages=stages), target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


def consumer_first():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=256):
            S = T.alloc_shared((64, 64), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.barrier_wait(ready, 0)  # waits for the producer below
                T.copy(S, B)
            with T.ws(0):
                T.tma_copy(A[0, 0], S, barrier=ready)
                T.barrier_arrive(ready)

    return main


@pytest.mark.parametrize("target,execution", [("cpu", "tvm_ffi"), ("c", "cython")])
def test_a_wait_program_order_cannot_satisfy_stops_the_kernel_naming_its_line(target, execution):
    kernel = tilelang.compile(consumer_first(), target=target, execution_backend=execution)
    line = _line(consumer_first, "T.barrier_wait(ready, 0)")
    a, b = np.ones((64, 64), np.float32), np.zeros((64, 64), np.float32)
    with pytest.raises(LaunchError, match=re.escape(
            "kernel 'main': T.mbarrier_wait_parity(ready[0], 0) (") + rf".*test_cpu_warp_roles\.py:{line}\) " +
            re.escape("waits for a barrier phase that has not completed. The CPU runs a kernel's warp roles one "
                      "after another in program order")):
        kernel(a, b)


def _arrive_then_wait(count: int):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            bar = T.alloc_barrier(arrive_count=count)
            T.barrier_arrive(bar)  # every thread of the block: 256 arrivals
            T.barrier_wait(bar, 0)
            for i in T.Parallel(256):
                A[i] = 1.0

    return main


def test_an_arrival_outside_the_roles_is_the_whole_block():
    a = np.zeros(256, np.float32)
    tilelang.compile(_arrive_then_wait(256), target="cpu")(a)
    assert (a == 1).all()
    with pytest.raises(LaunchError, match=r"T\.mbarrier_wait_parity\(bar\[0\], 0\) .* has not completed"):
        tilelang.compile(_arrive_then_wait(384), target="cpu")(np.zeros(256, np.float32))


def test_warp_group_index_inside_and_outside_roles():
    @T.prim_func
    def main(A: T.Tensor((256,), "int32"), B: T.Tensor((2,), "int32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            A[tx] = T.get_warp_group_idx()
            with T.ws(1):
                B[1] = T.get_warp_group_idx()
            with T.ws(0):
                B[0] = T.get_warp_group_idx() + 10

    a, b = np.full(256, -1, np.int32), np.full(2, -1, np.int32)
    tilelang.compile(main, target="cpu")(a, b)
    np.testing.assert_array_equal(a, np.arange(256) // 128)
    np.testing.assert_array_equal(b, [10, 1])


def role_reading_the_thread_index():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            with T.ws(1):
                A[tx] = 1.0

    return main


def role_reading_a_scalar_bound_from_the_thread_index():
    """``warp = tx // 32`` bound before the role: the role read it, ran once, and set all
    eight elements (on a GPU warp group 1 sets A[4:8])."""

    @T.prim_func
    def main(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            warp = tx // 32
            with T.ws(1):
                A[warp] = 1.0

    return main


@pytest.mark.parametrize("build", [role_reading_the_thread_index, role_reading_a_scalar_bound_from_the_thread_index],
                         ids=["directly", "through a bound scalar"])
def test_a_role_that_reads_the_thread_index_is_refused(build):
    with pytest.raises(LanguageError, match=re.escape(
            "kernel 'main', T.ws: on the CPU a warp role runs once for all of its threads (its tile operations "
            "cover their whole tile), so its body may not read the thread index")):
        tilelang.compile(build(), target="cpu")


def test_barriers_in_roles_chosen_by_thread_index_are_refused():
    def build():
        @T.prim_func
        def main(A: T.Tensor((256,), "float32")):
            with T.Kernel(1, threads=256):
                tx = T.get_thread_binding()
                bar = T.alloc_barrier(arrive_count=128)
                if tx < 128:  # the line the error names
                    T.barrier_arrive(bar)
                A[tx] = 1.0

        return main

    line = _line(build, "if tx < 128:")
    with pytest.raises(LanguageError, match=re.escape(
            "kernel 'main', barriers in code that chooses threads by their index: on the CPU warp roles are "
            "T.ws blocks") + rf"(.|\n)*test_cpu_warp_roles\.py:{line}"):
        tilelang.compile(build(), target="cpu")


def test_a_barrier_per_warp_is_refused_naming_its_line():
    """Upstream's per-warp TMA kernel: each warp loads its own row, on its own barrier
    (``mbars[warp]``, warp = tx // 32). The CPU's barrier operations run once for all the
    block's threads; the kernel used to stop at run time on a wait that no arrival had
    completed, naming the wait rather than what it cannot run."""

    def build():
        @T.prim_func
        def main(A: T.Tensor((8, 64), "float32"), B: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=256):
                tx = T.get_thread_binding()
                warp = tx // 32
                a_shared = T.alloc_shared((8, 64), "float32")
                mbars = T.alloc_barrier([32] * 8)
                T.tma_copy(A[warp, 0:64], a_shared[warp, 0:64], barrier=mbars[warp], leader_scope_threads=32)
                T.mbarrier_arrive(mbarrier=mbars[warp])
                T.mbarrier_wait_parity(mbarrier=mbars[warp], parity=0)
                B[warp] = a_shared[warp, 0]

        return main

    line = _line(build, "T.tma_copy(A[warp")
    with pytest.raises(LanguageError, match=re.escape(
            "kernel 'main', T.tma_copy: its barrier or tile depends on the thread index (a barrier or tile per "
            "warp); on the CPU barrier operations run once for all of the block's or role's threads; compile for "
            "a GPU") + rf"(.|\n)*test_cpu_warp_roles\.py:{line}"):
        tilelang.compile(build(), target="cpu")

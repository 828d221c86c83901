"""T.gemm on the CPU (cpu/transform/gemm.py: register-blocked, vectorized micro-kernels)
against numpy, on both CPU execution backends, and the CPU thread-count knob.

Tolerances: every product of two float32 (or float16) values is summed in float32, in k
order; against the float64 product of the same inputs the error stays within a few ulps
of the sum's magnitude, so rtol=1e-5 with atol=1e-5 * K (standard-normal inputs) holds
with margin, and a wrong element (a lost product, a misplaced block) is off by ~1.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.cpu import threads
from tilelang.errors import BackendUnavailableError

BACKENDS = [pytest.param(("cpu", "tvm_ffi"), id="llvm-tvm_ffi"), pytest.param(("c", "cython"), id="c-cython")]
rng = np.random.default_rng(7)


def gemm_kernel(M, N, K, bM, bN, bK, trans_a=False, trans_b=False, dtype="float32", accum="float32"):
    """Upstream's GEMM: tiles of A and B through shared memory, a fragment accumulator."""
    a_shape, as_shape = ((K, M), (bK, bM)) if trans_a else ((M, K), (bM, bK))
    b_shape, bs_shape = ((N, K), (bN, bK)) if trans_b else ((K, N), (bK, bN))

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared(as_shape, dtype)
            B_s = T.alloc_shared(bs_shape, dtype)
            C_l = T.alloc_fragment((bM, bN), accum)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=2):
                if trans_a:
                    T.copy(A[k * bK, by * bM], A_s)
                else:
                    T.copy(A[by * bM, k * bK], A_s)
                if trans_b:
                    T.copy(B[bx * bN, k * bK], B_s)
                else:
                    T.copy(B[k * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=trans_a, transpose_B=trans_b)
            T.copy(C_l, C[by * bM, bx * bN])

    return main


def second_product_only(M, N, K):
    """clear_accum=True: the second T.gemm overwrites what the first accumulated."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), B2: T.Tensor((K, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=1) as _:
            C_l = T.alloc_fragment((M, N), "float32")
            T.fill(C_l, 5.0)
            T.gemm(A, B, C_l)
            T.gemm(A, B2, C_l, clear_accum=True)
            T.copy(C_l, C)

    return main


def compiled(func, backend):
    target, execution = backend
    return tilelang.compile(func, out_idx=[-1], target=target, execution_backend=execution)


def reference(a, b, trans_a=False, trans_b=False):
    a64, b64 = a.astype("float64"), b.astype("float64")
    return (a64.T if trans_a else a64) @ (b64.T if trans_b else b64)


SHAPES = [
    ((128, 128, 64), (64, 64, 32), (False, False)),  # whole micro-kernel blocks only
    ((100, 70, 50), (20, 48, 16), (False, False)),  # edge tiles, and tiles MR/NR do not divide
    ((96, 80, 40), (32, 40, 8), (True, False)),
    ((64, 72, 48), (32, 24, 16), (False, True)),  # B packed into a k x n panel
    ((33, 17, 9), (16, 16, 8), (True, True)),
    ((19, 1, 17), (8, 1, 8), (False, False)),  # one column: no vector of one lane
]
# the c kind compiles each kernel with the C compiler (seconds each): the edge and both
# transposed cases there, every case on llvm
CASES = [pytest.param(BACKENDS[0].values[0], *case, id=f"llvm-{i}") for i, case in enumerate(SHAPES)] + [
    pytest.param(BACKENDS[1].values[0], *SHAPES[i], id=f"c-{i}") for i in (1, 4)]


@pytest.mark.parametrize("backend,mnk,block,trans", CASES)
def test_gemm_matches_numpy(backend, mnk, block, trans):
    M, N, K = mnk
    trans_a, trans_b = trans
    kernel = compiled(gemm_kernel(M, N, K, *block, trans_a=trans_a, trans_b=trans_b), backend)
    a = rng.standard_normal((K, M) if trans_a else (M, K), dtype="float32")
    b = rng.standard_normal((N, K) if trans_b else (K, N), dtype="float32")
    np.testing.assert_allclose(kernel(a, b), reference(a, b, trans_a, trans_b), rtol=1e-5, atol=1e-5 * K)


@pytest.mark.parametrize("backend,dtype,accum", [
    (BACKENDS[0].values[0], "float16", "float32"),
    (BACKENDS[1].values[0], "float16", "float32"),
    (BACKENDS[0].values[0], "float64", "float64"),
    (BACKENDS[0].values[0], "int8", "int32"),
])
def test_other_dtypes(backend, dtype, accum):
    """float16 products are exact in float32, so only the float32 sum rounds; float64 and
    int8 -> int32 (small integers) are exact up to float64 rounding."""
    M, N, K = 48, 40, 64
    kernel = compiled(gemm_kernel(M, N, K, 16, 40, 32, dtype=dtype, accum=accum), backend)
    a = (rng.standard_normal((M, K)) * 4).astype(dtype)
    b = (rng.standard_normal((K, N)) * 4).astype(dtype)
    out = kernel(a, b)
    assert out.dtype == np.dtype(accum)
    np.testing.assert_allclose(out, reference(a, b), rtol=1e-5, atol=1e-4 * K)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clear_accum_discards_the_accumulator(backend):
    M, N, K = 24, 36, 20
    kernel = compiled(second_product_only(M, N, K), backend)
    a, b, b2 = (rng.standard_normal(s, dtype="float32") for s in ((M, K), (K, N), (K, N)))
    np.testing.assert_allclose(kernel(a, b, b2), reference(a, b2), rtol=1e-5, atol=1e-5 * K)


def test_llvm_gemm_is_vector_code():
    """The N loop is explicit vectors in the IR (not a scalar dot product per element)."""
    kernel = compiled(gemm_kernel(64, 64, 32, 64, 64, 32), ("cpu", "tvm_ffi"))
    source = kernel.get_kernel_source()
    assert any(f"<{lanes} x float>" in source for lanes in (4, 8, 16)), "no float vector type in the LLVM IR"


@pytest.mark.parametrize("mcpu,bits,shape", [("skylake-avx512", 512, (8, 32)), ("znver4", 512, (8, 32)),
                                             ("haswell", 256, (6, 16)), ("znver3", 256, (6, 16)),
                                             ("x86-64", 128, (6, 8))])
def test_micro_kernels_fit_the_cpus_vector_registers(mcpu, bits, shape):
    """MR x NR from the CPU's widest vectors (float32): 16 zmm accumulators with AVX-512, 12
    ymm with AVX2 (TVM's llvm_get_vector_width says 512 for AVX2 CPUs too; sized for zmm,
    the micro-kernels spilled and ran at 22 GFLOP/s instead of ~90 on 2 znver3 cores)."""
    import tvm
    from tilelang.cpu.transform.gemm import MicroKernelShape, target_vector_bits

    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "mtriple": "x86_64-linux-gnu"})
    assert target_vector_bits(target) == bits
    micro = MicroKernelShape.for_target(target, 32)
    assert (micro.mr, micro.nr) == shape


def test_an_avx2_cpu_gets_ymm_micro_kernels_that_compute_the_product():
    kernel = compiled(gemm_kernel(96, 64, 32, 96, 64, 32), ({"kind": "llvm", "mcpu": "haswell"}, "tvm_ffi"))
    source = kernel.get_kernel_source()
    # rows of NR = 16 lanes (two ymm), not the 32 lanes (two zmm) of an AVX-512 micro-kernel
    assert "<16 x float>" in source and "<32 x float>" not in source
    from pathlib import Path

    if "avx2" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("this CPU cannot run AVX2 code")
    a, b = rng.standard_normal((96, 32), dtype="float32"), rng.standard_normal((32, 64), dtype="float32")
    np.testing.assert_allclose(kernel(a, b), reference(a, b), rtol=1e-5, atol=1e-5 * 32)


def test_llvm_target_without_a_cpu_is_this_cpu():
    """target="llvm" alone would be baseline x86-64 (SSE2) for LLVM; it gets the host CPU,
    as target="cpu" does, and one named CPU is kept."""
    from tvm.target import codegen

    kernel = compiled(gemm_kernel(16, 16, 16, 16, 16, 16), ("llvm", "tvm_ffi"))
    assert kernel.context.target.export()["mcpu"] == codegen.llvm_get_system_cpu()
    kernel = compiled(gemm_kernel(16, 16, 16, 16, 16, 16), ({"kind": "llvm", "mcpu": "x86-64"}, "tvm_ffi"))
    assert kernel.context.target.export()["mcpu"] == "x86-64"
    a, b = rng.standard_normal((16, 16), dtype="float32"), rng.standard_normal((16, 16), dtype="float32")
    np.testing.assert_allclose(kernel(a, b), reference(a, b), rtol=1e-5, atol=1e-5 * 16)


def test_thread_count_knob(monkeypatch):
    for name in ("TILELANG_CPU_THREADS", "TVM_NUM_THREADS", "OMP_NUM_THREADS", "TVM_THREAD_POOL_SPIN_COUNT"):
        monkeypatch.setenv(name, "")  # restored after the test, whether it was set or not
    assert threads.configure_thread_pool() == threads.available_cpus()
    assert os.environ["TVM_NUM_THREADS"] == str(threads.available_cpus())
    assert os.environ["TVM_THREAD_POOL_SPIN_COUNT"] == str(threads.SPIN_COUNT)
    monkeypatch.setenv("TVM_THREAD_POOL_SPIN_COUNT", "7")
    threads.configure_thread_pool()
    assert os.environ["TVM_THREAD_POOL_SPIN_COUNT"] == "7"  # a user's value is kept
    monkeypatch.setenv("TVM_NUM_THREADS", "3")
    assert threads.configure_thread_pool() is None  # TVM's own knob is left as it is
    assert os.environ["TVM_NUM_THREADS"] == "3"
    monkeypatch.setenv("TILELANG_CPU_THREADS", "1")
    assert threads.configure_thread_pool() == 1  # ours wins
    assert os.environ["TVM_NUM_THREADS"] == "1"


def test_invalid_thread_count_is_reported_with_the_fix(monkeypatch):
    monkeypatch.setenv("TILELANG_CPU_THREADS", "all")
    monkeypatch.setenv("TVM_NUM_THREADS", "2")
    assert threads.configure_thread_pool() is None
    assert os.environ["TVM_NUM_THREADS"] == "2"
    with pytest.raises(BackendUnavailableError, match=r"TILELANG_CPU_THREADS='all' is not a positive integer: "
                                                      r"set it to the number of threads"):
        tilelang.compile(gemm_kernel(16, 16, 16, 16, 16, 16), target="cpu")


def copy_rows(rows, cols):
    @T.prim_func
    def main(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows, cols), "float32")):
        with T.Kernel(rows, threads=1) as bx:
            for j in T.Parallel(cols):
                B[bx, j] = A[bx, j] + 1.0

    return main


@pytest.mark.parametrize("rows,cols,parallel", [(4, 8, False), (64, 64, True), (512, 4, False)])
def test_grids_run_in_parallel_when_their_work_pays_for_it(rows, cols, parallel):
    """A grid of blocks goes to the thread pool only when it does MIN_PARALLEL_EXTENT
    iterations or more (waking the pool costs more than a few hundred iterations)."""
    kernel = compiled(copy_rows(rows, cols), ("cpu", "tvm_ffi"))
    assert ("closure_loop_parallel" in kernel.get_host_source()) == parallel
    a = rng.standard_normal((rows, cols), dtype="float32")
    np.testing.assert_array_equal(kernel(a), a + 1.0)


_POOL_SIZE = """
import tilelang, tvm, tvm_ffi
print(tvm_ffi.get_global_func("runtime.NumThreads")())
"""


def test_thread_pool_uses_every_cpu_in_a_fresh_process():
    """TVM sizes its pool once, at its first use, to half the hardware threads unless told
    otherwise (one thread on a 2-core machine): importing tilelang must have told it."""
    unset = ("TILELANG_CPU_THREADS", "TVM_NUM_THREADS", "OMP_NUM_THREADS")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    out = subprocess.run([sys.executable, "-c", _POOL_SIZE], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) == threads.available_cpus()

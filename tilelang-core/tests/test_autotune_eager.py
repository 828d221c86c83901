"""@tilelang.autotune over an eager @tilelang.jit kernel, as upstream's examples call it:
``kernel.compile(M=..., N=...)`` tunes, ``kernel.compile(M=..., N=..., block_M=...)`` does
not (upstream's gemv example gives two of its four tunables)."""

import os

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.autotuner import compile_pool


@tilelang.autotune(configs=[{"block_M": 16, "threads": 32}, {"block_M": 32, "threads": 64}], warmup=1, rep=2)
@tilelang.jit
def scaled_copy(A, block_M=8, threads=32, scale=2.0):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        for i, j in T.Parallel(block_M, N):
            if bx * block_M + i < M:
                B[bx * block_M + i, j] = A[bx * block_M + i, j] * scale
    return B


def test_compile_with_every_tunable_gives_that_configuration():
    kernel = scaled_copy.compile(M=40, N=8, block_M=16)
    a = np.random.default_rng(0).standard_normal((40, 8)).astype("float32")
    np.testing.assert_allclose(kernel(a), a * 2.0, rtol=0, atol=0)


def test_one_tunable_given_compiles_with_the_defaults_for_the_rest():
    kernel = scaled_copy.compile(M=24, N=8, block_M=16)  # threads: the function's default
    a = np.random.default_rng(1).standard_normal((24, 8)).astype("float32")
    np.testing.assert_allclose(kernel(a), a * 2.0, rtol=0, atol=0)
    assert not scaled_copy.results


def test_an_eager_kernel_is_tuned_by_its_sizes_in_a_process_pool(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_pool, "available_cpus", lambda: 2)  # a pool even on one core
    kernel = scaled_copy.compile(M=40, N=8)
    (result,) = scaled_copy.results.values()
    assert [t.config for t in result.trials] == [{"block_M": 16, "threads": 32}, {"block_M": 32, "threads": 64}]
    assert all(t.ok for t in result.trials), [t.error for t in result.trials]
    assert os.getpid() not in {t.compile_pid for t in result.trials}  # compiled by the workers
    assert result.kernel is kernel
    # the kernel carries its tuning, as upstream's (its gemv example reads .config)
    assert kernel.config == result.config in [t.config for t in result.trials]
    assert kernel.get_tuner_result() == {"latency": result.latency, "config": result.config,
                                         "ref_latency": result.ref_latency}
    a = np.random.default_rng(0).standard_normal((40, 8)).astype("float32")
    np.testing.assert_allclose(kernel(a), a * 2.0, rtol=0, atol=0)


def test_a_kernel_compiled_directly_has_no_tuning_result():
    kernel = scaled_copy.compile(M=40, N=8, block_M=16)
    assert kernel.config is None
    with pytest.raises(ValueError, match="no tuning result: it was compiled directly"):
        kernel.get_tuner_result()


def test_calling_an_eager_kernel_with_tensors_tunes_it_for_their_sizes_and_runs_the_best():
    """Upstream's form (testing/python/autotune/test_tilelang_autotune_eager_mode.py):
    ``c = matmul(a, b)`` tunes for the sizes the tensors bind and returns the outputs. It
    was refused here, pointing at ``.compile``."""
    a = np.random.default_rng(3).standard_normal((48, 8)).astype("float32")
    before = set(scaled_copy.results)
    np.testing.assert_allclose(scaled_copy(a), a * 2.0, rtol=0, atol=0)
    tuned = [key for key in scaled_copy.results if key not in before]
    assert len(tuned) == 1 and "'M', 48" in tuned[0]  # tuned for the tensor's sizes
    np.testing.assert_allclose(scaled_copy(a + 1.0), (a + 1.0) * 2.0, rtol=0, atol=0)
    assert len(scaled_copy.results) == len(before) + 1  # the same sizes: no second tune
    # a tunable given skips tuning, as before; upstream's __return_kernel=True is .compile
    np.testing.assert_allclose(scaled_copy(a, block_M=16), a * 2.0)
    kernel = scaled_copy(M=48, N=8, __return_kernel=True)
    assert kernel is scaled_copy.compile(M=48, N=8)


def test_pool_workers_compile_an_eager_kernel_for_the_target_auto_means_in_the_tuning_process(
        tmp_path, monkeypatch, caplog):
    # "auto" forced in this process only: the spawned workers' own "auto" is llvm. Ray's
    # CPU-only tasks were in that position on a GPU host (no GPU visible: "auto" was the
    # CPU), and every configuration was compiled again where it was measured.
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_pool, "available_cpus", lambda: 2)
    before = set(scaled_copy.results)
    with caplog.at_level("WARNING", logger="tilelang.autotuner"), \
            tilelang.env.overridden(TILELANG_DEFAULT_TARGET="c"):
        kernel = scaled_copy.compile(M=24, N=16)
    (result,) = [r for key, r in scaled_copy.results.items() if key not in before]
    assert all(t.ok for t in result.trials), [t.error for t in result.trials]
    assert os.getpid() not in {t.compile_pid for t in result.trials}
    assert "compiled again" not in caplog.text
    assert kernel.target.kind.name == "c"
    a = np.random.default_rng(2).standard_normal((24, 16)).astype("float32")
    np.testing.assert_allclose(kernel(a), a * 2.0, rtol=0, atol=0)



@tilelang.autotune(configs=[{"block_M": 16}, {"block_M": 32}], warmup=1, rep=2)
@tilelang.jit
def scaled_by(A, scale: T.float32, block_M=8):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=32) as bx:
        for i, j in T.Parallel(block_M, N):
            if bx * block_M + i < M:
                B[bx * block_M + i, j] = A[bx * block_M + i, j] * scale
    return B


def test_a_run_time_scalar_is_timed_with_the_calls_value(tmp_path, monkeypatch):
    """The profiler generates tensors only; a `scale: T.float32` argument is the call's (the
    kernel is tuned once, and takes any scale afterwards)."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    a = np.random.default_rng(2).standard_normal((48, 8)).astype("float32")
    np.testing.assert_allclose(scaled_by(a, 3.0), a * 3.0, rtol=1e-6, atol=0)
    np.testing.assert_allclose(scaled_by(a, -0.5), a * -0.5, rtol=1e-6, atol=0)
    (result,) = scaled_by.results.values()
    assert all(t.ok for t in result.trials), [t.error for t in result.trials]

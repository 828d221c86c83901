"""The profiler (kernel.get_profiler, tilelang.profiler.do_bench) and the autotuner
(AutoTuner, @tilelang.autotune) on the CPU, as upstream TileLang's users call them."""

from __future__ import annotations

import io
import os
import pickle
import sys
import threading
import time

import numpy as np
import pytest
import tilelang
import tilelang.language as T
import torch
from rich.console import Console
from tilelang.autotuner import AutotuneError, AutoTuner, compile_pool
from tilelang.autotuner.bench_loop import BenchLoop
from tilelang.errors import InputSupplyError
from tilelang.profiler import TensorSupplyType, ToleranceError
from tilelang.testing import kernels


def _gemm(M, N, K, block_M=32, block_N=32, block_K=32):
    """A tile GEMM whose tiles are the tunables; block sizes of 0 fail while building."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            As = T.alloc_shared((block_M, block_K), "float32")
            Bs = T.alloc_shared((block_K, block_N), "float32")
            Cl = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(Cl)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
                T.copy(A[by * block_M, k * block_K], As)
                T.copy(B[k * block_K, bx * block_N], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * block_M, bx * block_N])

    return main


@tilelang.autotune(configs=[{"block_M": 32, "block_N": 32}, {"block_M": 64, "block_N": 32}], warmup=1, rep=3)
@tilelang.jit(out_idx=[-1])
def tuned_gemm(M, N, K, block_M=None, block_N=None, block_K=32):
    return _gemm(M, N, K, block_M, block_N, block_K)


@tilelang.autotune(configs=[{"block_M": 32, "block_N": 32}, {"block_M": 64, "block_N": 32}], warmup=1, rep=3)
@tilelang.jit(out_idx=[-1])
def tuned_gemm_any_m(M, N, K, block_M=None, block_N=None, block_K=32):
    return _gemm(M, N, K, block_M, block_N, block_K)


def _matmul(a, b):
    return a @ b


# -- profiler -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_outputs_are_compared_on_their_gpu(monkeypatch):
    """An 8192 x 8192 check copied to the host took seconds (one thread in a Ray actor)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from tilelang.profiler.compare import assert_close

    def no_copy(self):
        raise AssertionError("the comparison copied a tensor to the host")

    a = torch.zeros(64, 48, device="cuda", dtype=torch.float16)
    b = a.clone()
    b[0, :5] = 1.0
    monkeypatch.setattr(torch.Tensor, "cpu", no_copy)
    assert_close(a, b, rtol=0, atol=1e-3, max_mismatched_ratio=0.002)
    with pytest.raises(ToleranceError, match=r"5 > 3 .*First mismatch at index \[0, 0\]: tilelang=0, ref=1"):
        assert_close(a, b, rtol=0, atol=1e-3, max_mismatched_ratio=0.001)


def test_profiler_checks_against_a_reference_and_times_the_kernel():
    kernel = tilelang.compile(kernels.tile_gemm(64, 48, 80, bM=32, bN=16, bK=16, dtype="float32"), out_idx=[-1])
    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    assert [p.name for p in profiler._get_params()] == ["A", "B"]
    # fp32 sums of 80 products of N(-1, 1) values: 1e-4 covers the reordering
    profiler.assert_allclose(_matmul, rtol=1e-4, atol=1e-4, max_mismatched_ratio=0.0)
    with pytest.raises(ToleranceError, match=r"Too many mismatched elements: 3072 > 30 \(1.00% allowed"):
        profiler.assert_allclose(lambda a, b: a @ b + 1, rtol=1e-4, atol=1e-4)
    with pytest.raises(AssertionError, match="returned 1 output.* the reference returned 2"):
        profiler.assert_allclose(lambda a, b: (a @ b, a), rtol=1e-4, atol=1e-4)
    # a few wrong elements pass within max_mismatched_ratio and fail beyond it
    a, b = profiler._get_inputs()
    bad = torch.zeros(64, 48)
    bad[0, :5] = 1.0
    profiler.assert_allclose(lambda a, b: a @ b + bad, input_tensors=[a, b], rtol=0, atol=1e-3, max_mismatched_ratio=0.002)
    with pytest.raises(ToleranceError, match=r"5 > 3 .*First mismatch at index \[0, 0\]"):
        profiler.assert_allclose(lambda a, b: a @ b + bad, input_tensors=[a, b], rtol=0, atol=1e-3, max_mismatched_ratio=0.001)

    out = profiler.run_once()
    assert out.shape == (64, 48) and out.dtype == torch.float32 and out.device.type == "cpu"
    latency = profiler.do_bench(warmup=1, rep=5)
    assert isinstance(latency, float) and latency > 0
    p50, p90 = profiler.do_bench(n_warmup=1, n_repeat=9, quantiles=[0.5, 0.9])
    assert 0 < p50 <= p90
    assert profiler.do_bench(_matmul, n_warmup=1, n_repeat=3, return_mode="min") > 0


def test_tensor_supply_types_fill_as_named():
    kernel = tilelang.compile(kernels.elementwise_add(64, 32), out_idx=[-1])
    param = kernel.artifact.params[0]
    fill = {t: kernel.get_profiler(t).supply(param) for t in TensorSupplyType}
    assert all(x.shape == (64, 32) and x.dtype == torch.float32 for x in fill.values())
    assert torch.count_nonzero(fill[TensorSupplyType.Zero]) == 0
    assert torch.all(fill[TensorSupplyType.One] == 1)
    integers = fill[TensorSupplyType.Integer]
    assert torch.all(integers == integers.round()) and integers.min() >= -2 and integers.max() <= 2
    for uniform in (fill[TensorSupplyType.Uniform], fill[TensorSupplyType.Auto]):
        assert uniform.min() >= -1 and uniform.max() <= 1 and len(uniform.unique()) > 100
    assert abs(fill[TensorSupplyType.Normal].mean().item() + 1) < 0.2  # N(-1, 1), as upstream
    assert abs(fill[TensorSupplyType.Randn].mean().item()) < 0.2

    symbolic = tilelang.compile(kernels.row_softmax_sum(19), out_idx=[-1]).get_profiler()
    with pytest.raises(InputSupplyError, match="symbolic dimension 'M'.*dynamic_symbolic_constraints"):
        symbolic._get_inputs()
    assert symbolic._get_params()[0].shape == ("M", 19)
    with pytest.raises(ValueError, match="'scale' is a scalar .*input_tensors"):  # upstream's error type
        symbolic._get_inputs(dynamic_symbolic_constraints={"M": 5})


def test_do_bench_times_host_functions_by_the_wall_clock():
    latency = tilelang.profiler.do_bench(lambda: time.sleep(0.002), warmup=1, rep=20, device="cpu")
    assert isinstance(latency, float) and 2.0 <= latency < 50.0  # sleep(2 ms) takes at least 2 ms
    fast, slow = tilelang.profiler.do_bench(lambda: None, _n_repeat=50, quantiles=[0.1, 0.9])
    assert 0 <= fast <= slow
    with pytest.raises(tilelang.TileLangError, match="return_mode 'average' is not one of"):
        tilelang.profiler.do_bench(lambda: None, return_mode="average")


# -- autotuner ------------------------------------------------------------------------------
CONFIGS = [{"block_M": m, "block_N": n, "block_K": k} for m in (32, 64) for n in (32, 64) for k in (16, 32)]


def _tuner(M, N, K, configs):
    def kernel(block_M=None, block_N=None, block_K=None):  # upstream's idiom: a closure over M, N, K
        return _gemm(M, N, K, block_M, block_N, block_K)

    return (AutoTuner.from_kernel(kernel=kernel, configs=configs)
            .set_compile_args(out_idx=[-1], target="auto")
            .set_profile_args(ref_prog=_matmul, rtol=1e-4, atol=1e-4))


def test_autotuner_compiles_in_a_process_pool_and_caches_the_outcome(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_pool, "available_cpus", lambda: 2)  # a pool even on one core
    configs = [*CONFIGS, {"block_M": 0, "block_N": 32, "block_K": 32}]
    tuner = _tuner(128, 128, 128, configs)
    out = io.StringIO()
    tuner.console = Console(file=out, width=100)
    result = tuner.run(warmup=1, rep=3)

    shown = out.getvalue()
    assert "Compiling 9 configurations" in shown and "Benchmarking (best" in shown and "9/9" in shown
    assert len(result.trials) == 9
    failed = result.trials[8]
    assert failed.stage == "compile" and "Divide by zero" in failed.error and failed.latency is None
    worked = result.trials[:8]
    assert all(t.ok and t.latency > 0 for t in worked)
    pids = {t.compile_pid for t in result.trials}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # compiled by the pool's workers
    best = min(worked, key=lambda t: t.latency)
    assert result.config == configs[best.index] and result.latency == best.latency
    assert result.ref_latency > 0 and not result.from_cache
    a, b = np.random.default_rng(0).standard_normal((2, 128, 128)).astype("float32")
    np.testing.assert_allclose(result.kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    assert "main" in result.libcode

    # a second tuner finds the outcome on disk: it neither compiles nor times anything
    def refuse(*args, **kwargs):
        raise AssertionError("the cached outcome should have been used")

    monkeypatch.setattr(compile_pool, "compile_in_pool", refuse)
    monkeypatch.setattr(BenchLoop, "run", refuse)
    monkeypatch.setattr(sys.modules["tilelang.engine.lower"], "lower", refuse)
    again = _tuner(128, 128, 128, configs).run(warmup=1, rep=3)
    assert again.from_cache and again.kernel.from_cache
    assert again.config == result.config and again.latency == result.latency
    assert [t.to_json() for t in again.trials] == [t.to_json() for t in result.trials]
    np.testing.assert_allclose(again.kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    # another problem size is another problem
    with pytest.raises(AssertionError, match="the cached outcome should have been used"):
        _tuner(64, 128, 128, configs).run(warmup=1, rep=3)


def test_autotune_decorator_over_jit(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")  # no kernel cache: compiled in this process
    kernel = tuned_gemm(64, 64, 64)
    (key, result), = tuned_gemm.results.items()
    assert result.config in ({"block_M": 32, "block_N": 32}, {"block_M": 64, "block_N": 32})
    assert result.kernel is kernel and {t.compile_pid for t in result.trials} == {os.getpid()}
    assert tuned_gemm(64, 64, 64) is kernel  # tuned once per set of fixed arguments
    a, b = np.random.default_rng(1).standard_normal((2, 64, 64)).astype("float32")
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    # tunables given: plain JIT, no tuning
    direct = tuned_gemm(64, 64, 64, block_M=16, block_N=16)
    assert isinstance(direct, tilelang.JITKernel) and len(tuned_gemm.results) == 1
    np.testing.assert_allclose(direct(a, b), a @ b, rtol=1e-4, atol=1e-4)


def test_autotune_reports_every_failure(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")

    release = threading.Event()

    def slow_reference(a, b):  # blocks until the tuner has given up on it
        release.wait(10.0)
        return a @ b

    tuner = _tuner(64, 64, 64, CONFIGS[:2]).set_profile_args(ref_prog=slow_reference, timeout=0.2)
    tuner.console = Console(file=io.StringIO())
    with pytest.raises(AutotuneError, match=r"all 2 configurations failed:\n  config 0 .* check failed: "
                                            r"TimeoutError: timed out after 0.2 s") as info:
        tuner.run(warmup=1, rep=1)
    assert [t.stage for t in info.value.trials] == ["check", "check"]
    release.set()
    for thread in threading.enumerate():  # the timed-out checks finish in the background
        if thread.name == "tilelang-autotune-bench":
            thread.join()

    with pytest.raises(tilelang.TileLangError, match=r"config 0 .* has keys \['block_Q'\] that the builder "
                                                     r"does not take; its parameters are"):
        _tuner(64, 64, 64, [{"block_Q": 1}]).run()
    with pytest.raises(tilelang.TileLangError, match="wraps a @tilelang.jit function, got function"):
        tilelang.autotune(configs=CONFIGS)(_gemm)


def test_set_autotune_inputs_supplies_what_the_signature_cannot(monkeypatch):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    tuner = AutoTuner.from_kernel(kernel=lambda block=None: kernels.saxpy(256, block),
                                  configs=[{"block": 32}, {"block": 64}])
    tuner.console = Console(file=io.StringIO())
    with pytest.raises(InputSupplyError, match=r"parameter 'a' is a scalar \(float32\).*; to autotune, give the "
                                               r"inputs: `with tilelang.autotuner.set_autotune_inputs"):
        tuner.set_profile_args(warmup=1, rep=1).run()  # a scalar cannot be generated: the tune stops

    x, y = torch.ones(256), torch.zeros(256)
    with tilelang.autotuner.set_autotune_inputs(x, y, 2.0):
        result = tuner.set_profile_args(warmup=1, rep=1).run()
    assert result.config in ({"block": 32}, {"block": 64}) and all(t.ok for t in result.trials)
    assert torch.all(y > 0)  # the kernel ran on the captured tensors (y += 2 x, in place)
    assert tilelang.autotuner.get_autotune_inputs() is None


def test_a_symbolic_size_travels_to_the_compile_workers(tmp_path, monkeypatch):
    """Upstream's test_tilelang_autotune_with_inputs.py tunes ``matmul(T.symbolic("m"), N,
    K)``: pickling the variable for the pool's workers crashed the tuning process (TVM
    0.27's reduction of a Var segfaults). It travels as its name and dtype; any other TVM
    object is a PicklingError, so the pool compiles in this process instead."""
    from tilelang.autotuner import serialize

    m = T.symbolic("m")
    again, same, _ = serialize.loads(serialize.dumps((m, m, 1)))
    assert again.name == "m" and str(again.dtype) == "int32" and again is same
    with pytest.raises(pickle.PicklingError, match="m \\* 2 is a TVM object, which cannot be sent"):
        serialize.dumps(m * 2)

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compile_pool, "available_cpus", lambda: 2)
    a, b = (torch.randn(96, 64), torch.randn(64, 64))
    with tilelang.autotuner.set_autotune_inputs([a, b]):
        kernel = tuned_gemm_any_m(T.symbolic("m"), 64, 64)
    (result,) = tuned_gemm_any_m.results.values()
    assert os.getpid() not in {t.compile_pid for t in result.trials}  # the pool's workers compiled
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    c = torch.randn(40, 64)  # the same kernel, another m
    torch.testing.assert_close(kernel(c, b), c @ b, rtol=1e-4, atol=1e-4)


def test_a_configurations_pass_configs_apply_to_it_alone(monkeypatch):
    """Upstream's test_pass_configs_tuning.py: a config's ``pass_configs`` is merged over the
    @jit's and is not an argument of the builder; ``__return_kernel=True`` is upstream's
    spelling of ``.compile`` on an @autotune function (it reached the builder here)."""
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    configs = [{"block_M": 32, "block_N": 32, "pass_configs": {"tl.disable_vectorize": flag}} for flag in (True, False)]

    @tilelang.autotune(configs=configs, warmup=1, rep=2)
    @tilelang.jit(out_idx=[-1], pass_configs={"tl.disable_vectorize": True})
    def gemm(M, N, K, block_M=None, block_N=None):
        return _gemm(M, N, K, block_M, block_N)

    kernel = gemm(64, 64, 64, __return_kernel=True)
    (result,) = gemm.results.values()
    assert all(t.ok for t in result.trials) and len(result.trials) == 2, [t.error for t in result.trials]
    a, b = np.random.default_rng(4).standard_normal((2, 64, 64)).astype("float32")
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)

"""The autotuner's executor contract (tilelang.autotuner.TuneExecutor) and the RayExecutor
errors that need no Ray; the tunes through Ray are in test_autotune_ray.py."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from rich.console import Console
from tilelang.autotuner import (
    AutoTuner,
    LocalExecutor,
    Measurements,
    RayExecutor,
    Trial,
    TuneExecutor,
    TuneJob,
    compile_pool,
)


def _scale(n, block):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=1) as bx:
            for i in T.serial(block):
                if bx * block + i < n:
                    B[bx * block + i] = A[bx * block + i] * 3.0

    return main


CONFIGS = [{"block": 16}, {"block": 32}, {"block": 0}]  # a zero block fails while building


class ScriptedExecutor:
    """Compiles in this process, keeps no kernel, and reports the latencies it is given:
    the tuner must take the best from these and load its kernel from the kernel cache."""

    def __init__(self, latencies):
        self.latencies = latencies
        self.jobs = []

    def compile(self, job):
        self.jobs.append(job)
        for outcome in compile_pool.compile_in_process(job.builder, job.args, job.tasks):
            yield compile_pool.CompileOutcome(outcome.index, outcome.pid, cache_key=outcome.cache_key,
                                              error=outcome.error)

    def measure(self, job, outcomes):
        trials = []
        for outcome in sorted(outcomes, key=lambda o: o.index):
            config = dict(job.configs[outcome.index])
            if outcome.error is not None:
                trials.append(Trial(outcome.index, config, error=outcome.error, stage="compile"))
            else:
                trials.append(Trial(outcome.index, config, latency=self.latencies[outcome.index],
                                    measured_on="scripted"))
        return Measurements(trials, ref_latency=None)


def _tuner(executor, n=100):
    def kernel(block=None):
        return _scale(n, block)

    tuner = AutoTuner.from_kernel(kernel=kernel, configs=CONFIGS, executor=executor).set_compile_args(out_idx=[-1])
    tuner.console = Console(file=io.StringIO())
    return tuner


def test_the_tuner_keeps_the_executors_measurements_and_loads_the_best_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    executor = ScriptedExecutor({0: 2.0, 1: 0.5})
    assert isinstance(executor, TuneExecutor)
    result = _tuner(executor).run(warmup=1, rep=2, use_pipeline=True)
    (job,) = executor.jobs
    assert isinstance(job, TuneJob) and job.runs_on_host and job.use_pipeline
    assert job.cache_dir == str(tmp_path) and [t.index for t in job.tasks] == [0, 1, 2]
    assert job.profile.warmup == 1 and job.profile.rep == 2
    assert result.config == {"block": 32} and result.latency == 0.5
    assert [t.measured_on for t in result.trials] == ["scripted", "scripted", None]
    assert result.trials[2].stage == "compile" and "Divide by zero" in result.trials[2].error
    assert result.kernel.from_cache  # loaded from the entry the executor's compile left
    a = np.arange(100, dtype="float32")
    np.testing.assert_allclose(result.kernel(a), a * 3.0)
    assert "main" in result.libcode
    # the outcome is in the tuning cache whatever executor produced it
    again = _tuner(ScriptedExecutor({})).run(warmup=1, rep=2)
    assert again.from_cache and again.config == {"block": 32} and again.latency == 0.5


def test_local_executor_max_workers(tmp_path, monkeypatch):
    """One worker at most: the configurations compile in this process (no pool to start)."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    result = _tuner(LocalExecutor(max_workers=1)).run(warmup=1, rep=2)
    assert result.config in ({"block": 16}, {"block": 32})
    assert {t.compile_pid for t in result.trials if t.ok} == {os.getpid()}
    assert repr(LocalExecutor(max_workers=3)) == "LocalExecutor(max_workers=3)"
    for bad in (0, 2.5, True):
        with pytest.raises(tilelang.TileLangError, match=rf"LocalExecutor: max_workers must be an int >= 1 "
                                                         rf"\(or None: one per CPU\), got {bad!r}"):
            LocalExecutor(max_workers=bad)


@pytest.mark.parametrize(("cpus", "pipeline", "cap", "expected"),
                         [(16, True, None, 8), (16, False, None, 16), (2, True, None, 2), (3, True, None, 2),
                          (64, False, None, 20), (16, False, 4, 4), (1, True, None, 1), (16, True, 1, 1)])
def test_local_executor_pool_size(monkeypatch, cpus, pipeline, cap, expected):
    """One worker per CPU, one per submission at most; a pipelined tune leaves half the
    CPUs (at least 2 workers, never more than the CPUs) to the process that times; one
    worker means compiling in this process."""
    seen = []
    monkeypatch.setattr(compile_pool, "available_cpus", lambda: cpus)
    monkeypatch.setattr(compile_pool, "compile_in_pool", lambda builder, args, tasks, cache_dir, workers, group:
                        seen.append(workers) or iter(()))
    monkeypatch.setattr(compile_pool, "compile_in_process", lambda builder, args, tasks: seen.append(1) or iter(()))
    tasks = [compile_pool.CompileTask(i, {}, {}) for i in range(20)]
    job = TuneJob("k", _scale, (), [{}] * 20, tasks, None, cache_dir="/nowhere", use_pipeline=pipeline)
    list(LocalExecutor(max_workers=cap).compile(job))
    assert seen == [expected]


def test_executor_must_follow_the_protocol():
    with pytest.raises(tilelang.TileLangError, match=r"executor= takes a TuneExecutor \(an object with "
                                                     r"compile\(job\) and measure\(job, outcomes\), such as "
                                                     r"tilelang.autotuner.RayExecutor\(\)\), got str"):
        _tuner("ray")
    with pytest.raises(tilelang.TileLangError, match=r"executor= takes a TuneExecutor .*, got the class RayExecutor"):
        tilelang.autotune(configs=CONFIGS, executor=RayExecutor)  # the class, not an executor
    with pytest.raises(tilelang.TileLangError, match="compile_cpus must be > 0, got 0"):
        RayExecutor(compile_cpus=0)
    with pytest.raises(tilelang.TileLangError, match=r"bench_workers must be >= 1 \(or None for one per "
                                                     r"device\), got 0"):
        RayExecutor(bench_workers=0)


def test_ray_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    executor = RayExecutor()
    with pytest.raises(tilelang.TileLangError, match=r"RayExecutor needs Ray, which is not installed here "
                                                     r"\(.*\); install it with pip install 'tilelang\[ray\]' "
                                                     r"\(or 'tilelang-core\[ray\]'\)"):
        _tuner(executor).run(warmup=1, rep=1)


class _FakeRay:
    """What _worker_options asks of Ray."""

    def __init__(self, resources):
        self.resources = resources

    def cluster_resources(self):
        return self.resources


def _job(runs_on_host):
    return TuneJob(name="k", builder=None, args=(), configs=[], tasks=[], profile=None, cache_dir=None,
                   runs_on_host=runs_on_host)


def test_ray_measures_one_configuration_per_gpu():
    options = RayExecutor()._worker_options(_FakeRay({"CPU": 32.0, "GPU": 2.0}), _job(runs_on_host=False))
    assert options == [{"num_gpus": 1, "num_cpus": 0}] * 2
    options = RayExecutor(bench_workers=1)._worker_options(_FakeRay({"GPU": 2.0}), _job(runs_on_host=False))
    assert options == [{"num_gpus": 1, "num_cpus": 0}]
    assert RayExecutor(bench_workers=3)._worker_options(_FakeRay({"CPU": 4.0}), _job(runs_on_host=True)) \
        == [{"num_cpus": 1}] * 3
    with pytest.raises(tilelang.TileLangError, match=r"the kernels of 'k' run on an accelerator, but the Ray "
                                                     r"cluster has no GPU .*ray start --num-gpus=N"):
        RayExecutor()._worker_options(_FakeRay({"CPU": 2.0}), _job(runs_on_host=False))


def test_import_tilelang_autotuner_does_not_import_ray():
    code = ("import sys, tilelang, tilelang.autotuner; "
            "sys.exit('ray imported' if 'ray' in sys.modules else 0)")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

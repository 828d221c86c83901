"""RayExecutor: autotuning over a Ray cluster (``pip install 'tilelang[ray]'``).

    from tilelang.autotuner import AutoTuner, RayExecutor
    result = AutoTuner.from_kernel(kernel, configs, executor=RayExecutor()).run()

Compiles are Ray tasks, one per configuration (or per group), each on one of the
cluster's CPUs. Measurements are Ray actors, one configuration at a time each: one actor
per GPU (``num_gpus=1``) for kernels that run on an accelerator, and for CPU kernels one
per node (a CPU kernel's threads take the whole machine, so two timed side by side on one
node would disturb each other). Kernels travel as kernel-cache entries in bytes (see
ray_worker.py for why not a shared folder); the tuning process stores each in its own
kernel cache as it arrives, so the tuning cache and the kernel cache fill exactly as a
local tune fills them, and a later tune, local or not, is a cache hit.

The cluster: the one this process is already connected to (``ray.init`` called before),
else ``address=`` or the TILELANG_RAY_ADDRESS variable (``ray.init(address=...)``; "auto"
finds a cluster started on this machine with ``ray start``), else a local cluster that
``ray.init(**init_kwargs)`` starts. Ray stays connected after the tune, for the next.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import TileLangError
from . import serialize
from .artifact import store_artifact
from .bench_loop import progress_bars, record
from .compile_pool import CompileOutcome, describe_error
from .executor import Measurements, TuneJob
from .param import Trial
from .ray_worker import BenchResult, BenchWorker, WorkerSetup, compile_group

ADDRESS_ENV = "TILELANG_RAY_ADDRESS"
USAGE_STATS_ENV = "RAY_USAGE_STATS_ENABLED"
EXTRA_HINT = "pip install 'tilelang[ray]' (or 'tilelang-core[ray]')"


def import_ray() -> Any:
    """The ray module, or TileLangError naming the extra that brings it."""
    try:
        import ray
    except ImportError as err:
        raise TileLangError(f"tilelang.autotuner.RayExecutor needs Ray, which is not installed here "
                            f"({err}); install it with {EXTRA_HINT}, or tune without executor= "
                            "(this machine's process pool)") from None
    return ray


class RayExecutor:
    """A TuneExecutor on a Ray cluster (see the module's docstring).

    address: the cluster to connect to (default: TILELANG_RAY_ADDRESS, else a local one);
    init_kwargs: more arguments of ``ray.init`` (``num_cpus=2`` for a small local
    cluster); compile_cpus: CPUs each compile task reserves; bench_workers: how many
    configurations are measured at a time (default: every GPU of the cluster, or one per
    node for CPU kernels); worker_cache_dir: the kernel cache of the workers on each node
    (default: ``tilelang-ray-<user>`` in the node's temporary directory)."""

    def __init__(self, address: str | None = None, *, init_kwargs: Mapping[str, Any] | None = None,
                 compile_cpus: float = 1, bench_workers: int | None = None,
                 worker_cache_dir: str | None = None) -> None:
        if compile_cpus <= 0:
            raise TileLangError(f"RayExecutor: compile_cpus must be > 0, got {compile_cpus}")
        if bench_workers is not None and bench_workers < 1:
            raise TileLangError(f"RayExecutor: bench_workers must be >= 1 (or None for one per "
                                f"device), got {bench_workers}")
        self.address = address
        self.init_kwargs = dict(init_kwargs or {})
        self.compile_cpus = compile_cpus
        self.bench_workers = bench_workers
        self.worker_cache_dir = worker_cache_dir

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r})"

    # -- the cluster -----------------------------------------------------------------------
    def connect(self) -> Any:
        """Ray, connected (see the module's docstring for which cluster)."""
        ray = import_ray()
        if not ray.is_initialized():
            address = self.address or os.environ.get(ADDRESS_ENV) or None
            kwargs = {"include_dashboard": False, **self.init_kwargs}
            if address is None:
                # a cluster tilelang starts reports no usage statistics to Ray's servers
                # (on by default; setting RAY_USAGE_STATS_ENABLED=1 turns them back on)
                os.environ.setdefault(USAGE_STATS_ENV, "0")
            try:
                ray.init(address=address, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as err:
                where = f"the Ray cluster at {address!r}" if address else "a local Ray cluster"
                raise TileLangError(f"RayExecutor: could not connect to {where}: {err}; check the "
                                    f"address (RayExecutor(address=...) or {ADDRESS_ENV}), or that "
                                    "`ray status` shows the cluster") from err
        return ray

    def _setup(self) -> WorkerSetup:
        # the main module as multiprocessing's spawn finds it (python -m runs: by name,
        # except a package's __main__; scripts: by path; interactive: none)
        main = sys.modules.get("__main__")
        spec_name = getattr(getattr(main, "__spec__", None), "name", None)
        main_name = main_path = None
        if spec_name is not None:
            if spec_name != "__main__" and not spec_name.endswith(".__main__"):
                main_name = spec_name
        elif getattr(main, "__file__", None):
            main_path = os.path.abspath(main.__file__)
        sys_path = tuple(os.path.abspath(p) for p in sys.path if p)
        return WorkerSetup(self.worker_cache_dir, sys_path, main_path, main_name)

    def _payload(self, job: TuneJob) -> bytes:
        try:
            return serialize.dumps((job.builder, tuple(job.args)))
        except Exception as err:  # pickle fails in many ways; the message says which
            raise TileLangError(f"RayExecutor: the kernel builder of {job.name!r} cannot be sent to Ray "
                                f"workers ({type(err).__name__}: {err}); define it at module level or as a "
                                "closure over values that pickle, or tune without executor=") from err

    # -- compile ---------------------------------------------------------------------------
    def compile(self, job: TuneJob) -> Iterator[CompileOutcome]:
        """Submits every compile now (so that they run while measuring workers start) and
        returns the outcomes as they finish, each stored in this process's kernel cache."""
        ray = self.connect()
        payload = ray.put(self._payload(job))
        setup = self._setup()
        remote = ray.remote(num_cpus=self.compile_cpus, max_retries=0)(compile_group)
        size = max(1, job.group_size)
        groups = [list(job.tasks[i:i + size]) for i in range(0, len(job.tasks), size)]
        pending = {remote.remote(setup, payload, group): group for group in groups}
        return self._gather(ray, job, pending)

    def _gather(self, ray: Any, job: TuneJob, pending: dict[Any, list[Any]]) -> Iterator[CompileOutcome]:
        from ..cache import KernelCache

        cache = KernelCache() if job.cache_dir is not None else None
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            group = pending.pop(ref)
            try:
                outcomes = ray.get(ref)
            except ray.exceptions.RayError as err:  # the worker died, or the task could not run
                error = f"the Ray compile task failed: {describe_error(err)}"
                outcomes = [CompileOutcome(task.index, -1, error=error) for task in group]
            for outcome in outcomes:
                if cache is not None and outcome.artifact is not None:
                    store_artifact(cache, outcome.artifact)
                yield outcome

    # -- measure ---------------------------------------------------------------------------
    def _worker_options(self, ray: Any, job: TuneJob) -> list[dict[str, Any]]:
        """Ray options of each measuring actor."""
        if not job.runs_on_host:
            gpus = int(ray.cluster_resources().get("GPU", 0))
            if gpus < 1:
                raise TileLangError(f"RayExecutor: the kernels of {job.name!r} run on an accelerator, but "
                                    "the Ray cluster has no GPU (ray.cluster_resources() lists none); "
                                    "start its nodes with GPUs (ray start --num-gpus=N) or tune locally")
            # no CPU reserved: compiles keep every CPU while the GPUs measure
            return [{"num_gpus": 1, "num_cpus": 0}] * (self.bench_workers or gpus)
        if self.bench_workers is not None:
            return [{"num_cpus": 1}] * self.bench_workers
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        return [{"num_cpus": 1, "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
                for node in nodes] or [{"num_cpus": 1}]

    def measure(self, job: TuneJob, outcomes: Iterable[CompileOutcome]) -> Measurements:
        ray = self.connect()
        options = self._worker_options(ray, job)
        setup = self._setup()
        payload = ray.put(self._payload(job))
        profile = ray.put(serialize.dumps(job.profile))
        actor_class = ray.remote(max_restarts=0)(BenchWorker)
        run = _MeasureRun(ray, job, lambda i: actor_class.options(**options[i]).remote(setup, payload, profile))
        try:
            with run.progress:
                if not job.runs_on_host:  # GPU workers take no CPU: they start while the compiles run
                    run.start_workers(len(options))
                waiting = []
                for outcome in outcomes:
                    run.progress.advance(run.compiling)
                    if outcome.error is not None:
                        run.finish(Trial(outcome.index, dict(job.configs[outcome.index]), error=outcome.error,
                                         stage="compile", compile_pid=outcome.pid))
                    elif job.use_pipeline:
                        run.start_workers(len(options))
                        run.submit(outcome)
                        run.collect(block=False)
                    else:
                        waiting.append(outcome)
                run.start_workers(len(options))
                for outcome in sorted(waiting, key=lambda o: o.index):
                    run.submit(outcome)
                run.drain()
        finally:
            run.close()
        return Measurements([run.trials[i] for i in sorted(run.trials)], run.ref_latency)


class _MeasureRun:
    """The state of one measure(): idle workers, configurations waiting for one, and the
    measurements in flight. A worker takes the next configuration when it hands one back."""

    def __init__(self, ray: Any, job: TuneJob, new_worker: Any) -> None:
        self.ray, self.job, self.new_worker = ray, job, new_worker
        self.workers: list[Any] = []
        self.idle: list[Any] = []
        self.queue: list[CompileOutcome] = []
        self.in_flight: dict[Any, tuple[Any, CompileOutcome]] = {}
        self.trials: dict[int, Trial] = {}
        self.ref_latency: float | None = None
        self.best: float | None = None
        self.progress, self.compiling, self.timing = progress_bars(job)

    def start_workers(self, count: int) -> None:
        while len(self.workers) < count:
            worker = self.new_worker(len(self.workers))
            self.workers.append(worker)
            self.idle.append(worker)

    def submit(self, outcome: CompileOutcome) -> None:
        self.queue.append(outcome)
        self._dispatch()

    def _dispatch(self) -> None:
        factor = self.job.early_stop_factor
        while self.idle and self.queue:
            worker, outcome = self.idle.pop(0), self.queue.pop(0)
            baseline = self.best * factor if factor is not None and self.best is not None else None
            ref = worker.measure.remote(self.job.tasks[outcome.index], outcome.artifact, baseline)
            self.in_flight[ref] = (worker, outcome)

    def collect(self, block: bool) -> None:
        """Take the finished measurements (at least one when ``block``)."""
        if not self.in_flight:
            return
        done, _ = self.ray.wait(list(self.in_flight), num_returns=1 if block else len(self.in_flight),
                                timeout=None if block else 0)
        for ref in done:
            worker, outcome = self.in_flight.pop(ref)
            try:
                result: BenchResult = self.ray.get(ref)
            except self.ray.exceptions.RayError as err:  # the actor died (a crash in the kernel?)
                self._replace(worker)
                self.finish(Trial(outcome.index, dict(self.job.configs[outcome.index]), stage="bench",
                                  error=f"the Ray benchmark worker failed: {describe_error(err)}",
                                  compile_pid=outcome.pid))
                continue
            self.idle.append(worker)
            if self.ref_latency is None:
                self.ref_latency = result.ref_latency
            config = dict(self.job.configs[result.index])
            if result.latency is None:
                self.finish(Trial(result.index, config, error=result.error, stage=result.stage,
                                  compile_pid=outcome.pid, measured_on=result.worker))
            else:
                self.finish(Trial(result.index, config, latency=result.latency, compile_pid=outcome.pid,
                                  measured_on=result.worker))
        self._dispatch()

    def _replace(self, dead: Any) -> None:
        slot = self.workers.index(dead)
        self.ray.kill(dead, no_restart=True)
        self.workers[slot] = self.new_worker(slot)
        self.idle.append(self.workers[slot])

    def finish(self, trial: Trial) -> None:
        record(self.job, self.trials, trial)
        if trial.ok and (self.best is None or trial.latency < self.best):
            self.best = trial.latency
            self.progress.update(self.timing, description=f"Benchmarking (best {trial.latency:.4g} ms)")
        self.progress.advance(self.timing)

    def drain(self) -> None:
        while self.in_flight or self.queue:
            self.collect(block=True)

    def close(self) -> None:
        """End the workers: their processes hold a GPU (or a CPU) and the tuning's inputs."""
        for worker in self.workers:
            self.ray.kill(worker, no_restart=True)
        self.workers.clear()


__all__ = ["ADDRESS_ENV", "RayExecutor", "import_ray"]

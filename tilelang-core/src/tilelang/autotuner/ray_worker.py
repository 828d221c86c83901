"""What RayExecutor runs on a Ray cluster's workers: ``compile_group`` (a task per group of
configurations, on a CPU) and ``BenchWorker`` (an actor per GPU, or per node for CPU
kernels, that checks and times one configuration at a time).

Nothing here imports Ray: the driver wraps these with ``ray.remote`` when it needs them,
and Ray's workers import this module by name (it is installed with tilelang).

Workers compile into a kernel cache of their own node (``WorkerSetup.cache_dir``), then
send the entry back as bytes (artifact.py): the nodes of a cluster need share no
filesystem, and the tuning process's cache folder is only ever written by that process,
with its owner and mode checks intact. A measuring worker stores the bytes it is handed in
its node's cache unless the entry is already there (compiled on that node), then builds the
configuration, which is a cache hit.
"""

from __future__ import annotations

import getpass
import os
import runpy
import socket
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .. import env
from . import compile_pool, serialize
from .artifact import KernelArtifact, read_artifact, store_artifact
from .compile_pool import CompileOutcome, CompileTask


@dataclass(frozen=True)
class WorkerSetup:
    """How a worker prepares its process. cache_dir: its node's kernel cache (None: a
    per-user folder in the node's temporary directory); sys_path: the tuning process's
    import path, whose folders that exist on the node are appended (spawned pool workers
    get the same, so builders defined in a test or a script's folder import); main_path /
    main_name: the tuning process's ``__main__`` (a script's path, or the module that
    ``python -m`` ran), run as ``__mp_main__`` once per process, as multiprocessing's spawn
    does: builders, references and input suppliers defined there are pickled as
    ``__main__``'s, and a script's ``if __name__ == "__main__":`` block does not run."""

    cache_dir: str | None
    sys_path: tuple[str, ...]
    main_path: str | None = None
    main_name: str | None = None


def default_cache_dir() -> str:
    return os.path.join(tempfile.gettempdir(), f"tilelang-ray-{getpass.getuser()}")


def prepare(setup: WorkerSetup) -> None:
    """Make this worker process ready for the tuning process's tasks (cheap to repeat)."""
    os.environ[env.CACHE_DIR] = setup.cache_dir or default_cache_dir()
    # the artifacts travel through this node's cache, so it is on even when the tuning
    # process runs without one (a local cluster's workers inherit its environment)
    os.environ.pop(env.DISABLE_CACHE, None)
    for folder in setup.sys_path:
        if folder and folder not in sys.path and os.path.isdir(folder):
            sys.path.append(folder)
    if setup.main_path is not None or setup.main_name is not None:
        _run_main(setup.main_path, setup.main_name)


def _run_main(path: str | None, name: str | None) -> None:
    ran = sys.modules.get("__mp_main__")
    if ran is not None and getattr(ran, "__tilelang_main__", None) == (path, name):
        return
    if name is not None:
        namespace = runpy.run_module(name, run_name="__mp_main__", alter_sys=False)
    else:
        namespace = runpy.run_path(str(path), run_name="__mp_main__")
    module = type(sys)("__mp_main__")
    module.__dict__.update(namespace)
    module.__tilelang_main__ = (path, name)
    # what was pickled as __main__'s resolves to the tuning process's main here
    sys.modules["__mp_main__"] = sys.modules["__main__"] = module


def compile_group(setup: WorkerSetup, payload: bytes, tasks: Sequence[CompileTask]) -> list[CompileOutcome]:
    """Compile ``tasks`` here; each compiled kernel's cache entry comes back as bytes."""
    try:
        prepare(setup)
    except Exception as err:  # noqa: BLE001  (e.g. the driver's script fails on this node)
        error = f"the Ray worker on {socket.gethostname()} could not be prepared: {compile_pool.describe_error(err)}"
        return [CompileOutcome(t.index, os.getpid(), error=error) for t in tasks]
    from ..cache import KernelCache

    cache = KernelCache()
    outcomes = []
    for outcome in compile_pool._compile_in_worker(payload, tasks):
        artifact = read_artifact(cache, outcome.cache_key) if outcome.cache_key else None
        if outcome.error is None and artifact is None:
            outcome = CompileOutcome(outcome.index, outcome.pid, error=(
                f"config {outcome.index} compiled on {socket.gethostname()}, but its kernel-cache entry "
                f"{outcome.cache_key} could not be read back from {cache.root}"))
        outcomes.append(CompileOutcome(outcome.index, outcome.pid, cache_key=outcome.cache_key,
                                       error=outcome.error, artifact=artifact))
    return outcomes


@dataclass(frozen=True)
class BenchResult:
    """One configuration measured by a BenchWorker: the latency (ms), or the error and the
    stage ("load", "check", "bench") that failed; the reference's latency once known."""

    index: int
    latency: float | None
    error: str
    stage: str
    ref_latency: float | None
    worker: str


class BenchWorker:
    """A Ray actor that measures configurations one at a time on the device Ray gave it
    (``CUDA_VISIBLE_DEVICES`` names one GPU for a ``num_gpus=1`` actor; CPU kernels run on
    its node). It keeps the inputs and the reference's timing across configurations."""

    def __init__(self, setup: WorkerSetup, payload: bytes, profile_payload: bytes) -> None:
        from .bench_loop import KernelTimer

        self.error = ""
        self.builder: Any = None
        self.args: tuple[Any, ...] = ()
        try:
            prepare(setup)
            self.builder, self.args = serialize.loads(payload)
            self.timer = KernelTimer(serialize.loads(profile_payload))
        except Exception as err:  # noqa: BLE001  (every configuration it is handed reports it)
            self.error = f"the Ray benchmark worker could not be prepared: {compile_pool.describe_error(err)}"
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
        device = f"GPU {gpus}" if gpus else "CPU"
        self.name = f"{socket.gethostname()} {device} (pid {os.getpid()})"

    def measure(self, task: CompileTask, artifact: KernelArtifact | None, baseline: float | None) -> BenchResult:
        from ..cache import KernelCache
        from .bench_loop import time_kernel

        if self.error:
            return BenchResult(task.index, None, self.error, "load", None, self.name)
        if artifact is not None:
            store_artifact(KernelCache(), artifact)
        loaded = compile_pool.load_compiled(self.builder, self.args, task, artifact and artifact.key, self.name)
        if loaded.error is not None:
            return BenchResult(task.index, None, loaded.error, "load", self.timer.ref_latency, self.name)
        latency, error, stage = time_kernel(self.timer, loaded.kernel, baseline)
        return BenchResult(task.index, latency, error, stage, self.timer.ref_latency, self.name)

    def describe(self) -> str:
        return self.name


__all__ = ["BenchResult", "BenchWorker", "WorkerSetup", "compile_group", "default_cache_dir", "prepare"]

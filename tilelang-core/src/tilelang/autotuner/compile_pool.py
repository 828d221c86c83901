"""Compiling configurations in parallel.

A pool of spawned worker processes (TVM is not fork-safe) compiles the configurations: a
worker builds the T.prim_func of its configuration and compiles it, which stores the kernel
in the on-disk kernel cache, and reports only the cache key (or the error). The parent then
builds each prim_func again (milliseconds) and compiles it, which is a kernel-cache hit: a
load, not a compilation. Without a kernel cache (TILELANG_DISABLE_CACHE=1) the parent
compiles in-process, one configuration after another, since workers could not hand the
kernels back.
"""

from __future__ import annotations

import ast
import concurrent.futures
import logging
import multiprocessing
import os
import pickle
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from .. import env
from ..cpu.threads import available_cpus
from . import serialize
from .artifact import KernelArtifact

log = logging.getLogger("tilelang.autotuner")


@dataclass(frozen=True)
class CompileTask:
    """One configuration: the builder's keyword arguments and tilelang.compile's options."""

    index: int
    kwargs: Mapping[str, Any]
    options: Mapping[str, Any]


@dataclass(frozen=True)
class CompileOutcome:
    index: int
    pid: int
    kernel: Any = None  # the JITKernel when compiled in this process
    cache_key: str | None = None
    error: str | None = None
    func: Any = None  # the T.prim_func, likewise
    artifact: KernelArtifact | None = None  # the kernel-cache entry's bytes, from another machine


def describe_error(err: BaseException) -> str:
    """``Type: message``; TileLang's own errors already say where and why, others get
    the innermost frames of their traceback too."""
    from ..errors import TileLangError

    text = f"{type(err).__name__}: {err}".strip()
    if not isinstance(err, TileLangError):
        frames = traceback.format_tb(err.__traceback__)[-3:]
        text += "\n" + "".join(frames).rstrip()
    return text


@contextmanager
def auto_resolved_as(options: Mapping[str, Any]) -> Iterator[None]:
    """Inside, ``target="auto"`` and ``execution_backend="auto"`` mean what the tuning
    process resolved them to (``options``' target, target host and execution backend).

    An eager ``@tilelang.jit`` builder compiles itself with its own "auto", and a worker
    may resolve that differently from the tuning process: a Ray task that asks for no GPU
    sees none (Ray empties ``CUDA_VISIBLE_DEVICES``), so "auto" there is the CPU. Its
    kernel then has another cache key, and the GPU that measures it compiled every
    configuration again (H200, 2 GPUs, 16 GEMM configurations: 3.6 s per configuration).
    An explicit target in the decorator is kept; only "auto" follows the tuning process."""
    target, host = options.get("target"), options.get("target_host")
    backend = options.get("execution_backend")
    with ExitStack() as stack:
        if target is not None:
            from tvm.target import Target

            stack.enter_context(Target(target, host) if host is not None else Target(target))
        if backend is not None:
            stack.enter_context(env.overridden(TILELANG_DEFAULT_EXECUTION_BACKEND=backend))
        yield


def compile_one(builder: Callable[..., Any], args: Sequence[Any], task: CompileTask) -> CompileOutcome:
    """Build and compile one configuration here; errors are returned, not raised."""
    import tilelang
    from tilelang.jit.kernel import JITKernel

    try:
        with auto_resolved_as(task.options):
            func = builder(*args, **task.kwargs)
        # an eager kernel's builder compiles itself (it knows its outputs)
        if isinstance(func, JITKernel):
            kernel, func = func, func.prim_func
        else:
            kernel = tilelang.compile(func, **task.options)
    except Exception as err:  # noqa: BLE001  (a configuration may fail in any way; it is recorded and skipped)
        return CompileOutcome(task.index, os.getpid(), error=describe_error(err))
    return CompileOutcome(task.index, os.getpid(), kernel=kernel, cache_key=kernel.cache_key, func=func)


def load_compiled(builder: Callable[..., Any], args: Sequence[Any], task: CompileTask,
                  key: str | None, where: str = "this process") -> CompileOutcome:
    """``compile_one`` for a configuration a worker compiled under ``key``: a kernel-cache
    hit, or (with a warning) a compilation when this process's key differs."""
    loaded = compile_one(builder, args, task)
    if key is not None and loaded.kernel is not None and loaded.kernel.cache_key != key:
        log.warning("tilelang autotuner: config %d compiled again in %s (its kernel-cache key %s differs "
                    "from the compiling worker's %s)", task.index, where, loaded.kernel.cache_key, key)
    return loaded


def _init_worker(cache_dir: str) -> None:
    # the parent's cache directory may be set in-process (tilelang.env), which a spawned
    # process would not see: hand it over through the variable
    os.environ[env.CACHE_DIR] = cache_dir
    import tilelang.language._surface  # noqa: F401  (TVM and the language's names load before the first task)


def _compile_in_worker(payload: bytes, tasks: Sequence[CompileTask]) -> list[CompileOutcome]:
    try:
        builder, args = serialize.loads(payload)
    except Exception as err:  # noqa: BLE001  (reported for every task of the group)
        error = f"the kernel builder could not be rebuilt in a compile worker: {describe_error(err)}"
        return [CompileOutcome(t.index, os.getpid(), error=error) for t in tasks]
    outcomes = []
    for task in tasks:
        outcome = compile_one(builder, args, task)
        # the kernel stays behind: the parent loads it from the kernel cache
        outcomes.append(CompileOutcome(outcome.index, outcome.pid, None, outcome.cache_key, outcome.error))
    return outcomes


def compile_in_process(builder: Callable[..., Any], args: Sequence[Any],
                       tasks: Iterable[CompileTask]) -> Iterator[CompileOutcome]:
    for task in tasks:
        yield compile_one(builder, args, task)


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either operand order)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.comparators) != 1:
        return False
    sides = {ast.unparse(node.test.left), ast.unparse(node.test.comparators[0])}
    return isinstance(node.test.ops[0], ast.Eq) and sides == {"__name__", "'__main__'"}


def spawn_reruns_this_call() -> bool:
    """Whether a spawned worker would run this call again: it runs in the top-level code of
    the ``__main__`` script outside an ``if __name__ == "__main__":`` block, which spawn
    re-runs in each worker (as ``__mp_main__``) before the worker takes any task, so each
    worker would start a pool of its own, and multiprocessing stops it."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>"
                                     and frame.f_globals.get("__name__") == "__main__"):
        frame = frame.f_back
    if frame is None or not path or os.path.abspath(frame.f_code.co_filename) != os.path.abspath(path):
        return False  # not a script's top level (an interactive session, a notebook): nothing re-runs
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return False
    line = frame.f_lineno
    for node in tree.body:
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return not _is_main_guard(node)
    return False


def _groups(tasks: Iterable[CompileTask], size: int) -> Iterator[list[CompileTask]]:
    group: list[CompileTask] = []
    for task in tasks:
        group.append(task)
        if len(group) >= max(1, size):
            yield group
            group = []
    if group:
        yield group


def compile_in_pool(builder: Callable[..., Any], args: Sequence[Any], tasks: Iterable[CompileTask],
                    cache_dir: str, workers: int, group_size: int = 1) -> Iterator[CompileOutcome]:
    """Outcomes in completion order, from ``workers`` spawned processes; each submission
    carries ``group_size`` configurations. ``tasks`` may be produced lazily: the workers
    start with the first submission, so producing the rest overlaps their start. Falls back
    to compiling here when the builder cannot be sent to another process, or when each
    worker would run this call again (the top level of a script without a ``__main__``
    guard: spawn_reruns_this_call)."""
    if spawn_reruns_this_call():
        tasks = list(tasks)
        log.warning("tilelang: compiling %d configuration(s) in this process, one after another: the script "
                    "calls this at its top level, which each worker process would run again; put the call "
                    "under `if __name__ == \"__main__\":` to compile in parallel", len(tasks))
        yield from compile_in_process(builder, args, tasks)
        return
    try:
        payload = serialize.dumps((builder, tuple(args)))
    except (pickle.PicklingError, TypeError, AttributeError, ValueError) as err:
        log.warning("tilelang autotuner: compiling in this process, since the kernel builder "
                    "cannot be sent to a worker process (%s)", err)
        yield from compile_in_process(builder, args, tasks)
        return
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                                initializer=_init_worker, initargs=(cache_dir,)) as pool:
        futures = {pool.submit(_compile_in_worker, payload, group): group for group in _groups(tasks, group_size)}
        for future in concurrent.futures.as_completed(futures):
            try:
                yield from future.result()
            except Exception as err:  # noqa: BLE001  (the worker died: a crash in native code, or killed)
                for task in futures[future]:
                    yield CompileOutcome(task.index, -1, error=f"the compile worker failed: {describe_error(err)}")


__all__ = ["CompileOutcome", "CompileTask", "available_cpus", "compile_in_pool", "compile_in_process",
           "compile_one", "describe_error"]

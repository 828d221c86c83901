"""``par_compile``: upstream's way to compile many kernels at once.

``matmul.par_compile([(1024, 1024, 1024, 128, 128, 64), {"M": 2048, ...}])`` returns the
kernels in the order of the configurations (a tuple is positional arguments, a dict
keywords); ``tilelang.par_compile([func, ...], **compile_options)`` does the same for
PrimFuncs. The autotuner's compile pool does the work (tilelang.autotuner.compile_pool):
spawned worker processes compile the kernels into the kernel cache, and this process then
takes each kernel from it (a load). A worker builds a configuration's PrimFunc again; a
PrimFunc built here travels as its TVMScript text (tilelang.jit.func_text). A pool takes
seconds to start, so ``tilelang.par_compile`` compiles new kernels here, timed, and sends
the rest to workers once, at the mean time of those, they would finish sooner there
(kernels of a tenth of a second, the CPU's, all compile here). The texts are made while the
workers start, and each kernel a worker finishes is loaded here while the others compile.
``num_workers`` caps the workers (default: one per CPU). Where that cannot apply, the kernels
compile here, one after another, with the same result: without a kernel cache (workers could
not hand kernels back), with one worker or one kernel, for eager kernels (their builders run
against tensors or ``T.const`` values), and for a PrimFunc whose text does not read back as
the same function.
A kernel a worker could not compile compiles here again, so that its error is the one this
process gives (with the user's source line).

A configuration that fails raises a CompileError naming its index; with
``ignore_error=True`` its place in the result is None and the error is logged.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..errors import ArgumentError, CompileError

log = logging.getLogger("tilelang.jit")


def _call_of(config: Any, where: str, index: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(config, Mapping):
        return (), dict(config)
    if isinstance(config, (tuple, list)):
        return tuple(config), {}
    raise ArgumentError(f"{where}: configuration {index} is a {type(config).__name__}; pass a tuple of "
                        "positional arguments or a dict of keyword arguments")


def _failed(where: str, index: int, error: str, ignore_error: bool) -> None:
    if not ignore_error:
        raise CompileError(f"{where}: configuration {index} failed: {error}")
    log.warning("%s: configuration %d failed (ignored): %s", where, index, error)


def _workers(num_workers: int | None, count: int) -> int:
    from ..autotuner.compile_pool import available_cpus

    if num_workers is not None and (isinstance(num_workers, bool) or not isinstance(num_workers, int)
                                    or num_workers < 1):
        raise ArgumentError(f"par_compile: num_workers must be an int >= 1 (or None: one per CPU), got "
                            f"{num_workers!r}")
    return min(count, num_workers or available_cpus())


def par_compile_jit(function: Any, configs: Sequence[Any], num_workers: int | None,
                    ignore_error: bool) -> list[Any]:
    """``JITFunction.par_compile`` (see the module docstring)."""
    where = f"@tilelang.jit function {getattr(function.builder, '__name__', 'kernel')!r}: par_compile"
    calls = [_call_of(c, where, i) for i, c in enumerate(configs)]
    workers = _workers(num_workers, len(calls))
    pooled: dict[int, str | None] = {}  # index -> the worker's error (None: compiled)
    if function._eager is None and function._signature is not None and workers >= 2:
        pooled = _compile_in_workers(function, calls, workers, where)
    kernels: list[Any] = []
    for index, (args, kwargs) in enumerate(calls):
        if pooled.get(index) is not None:
            _failed(where, index, str(pooled[index]), ignore_error)
            kernels.append(None)
            continue
        # a kernel-cache hit where a worker compiled it
        kernels.append(_compiled(functools.partial(function.compile, *args, **kwargs), where, index, ignore_error))
    return kernels


def _compiled(compile_one: Any, where: str, index: int, ignore_error: bool) -> Any:
    """``compile_one()``'s kernel; None for a failure that ``ignore_error`` lets pass (logged).
    An ArgumentError (the call itself is wrong) always raises."""
    try:
        return compile_one()
    except Exception as err:
        if not ignore_error or isinstance(err, ArgumentError):
            raise
        _failed(where, index, f"{type(err).__name__}: {err}", ignore_error)
        return None


def _resolved(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with "auto" resolved once, here: a worker resolves it with the workers'
    view of the machine (the autotuner's tasks do the same); this process's own compile of
    the kernel then hits the worker's cache key."""
    from ..backend.module import create_backend_context

    resolved = dict(options)
    context = create_backend_context(resolved.get("target", "auto"), resolved.get("target_host"),
                                     resolved.get("execution_backend", "auto"))
    resolved.update(target=context.target, target_host=context.target_host,
                    execution_backend=context.execution_spec.name)
    return resolved


def _in_pool(builder: Any, tasks: Iterable[Any], total: int, workers: int, what: str) -> Iterator[Any]:
    """The workers' outcomes (CompileOutcome) as they finish; none where there is no kernel
    cache. ``tasks`` may be produced lazily (at most ``total`` of them): the workers start
    with the first. A progress bar on stderr counts the kernels the workers finish."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from ..autotuner.compile_pool import compile_in_pool
    from ..cache import KernelCache

    cache = KernelCache()
    if not cache.enabled:
        return
    sent, all_sent = 0, False

    def counted() -> Iterator[Any]:
        nonlocal sent, all_sent
        for task in tasks:
            sent += 1
            yield task
        all_sent = True

    def description(count: int) -> str:
        return f"{what}: compiling {count} kernels in {min(workers, max(count, 1))} processes"

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True)) as progress:
        bar = progress.add_task(description(total), total=total)
        for outcome in compile_in_pool(builder, (), counted(), str(cache.root), workers):
            if all_sent:  # (a pool takes every task before its first outcome; texts that did not
                # read back are not among them)
                progress.update(bar, total=sent, description=description(sent))
            progress.advance(bar)
            yield outcome


def _compile_in_workers(function: Any, calls: list[tuple[tuple[Any, ...], dict[str, Any]]], workers: int,
                        where: str) -> dict[int, str | None]:
    from ..autotuner.compile_pool import CompileTask
    from ..cache import KernelCache

    if not KernelCache().enabled:
        return {}
    signature: inspect.Signature = function._signature
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in signature.parameters.values()):
        return {}  # *args / **kwargs do not pass as keywords by name: compiled here
    options = _resolved(function.options)
    tasks = []
    for index, (args, kwargs) in enumerate(calls):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise ArgumentError(f"{where}: configuration {index}: {err}") from None
        tasks.append(CompileTask(index, dict(bound.arguments), options))
    return {outcome.index: outcome.error for outcome in _in_pool(function.builder, tasks, len(tasks), workers, where)}


#: seconds a pool is weighed as taking to start: spawning the workers and importing TVM and
#: the language in each (2-3 s on a 2-CPU machine). On a 16-CPU H100 host 15-16 workers at
#: once take 4-7 s, so a few dozen kernels of a quarter second can lose there (24 of them:
#: 7.2 s through a pool against 5.3 s here); weighing the start at 8 s avoided that but left
#: upstream's compile_speed zoo, whose first kernels are its quickest, all here (20.3 s
#: against 9 s through the pool). The zoo's case is the one kept.
POOL_START_S = 3.0


def _pool_pays(seconds: float, count: int, workers: int) -> bool:
    """Whether ``count`` more kernels of about ``seconds`` each compile sooner in
    ``workers`` processes than here, one after another."""
    return count >= 2 and count * seconds > POOL_START_S + count * seconds / min(workers, count)


def _funcs_in_workers(funcs: Sequence[Any], first: int, workers: int, options: Mapping[str, Any]) -> Iterator[int]:
    """Compile into the kernel cache, in worker processes, the PrimFuncs from index
    ``first`` on whose text reads back as themselves, and yield the index of each the
    workers compiled, as they finish: the caller loads it meanwhile (a cache hit) and
    compiles the others itself. Each text is made while the workers start."""
    from ..autotuner.compile_pool import CompileTask
    from ..cache import KernelCache
    from .func_text import decode, encode

    if not KernelCache().enabled or options.get("instruments"):
        return  # instruments watch this process's passes
    try:
        resolved = _resolved(options)
    except Exception:  # noqa: BLE001  (each kernel's own compile gives the error)
        return

    def tasks() -> Iterator[Any]:
        for index in range(first, len(funcs)):
            encoded = encode(funcs[index])
            if encoded is None:
                log.info("tilelang.par_compile: kernel %d compiles in this process (its TVMScript text does not "
                         "read back as the same function)", index)
                continue
            yield CompileTask(index, encoded._asdict(), resolved)

    pending = tasks()
    head = list(itertools.islice(pending, 2))
    if len(head) < 2:
        return  # one kernel for a pool: it compiles here
    for outcome in _in_pool(decode, itertools.chain(head, pending), len(funcs) - first, workers,
                            "tilelang.par_compile"):
        if outcome.error is None:
            yield outcome.index


def _compile_here(func: Any, index: int, options: Mapping[str, Any], ignore_error: bool) -> Any:
    from . import compile as compile_one

    # a kernel-cache hit where a worker compiled it; here, the worker's failures
    return _compiled(functools.partial(compile_one, func, **options), "tilelang.par_compile", index, ignore_error)


def par_compile(funcs: Sequence[Any], num_workers: int | None = None, ignore_error: bool = False,
                **options: Any) -> list[Any]:
    """``tilelang.par_compile(funcs, ...)``: ``tilelang.compile(func, **options)`` for each
    PrimFunc, in order. Kernels the cache does not have compile here, timed, until the ones
    after them would finish sooner in worker processes at their mean time (see _pool_pays
    and the module docstring); those then go to the workers."""
    workers = _workers(num_workers, max(1, len(funcs)))
    pooled = workers < 2  # whether the pool ran, or cannot (one worker)
    spent, compiled = 0.0, 0  # the kernels compiled here: seconds, how many
    kernels: list[Any] = [None] * len(funcs)
    loaded: set[int] = set()  # compiled by workers and loaded while the others compiled
    for index, func in enumerate(funcs):
        if index in loaded:
            continue
        start = time.perf_counter()
        kernels[index] = kernel = _compile_here(func, index, options, ignore_error)
        if pooled or (kernel is not None and kernel.from_cache):
            continue
        # weighed again after each kernel compiled here, at their mean time: a quick first
        # kernel (an elementwise one before GEMMs) does not keep slow ones from the pool
        spent, compiled = spent + time.perf_counter() - start, compiled + 1
        if _pool_pays(spent / compiled, len(funcs) - index - 1, workers):
            pooled = True
            for done in _funcs_in_workers(funcs, index + 1, workers, options):
                kernels[done] = _compile_here(funcs[done], done, options, ignore_error)
                loaded.add(done)
    return kernels


__all__ = ["par_compile", "par_compile_jit"]

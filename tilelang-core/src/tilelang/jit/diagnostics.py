"""Where a compile spends its time: ``TILELANG_JIT_DIAGNOSTICS=1`` logs each phase of a
``tilelang.compile`` / ``@tilelang.jit`` compile (the cache lookup, lowering, the execution
backend's build, the cache store, loading) as it starts and ends, with its seconds and the
kernel, target and execution backend, at INFO on the ``tilelang.jit.diagnostics`` logger
(on stderr when the program configured no logging).

``jit_phase(name, **context)`` is the same log around any block (upstream's spelling; its
test files call it with ``enabled=True``); off, it costs one environment read.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .. import env

logger = logging.getLogger(__name__)


def diagnostics_enabled(*, verbose: bool = False) -> bool:
    """On when asked for (``verbose``) or when TILELANG_JIT_DIAGNOSTICS is set."""
    return verbose or env.is_jit_diagnostics_enabled()


def _make_visible() -> None:
    """The log where it can be read: a program that configured no logging (no handler on
    the way to the root) gets the phases on stderr, at INFO."""
    if not logger.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)


def _describe(context: dict[str, object]) -> str:
    return "".join(f", {key}={value!r}" for key, value in sorted(context.items()))


@contextmanager
def jit_phase(name: str, *, enabled: bool | None = None, verbose: bool = False,
              **context: object) -> Iterator[None]:
    """Log the start of phase ``name``, then its end (done or failed, with the seconds it
    took); an exception passes through unchanged."""
    if not (diagnostics_enabled(verbose=verbose) if enabled is None else enabled):
        yield
        return
    _make_visible()
    about = _describe(context)
    logger.info("TileLang JIT phase start: %s%s", name, about)
    began = time.perf_counter()
    try:
        yield
    except BaseException as err:
        logger.info("TileLang JIT phase failed: %s after %.3fs (%s: %s)%s", name, time.perf_counter() - began,
                    type(err).__name__, err, about)
        raise
    logger.info("TileLang JIT phase done: %s in %.3fs%s", name, time.perf_counter() - began, about)


__all__ = ["diagnostics_enabled", "jit_phase"]

"""Availability probes: a backend's "can it run here?" check, run in one guarded way."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator


def probe(check: Callable[[], str | None] | None) -> str | None:
    """Run an availability check; a check that raises counts as 'unavailable', with why."""
    if check is None:
        return None
    try:
        return check()
    except Exception as err:  # noqa: BLE001 - reported to the user as the reason
        return f"availability check raised {type(err).__name__}: {err}"


class NeedsTVM(BaseException):
    """Raised inside :func:`without_tvm` when a probe imports TVM.

    A BaseException, so that a probe's own ``except Exception`` (or ``except ImportError``)
    cannot mistake "not checked" for "unavailable"."""

    def __init__(self, module: str) -> None:
        super().__init__(f"importing {module!r} (TVM) was not allowed here")
        self.module = module


_TVM_PACKAGES = ("tvm", "tvm_ffi")


class _RefuseTVM:
    """A meta-path finder that refuses TVM's packages (asked only for modules not yet imported)."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name.split(".", 1)[0] in _TVM_PACKAGES:
            raise NeedsTVM(name)


@contextlib.contextmanager
def without_tvm() -> Iterator[None]:
    """Run probes without importing TVM: `tilelang backends list` answers in a fraction of
    TVM's import time (issue 11), and a probe that needs TVM raises :class:`NeedsTVM`,
    which the caller reports as "not checked". When TVM is imported already it costs
    nothing more, so then every probe runs."""
    if "tvm" in sys.modules:
        yield
        return
    finder = _RefuseTVM()
    sys.meta_path.insert(0, finder)  # type: ignore[arg-type]
    try:
        yield
    finally:
        sys.meta_path.remove(finder)  # type: ignore[arg-type]

"""The one error hierarchy of TileLang.

Every message says what failed, where (backend, stage, kernel), why, and what fixes it.
"""

from __future__ import annotations

import threading

_RECENT = threading.local()


class TileLangError(Exception):
    """Base class of every error TileLang raises on purpose.

    The newest one made in a thread is kept (``take_recent_error``): TVM's FFI hands an
    exception raised inside a callback of a pass (``tvm_ffi.structural_map``) on as a bare
    RuntimeError with its message, and the compile entry point raises the original again
    when that message is the one it carries."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        _RECENT.error = self


def take_recent_error() -> TileLangError | None:
    """The newest TileLangError made in this thread (and forget it)."""
    err = getattr(_RECENT, "error", None)
    _RECENT.error = None
    return err


class ManifestError(TileLangError, ValueError):
    """A BackendModule or ExecutionBackendSpec declaration is invalid."""


class PluginError(TileLangError):
    """A plugin failed to import, validate or register (raised in strict mode)."""


class BackendNotFoundError(TileLangError, LookupError):
    """No installed target backend or execution backend matches a request."""


class BackendUnavailableError(TileLangError):
    """A backend is installed but cannot run here (missing SDK, driver or compiler)."""


class LanguageError(TileLangError, ValueError):
    """A kernel uses the language incorrectly (found while building or checking the IR)."""


class LanguageTypeError(LanguageError, TypeError):
    """A language operation got a value of a type it does not take (upstream raises
    TypeError there: both ``except`` clauses catch it)."""


class LanguageIndexError(LanguageError, IndexError):
    """A language operation got an index outside what it indexes (upstream raises
    IndexError there)."""


class LanguageAssertionError(LanguageError, AssertionError):
    """A kernel breaks a rule that upstream checks with an ``assert`` (a view that changes
    the size of its source, a bitwise reducer of a float type): ``except AssertionError``
    catches it, as it catches upstream's."""


class CompileError(TileLangError):
    """Lowering or code generation failed."""


class ArgumentError(TileLangError, TypeError):
    """A kernel was called with arguments that do not match its signature."""


class LaunchError(TileLangError, RuntimeError):
    """A kernel launch failed after its arguments were accepted."""


class CacheError(TileLangError):
    """The kernel cache could not be read or written."""


class InputSupplyError(TileLangError, ValueError):
    """The profiler or autotuner cannot make a kernel's inputs (a scalar parameter, a
    symbolic size it is not told, a dtype torch lacks): give the inputs yourself."""

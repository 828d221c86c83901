"""TVMScript's internal checks, said in the kernel author's terms.

Parsing a kernel runs TVM's C++ builders, whose failed checks read like
``Check failed: buffer->shape.size() == indices.size() (2 vs. 1)``: true, but about TVM's
internals. Each pattern here turns one such check into what the user wrote wrong and how to
fix it, keeping TVMScript's ``--> file:line`` and the original text below it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

_Explain = Callable[[re.Match[str]], str]


def _axes(n: str) -> str:
    return f"{n} ax{'i' if n == '1' else 'e'}s"


def _indices(n: str) -> str:
    return f"{n} ind{'ex' if n == '1' else 'ices'}"


_PATTERNS: list[tuple[re.Pattern[str], _Explain]] = [
    (re.compile(r"Check failed: buffer->shape\.size\(\) == indices\.size\(\) \((\d+) vs\. (\d+)\) : BufferVar (\w+)"),
     lambda m: f"{m[3]} has {_axes(m[1])} but is written with {_indices(m[2])}; index every axis "
               f"({m[3]}[i0, ..., i{int(m[1]) - 1}]) to store one element"),
    (re.compile(r"Check failed: slice\.size\(\) <= buffer_ty->shape\.size\(\) \((\d+) vs\. (\d+)\)"),
     lambda m: f"a tensor with {_axes(m[2])} is indexed with {_indices(m[1])}; use one index per axis"),
    (re.compile(r"Expected `ir\.Expr` but got `ir\.TensorRegion`"),
     lambda m: "a value is needed here, but the tensor access gives a region: a tensor indexed with "
               "fewer indices than it has axes (or with a slice) names a region; index every axis "
               "(A[i, j]) to read one element"),
]


def explain(err: BaseException) -> str | None:
    """The user-level explanation of a TVMScript failure, with its location and original
    text, or None when no pattern knows it."""
    text = str(err)
    for pattern, describe in _PATTERNS:
        found = pattern.search(text)
        if found is not None:
            location = text[text.index("\n -->"):] if "\n -->" in text else ""
            first = text.splitlines()[0] if text else ""
            return f"{describe(found)}{location}\n(TVMScript: {first.removeprefix('error: ')})"
    return None


def raise_for_user(err: BaseException) -> None:
    """Raise what a kernel author should see for a failed parse of their kernel: the
    TileLang error a TVMScript diagnostic wraps (its type, the diagnostic's text with the
    location), a known TVM check explained (``explain``), or the diagnostic itself as a
    LanguageError (``shown``); return where ``err`` is none of these (the caller re-raises)."""
    from ..errors import LanguageError, TileLangError

    seen = err
    while seen is not None:
        if isinstance(seen, TileLangError):
            raise type(seen)(str(err)) from err
        seen = seen.__cause__ or seen.__context__
    explained = explain(err)
    if explained is not None:
        raise LanguageError(explained) from err
    diagnostic = shown(err)
    if diagnostic is not err:
        raise diagnostic from None  # TVMScript's own text: where and why


def shown(err: BaseException) -> BaseException:
    """A TVMScript diagnostic as an exception whose message reaches the user. ``import tvm``
    replaces ``sys.excepthook`` with one that prints, for an uncaught ``DiagnosticError``,
    only "note: run with `TVM_BACKTRACE=1` ..." (TVM's C++ renderer printed the message
    first; its Python parser does not): a script whose kernel did not parse said nothing of
    why. The result is a LanguageError that is still a ``DiagnosticError`` for code that
    catches that, and prints its message and location like any other error."""
    from tvm.error import DiagnosticError

    from ..errors import LanguageError

    if not isinstance(err, DiagnosticError) or isinstance(err, LanguageError):
        return err
    return language_diagnostic()(str(err))


@functools.cache
def language_diagnostic() -> type:
    """The class of such errors (made on first use: this module imports no TVM itself)."""
    from tvm.error import DiagnosticError

    from ..errors import LanguageError

    return type("LanguageDiagnostic", (LanguageError, DiagnosticError), {
        "__module__": __name__,
        "__doc__": "A kernel that TVMScript could not parse: where (file, line) and why.",
    })


__all__ = ["explain", "language_diagnostic", "raise_for_user", "shown"]

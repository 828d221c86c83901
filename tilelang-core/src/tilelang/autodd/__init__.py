"""``tilelang.autodd``: delta debugging of a failing Python program (upstream TileLang's
tool of that name).

``python -m tilelang.autodd buggy.py --err-msg "shapes do not agree" -o minimized.py``
rewrites the program's syntax tree step by step — statements removed, branches and loops
replaced by their bodies, arguments dropped, operands and constants made smaller — runs each
candidate, and keeps it when its output (stdout or stderr) still contains the message. The
output file holds the smallest program kept so far, so an interrupted run leaves a result.

Code that must stay is frozen: ``# autodd: freeze`` at the end of a one-line statement,
``# autodd: freeze-start`` ... ``# autodd: end-freeze`` around a block, or in the program
itself ``with __freeze__:`` and ``__freeze__(expr)`` (``from tilelang.autodd import
__freeze__``; an identity at run time). A frozen statement, and each statement around it, is
never removed, and nothing inside it is rewritten.

Backends: ``subproc`` runs every candidate in a fresh interpreter; ``runner`` (the default)
keeps worker interpreters that run candidate after candidate, so imports (TileLang, torch)
are paid once, while module state persists between candidates (use ``subproc`` when a failure
depends on it). A candidate that runs past ``--timeout`` counts as not reproducing.
"""

from __future__ import annotations

from typing import Any


class _Freeze:
    """``with __freeze__:`` / ``__freeze__(value)``: marks code AutoDD must keep; at run time
    a context manager that does nothing and the identity."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, value: Any) -> Any:
        return value

    def __repr__(self) -> str:
        return "__freeze__"


__freeze__ = _Freeze()

__all__ = ["__freeze__"]

"""``tilelang.utils.pass_diff``: upstream's older name for the per-pass IR diff, kept for its
callers. ``pass_diff(func, passes, mode=..., context=..., html_path=...)`` is
``tilelang.tools.lower_trace.lower_trace``; the ``TILELANG_PASS_DIFF`` environment variable
(``terminal``, ``html``, ``both``; ``1``/``true``/``yes``/``on``: terminal) traces every
compilation as ``TL_LOWER_TRACE`` does when that one is unset, its reports under
``TILELANG_PASS_DIFF_OUTPUT`` (default ``tmp/pass_diff_output``)."""

from __future__ import annotations

import os
from typing import Any

from ..tools.lower_trace import lower_trace


def pass_diff(func_or_mod: Any, passes: Any, mode: str = "terminal", context: int = 3,
              html_path: str | os.PathLike[str] = "pass_diff_report.html") -> list[dict[str, Any]]:
    """Run ``passes`` on ``func_or_mod`` in order and diff the IR around each (see
    tilelang.tools.lower_trace.lower_trace)."""
    return lower_trace(func_or_mod, passes, mode=mode, context=context, html_path=html_path)


__all__ = ["pass_diff"]

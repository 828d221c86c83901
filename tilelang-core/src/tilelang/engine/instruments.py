"""The compilation's own instruments, asked for by pass configs any backend accepts
(``tilelang.backend.pass_configs.SESSION_CONFIGS``), as upstream's:

- ``tl.enable_dump_ir``: the IR after every pass, one file each, ``NNN_<pass>.py`` in
  ``tl.dump_ir_path`` (default ``./dump_ir``; TVM's ``DumpIR``, which numbers them in order);
- ``tl.pass_profile`` (or ``TILELANG_PASS_PROFILE=1``): after the compilation, each pass's
  time, slowest first, to stderr; ``tl.pass_profile_threshold_ms`` (or
  ``TILELANG_PASS_PROFILE_THRESHOLD_MS``) leaves out faster ones.

A kernel found in the cache is not compiled, so nothing is dumped or timed for it
(``TILELANG_DISABLE_CACHE=1`` compiles every time).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any, TextIO

from .. import env
from ..errors import CompileError

DUMP_IR, DUMP_IR_PATH = "tl.enable_dump_ir", "tl.dump_ir_path"
PROFILE, PROFILE_THRESHOLD = "tl.pass_profile", "tl.pass_profile_threshold_ms"
PROFILE_ENV, PROFILE_THRESHOLD_ENV = "TILELANG_PASS_PROFILE", "TILELANG_PASS_PROFILE_THRESHOLD_MS"


def _threshold_ms(configs: Mapping[str, Any]) -> float:
    raw, where = (configs[PROFILE_THRESHOLD], PROFILE_THRESHOLD) if PROFILE_THRESHOLD in configs else \
        (os.environ.get(PROFILE_THRESHOLD_ENV, "0"), PROFILE_THRESHOLD_ENV)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = -1.0
    if not value >= 0:  # NaN too
        raise CompileError(f"{where} must be a number of milliseconds (0 or more), got {raw!r}")
    return value


def session_instruments(configs: Mapping[str, Any], kernel: str) -> list[Any]:
    """The instruments ``configs`` (and the environment) ask for; [] for none."""
    out: list[Any] = []
    if configs.get(DUMP_IR):
        from tvm.ir.instrument import DumpIR

        out.append(DumpIR(dump_dir=str(configs.get(DUMP_IR_PATH) or "./dump_ir")))
    if configs.get(PROFILE) or env.flag(PROFILE_ENV):
        out.append(pass_profile(kernel, _threshold_ms(configs)))
    return out


def pass_profile(kernel: str, threshold_ms: float, stream: TextIO | None = None) -> Any:
    """A pass instrument that prints each pass's time (its own, nested passes excluded) when
    the compilation's pass context closes."""
    from tvm.ir.instrument import pass_instrument

    @pass_instrument
    class PassProfile:
        def __init__(self) -> None:
            self.stack: list[tuple[str, float, float]] = []  # (pass, start, time of nested passes)
            self.times: dict[str, list[float]] = {}

        def run_before_pass(self, mod: Any, info: Any) -> None:
            self.stack.append((str(info.name), time.perf_counter(), 0.0))

        def run_after_pass(self, mod: Any, info: Any) -> None:
            name, start, nested = self.stack.pop()
            total = time.perf_counter() - start
            if self.stack:  # the enclosing pass's own time leaves this one out
                outer, outer_start, outer_nested = self.stack[-1]
                self.stack[-1] = (outer, outer_start, outer_nested + total)
            self.times.setdefault(name, []).append(total - nested)

        def exit_pass_ctx(self) -> None:
            print(profile_table(kernel, self.times, threshold_ms), file=stream or sys.stderr)

    return PassProfile()


def profile_table(kernel: str, times: Mapping[str, list[float]], threshold_ms: float) -> str:
    rows = sorted(((sum(t) * 1e3, len(t), name) for name, t in times.items()), reverse=True)
    total = sum(ms for ms, _, _ in rows)
    shown = [r for r in rows if r[0] >= threshold_ms]
    lines = [f"tilelang pass profile, kernel {kernel!r}: {len(rows)} passes, {total:.1f} ms"
             + (f" ({len(rows) - len(shown)} under {threshold_ms:g} ms not shown)" if len(shown) < len(rows) else "")]
    lines += [f"  {ms:9.2f} ms  {100 * ms / total if total else 0:5.1f}%  {name}" + (f" (x{n})" if n > 1 else "")
              for ms, n, name in shown]
    return "\n".join(lines)


__all__ = ["pass_profile", "profile_table", "session_instruments"]

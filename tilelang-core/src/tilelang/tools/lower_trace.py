"""``tilelang.tools.lower_trace``: the IR before and after every pass of a compilation, and
the source its code generator made, as diffs in the terminal and/or a self-contained HTML
report (upstream TileLang's IR Lower Trace).

Tracing every compilation:

* ``TL_LOWER_TRACE=terminal|html|both`` (``1``/``on``/``true``/``yes``: html) in the
  environment, or ``lower_trace.enable(mode)`` / ``lower_trace.disable()`` in the program
  (which win over the environment). Each compiled kernel gets a run folder under
  ``TL_LOWER_TRACE_DIR`` (default ``./tmp/lower_trace_dir``), ``<script>/.run_records/
  run_<time>_<pid>_<n>/``: ``<phase>/NN_<pass>_before.tir`` / ``_after.tir`` for every pass
  that changed the IR or not, ``codegen/NN_codegen_before.tir`` / ``_after.<ext>`` (the
  device source), and ``report.html``; ``<script>/report.html`` links to the latest.
  A kernel found in the kernel cache is not compiled, so it is not traced
  (``TILELANG_DISABLE_CACHE=1``).
* The phase of a pass is the outermost pass (a pipeline stage) running it; the ones run
  outside every stage are ``unscoped``.

In memory: ``with lower_trace.collect() as traces:`` traces the compilations inside it
without files or output (``traces``: one ``KernelTrace`` each, its ``steps``).

One chain of passes on one module: ``lower_trace(func_or_mod, passes, mode="terminal")``
returns one dict per pass (``name``, ``before_script``, ``after_script``, ``diff_lines``,
``insertions``, ``deletions``, ``changed``).

Upstream's older spelling, ``TILELANG_PASS_DIFF`` and ``tilelang.utils.pass_diff``, is the
same trace (see that module). Upstream's edit-and-recompile of the generated source is not
provided here.
"""

from __future__ import annotations

import contextlib
import difflib
import html
import itertools
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

ENV, DIR_ENV = "TL_LOWER_TRACE", "TL_LOWER_TRACE_DIR"
MODES = ("terminal", "html", "both")
COLLECT = "collect"  # steps kept in memory only (the pass visualizer's mode; not an environment value)
DEFAULT_DIR = "./tmp/lower_trace_dir"
_ON, _OFF = ("1", "on", "true", "yes"), ("", "0", "off", "false", "no")

_override: list[str | None] = []  # enable()/disable(): [mode or None]; empty: the environment decides
_runs = itertools.count()


def _mode(value: str, where: str) -> str | None:
    text = value.strip().lower()
    if text in _OFF:
        return None
    if text in _ON:
        return "html"
    if text in MODES:
        return text
    raise ValueError(f"{where}={value!r}: expected one of {', '.join(MODES)}, or 1/on/true/yes (html), "
                     "0/off/false/no")


def enable(mode: str = "html") -> None:
    """Trace every compilation from now on (``mode``: terminal, html or both)."""
    _override[:] = [_mode(mode, "lower_trace.enable(mode")]


def disable() -> None:
    """Trace no compilation from now on, whatever ``TL_LOWER_TRACE`` says."""
    _override[:] = [None]


#: upstream's older variables (tilelang.utils.pass_diff), read when TL_LOWER_TRACE is unset
LEGACY_ENV, LEGACY_DIR_ENV, LEGACY_DIR = "TILELANG_PASS_DIFF", "TILELANG_PASS_DIFF_OUTPUT", "tmp/pass_diff_output"


def active_mode() -> str | None:
    """The mode compilations are traced in now, or None."""
    if _collectors:
        return COLLECT
    if _override:
        return _override[0]
    if ENV not in os.environ and os.environ.get(LEGACY_ENV, "").strip():
        legacy = os.environ[LEGACY_ENV].strip().lower()
        # as upstream's: on-like values and anything unrecognized mean terminal
        return None if legacy in _OFF else legacy if legacy in MODES else "terminal"
    return _mode(os.environ.get(ENV, ""), ENV)


def _base_dir() -> str:
    if ENV not in os.environ and os.environ.get(LEGACY_ENV, "").strip():
        return os.environ.get(LEGACY_DIR_ENV) or LEGACY_DIR
    return os.environ.get(DIR_ENV) or DEFAULT_DIR


@dataclass
class Step:
    """One pass (or the code generator) as traced."""

    index: int
    name: str
    phase: str
    before: str
    after: str
    context: int = 3

    @property
    def diff_lines(self) -> list[str]:
        return list(difflib.unified_diff(self.before.splitlines(), self.after.splitlines(), "before", "after",
                                         n=self.context, lineterm=""))

    def as_dict(self) -> dict[str, Any]:
        lines = self.diff_lines
        added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
        removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
        return {"name": self.name, "phase": self.phase, "before_script": self.before, "after_script": self.after,
                "diff_lines": lines, "insertions": added, "deletions": removed, "changed": self.before != self.after}


def _script(mod: Any) -> str:
    try:
        return mod.script()
    except Exception as exc:  # noqa: BLE001 - a module TVMScript cannot print is still a step
        return f"# (TVMScript could not print this module: {type(exc).__name__}: {exc})\n{mod}"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "pass"


class KernelTrace:
    """One compilation's trace: a TVM pass instrument plus the code generator's step."""

    def __init__(self, kernel: str, mode: str, base: str | os.PathLike[str] | None = None,
                 stream: TextIO | None = None) -> None:
        self.kernel, self.mode, self.stream = kernel, mode, stream
        script = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] not in ("", "-c") else "interactive"
        self.root = Path(base or _base_dir()) / _slug(script)
        stamp = time.strftime("%Y%m%d_%H%M%S")
        self.run_dir = self.root / ".run_records" / f"run_{stamp}_{os.getpid()}_{next(_runs)}_{_slug(kernel)}"
        self.steps: list[Step] = []
        self._stack: list[list[Any]] = []  # [name, IR before, nested passes seen]
        self.instrument = self._instrument()

    def _instrument(self) -> Any:
        from tvm.ir.instrument import pass_instrument

        trace = self

        @pass_instrument
        class LowerTrace:
            def run_before_pass(self, mod: Any, info: Any) -> None:
                trace._stack.append([str(info.name), _script(mod), 0])

            def run_after_pass(self, mod: Any, info: Any) -> None:
                name, before, nested = trace._stack.pop()
                if trace._stack:
                    trace._stack[-1][2] += 1
                if nested:  # a stage: its passes were traced one by one
                    return
                phase = trace._stack[0][0] if trace._stack else "unscoped"
                trace.add(name, phase, before, _script(mod))

        return LowerTrace()

    def add(self, name: str, phase: str, before: str, after: str, after_ext: str = "tir") -> Step:
        step = Step(len(self.steps), name, phase, before, after)
        self.steps.append(step)
        if self.mode == COLLECT:
            return step
        folder = self.run_dir / _slug(phase)
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{step.index:02d}_{_slug(name)}"
        (folder / f"{stem}_before.tir").write_text(before)
        (folder / f"{stem}_after.{after_ext}").write_text(after)
        if self.mode in ("terminal", "both"):
            _print_step(step, self.stream or sys.stderr)
        return step

    def codegen(self, device_ir: Any, source: str, ext: str = "txt") -> None:
        """The code generator's step: the device IR it was given and the source it made."""
        if device_ir is not None and source:
            self.add("codegen", "codegen", _script(device_ir), source, ext)

    def close(self, error: BaseException | None = None) -> Path | None:
        """Write the report (also after a failed compilation); its path, or None (terminal)."""
        if self.mode in ("terminal", COLLECT):
            return None
        self.run_dir.mkdir(parents=True, exist_ok=True)
        report = self.run_dir / "report.html"
        report.write_text(render_html(f"kernel {self.kernel!r}", self.steps, error))
        latest = self.root / "report.html"
        try:
            if latest.is_symlink() or latest.exists():
                latest.unlink()
            latest.symlink_to(report.relative_to(self.root))
        except OSError:  # no symlinks here: a copy
            latest.write_text(report.read_text())
        print(f"tilelang lower trace: kernel {self.kernel!r}, {len(self.steps)} steps, "
              f"{sum(1 for s in self.steps if s.before != s.after)} changed: {report}", file=self.stream or sys.stderr)
        return report


_collectors: list[list[KernelTrace]] = []  # collect(): the lists open now, innermost last


@contextlib.contextmanager
def collect() -> Iterator[list[KernelTrace]]:
    """Inside, every compilation is traced in memory only (no files, no report, nothing
    printed), its trace appended to the list this yields (the pass visualizer's use)."""
    traces: list[KernelTrace] = []
    _collectors.append(traces)
    try:
        yield traces
    finally:
        _collectors.remove(traces)


def kernel_trace(kernel: str) -> KernelTrace | None:
    """A trace of ``kernel``'s compilation when tracing is on, else None."""
    mode = active_mode()
    if not mode:
        return None
    trace = KernelTrace(kernel, mode)
    if mode == COLLECT:
        _collectors[-1].append(trace)
    return trace


def lower_trace(func_or_mod: Any, passes: Any, mode: str = "terminal", context: int = 3,
                html_path: str | os.PathLike[str] = "lower_trace_report.html",
                stream: TextIO | None = None) -> list[dict[str, Any]]:
    """Run ``passes`` (one pass, a list of them, or of ``(name, pass)``) on ``func_or_mod``
    (a PrimFunc or an IRModule) in order, and diff the IR before and after each."""
    import tvm
    from tvm import tirx

    if mode not in MODES:
        raise ValueError(f"lower_trace: mode must be one of {', '.join(MODES)}, got {mode!r}")
    mod = tvm.IRModule({"main": func_or_mod}) if isinstance(func_or_mod, tirx.PrimFunc) else func_or_mod
    chain = passes if isinstance(passes, (list, tuple)) else [passes]
    steps = []
    for index, item in enumerate(chain):
        name, apply = item if isinstance(item, tuple) else (str(getattr(getattr(item, "info", None), "name", "")) or
                                                           f"pass{index}", item)
        before = _script(mod)
        mod = apply(mod)
        step = Step(index, name, "lower_trace", before, _script(mod), context)
        steps.append(step)
        if mode in ("terminal", "both"):
            _print_step(step, stream or sys.stdout)
    if mode in ("html", "both"):
        Path(html_path).write_text(render_html("lower_trace", steps, None))
    return [s.as_dict() for s in steps]


def _print_step(step: Step, stream: TextIO) -> None:
    info = step.as_dict()
    colour = getattr(stream, "isatty", lambda: False)()
    head = f"[{step.index:02d}] {step.phase} / {step.name}: "
    if not info["changed"]:
        print(head + "no change", file=stream)
        return
    print(head + f"+{info['insertions']} -{info['deletions']}", file=stream)
    for line in info["diff_lines"][2:]:
        if colour and line.startswith(("+", "-", "@@")):
            code = {"+": "32", "-": "31", "@": "36"}[line[0]]
            line = f"\x1b[{code}m{line}\x1b[0m"
        print(line, file=stream)


_STYLE = """body{font-family:sans-serif;margin:0;display:flex;height:100vh}
nav{width:24em;overflow:auto;border-right:1px solid #ccc;padding:.5em}
nav a{display:block;padding:2px 4px;text-decoration:none;color:#222;font-size:13px}
nav a.same{color:#999} nav a.sel{background:#dde8ff} nav .phase{font-weight:bold;margin-top:.6em}
main{flex:1;overflow:auto;padding:.5em 1em} pre{font-size:12px;line-height:1.35}
.add{background:#e6ffed} .del{background:#ffeef0} .hunk{color:#0366d6} .err{color:#b00}
section{display:none} section.sel{display:block}"""

_SCRIPT = """const items=[...document.querySelectorAll('nav a')];let cur=0;
function show(i){if(i<0||i>=items.length)return;items[cur].classList.remove('sel');
document.getElementById(items[cur].dataset.s).classList.remove('sel');cur=i;items[i].classList.add('sel');
document.getElementById(items[i].dataset.s).classList.add('sel');items[i].scrollIntoView({block:'nearest'});}
items.forEach((a,i)=>a.onclick=e=>{e.preventDefault();show(i);});
document.onkeydown=e=>{if(e.key==='j'||e.key==='ArrowDown')show(cur+1);if(e.key==='k'||e.key==='ArrowUp')show(cur-1);};
if(items.length)show(items.findIndex(a=>!a.classList.contains('same'))>=0?items.findIndex(a=>!a.classList.contains('same')):0);"""


def render_html(title: str, steps: Sequence[Step], error: BaseException | None) -> str:
    """One self-contained page: the passes by phase on the left (greyed when they changed
    nothing), the selected pass's diff (or its IR) on the right; j/k or the arrows step."""
    nav, sections, phase = [], [], None
    for step in steps:
        info = step.as_dict()
        if step.phase != phase:
            phase = step.phase
            nav.append(f'<div class="phase">{html.escape(phase)}</div>')
        label = f"{step.index:02d} {step.name}" + (f" (+{info['insertions']} -{info['deletions']})"
                                                    if info["changed"] else "")
        css = "" if info["changed"] else ' class="same"'
        nav.append(f'<a href="#" data-s="s{step.index}"{css}>{html.escape(label)}</a>')
        if info["changed"]:
            body = "\n".join(_html_line(ln) for ln in info["diff_lines"])
        else:
            body = html.escape(step.after)
        sections.append(f'<section id="s{step.index}"><h3>{html.escape(step.phase)} / {html.escape(step.name)}'
                        f'</h3><pre>{body}</pre></section>')
    failure = f'<p class="err">the compilation failed: {html.escape(f"{type(error).__name__}: {error}")}</p>' \
        if error is not None else ""
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)} - lower trace</title>"
            f"<style>{_STYLE}</style></head><body><nav><b>{html.escape(title)}</b><br>{len(steps)} steps"
            f"{''.join(nav)}</nav><main>{failure}{''.join(sections)}</main><script>{_SCRIPT}</script></body></html>\n")


def _html_line(line: str) -> str:
    text = html.escape(line)
    if line.startswith("@@"):
        return f'<span class="hunk">{text}</span>'
    if line.startswith("+") and not line.startswith("+++"):
        return f'<span class="add">{text}</span>'
    if line.startswith("-") and not line.startswith("---"):
        return f'<span class="del">{text}</span>'
    return text


__all__ = ["KernelTrace", "active_mode", "collect", "disable", "enable", "kernel_trace", "lower_trace", "render_html"]

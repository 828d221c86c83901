"""Compile the ``@tilelang.jit`` kernel of a Python file and show every pass of its lowering:

    python -m tilelang.tools.pass_visualizer.viewer kernel.py [--factory NAME] [--target auto]
        [--set M=1024 --set block_M=128 ...] [--out kernel_passes.html]

writes ``kernel_passes.html`` (the passes by phase on the left, greyed when they changed
nothing; the selected pass's diff on the right; j/k or the arrow keys step through them)
and ``kernel_passes.txt`` beside it (each pass's IR after it ran, for grep). The page is
``tilelang.tools.lower_trace``'s report; the kernel compiles with the kernel cache off, so
every pass runs. From Python: ``name, stages = build_pass_data(path, factory, target,
kwargs)``, then ``emit_html(name, stages)`` / ``emit_txt(name, stages)``.

A stage is a dict, as upstream's are: ``name`` (``"source code"``, ``"(input)"``, then
``"[NN] <pass>"``; the code generator last), ``flag`` (``source``, ``input``, ``changed``,
``no-op``) and ``rows`` (its text, line by line), with ``phase``, ``before``, ``after``,
``added`` and ``removed``. Upstream draws each pass's statement tree and follows CUDA's
pipeline only; here it is the IR text of whichever backend compiles the kernel.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import ArgumentError
from .. import lower_trace


def _load(path: Path, source: str | None) -> Any:
    spec = importlib.util.spec_from_loader(f"_tl_pass_visualizer_{path.stem}", loader=None, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    sys.path.insert(0, str(path.parent))
    try:
        exec(compile(source if source is not None else path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102
    finally:
        sys.path.remove(str(path.parent))
    return module


def _factory(module: Any, path: Path, name: str | None) -> tuple[str, Any]:
    from ...jit import JITFunction

    kernels = {k: v for k, v in vars(module).items() if isinstance(v, JITFunction)}
    if name is not None:
        if name not in kernels:
            raise ArgumentError(f"pass_visualizer: {path} has no @tilelang.jit kernel named {name!r}; it has: "
                                f"{', '.join(kernels) or 'none'}")
        return name, kernels[name]
    if not kernels:
        raise ArgumentError(f"pass_visualizer: {path} defines no @tilelang.jit kernel at module level")
    return next(iter(kernels.items()))


def build_pass_data(path: str | Path, factory: str | None = None, target: Any = "auto",
                    kwargs: dict[str, Any] | None = None, source: str | None = None) -> tuple[str, list[Any]]:
    """(kernel name, stages) for the ``@tilelang.jit`` kernel ``factory`` (the first one when
    None) of the file at ``path`` (``source``: its text, when given), compiled with ``kwargs``
    for ``target`` (``"auto"``: the decorator's target); the stages are described above."""
    from ... import env

    path = Path(path)
    text = source if source is not None else path.read_text()
    name, jit = _factory(_load(path, text), path, factory)
    if target not in (None, "auto"):  # over the decorator's own target
        jit.options = {**jit.options, "target": target}
    with env.overridden(TILELANG_DISABLE_CACHE="1"), lower_trace.collect() as traces:
        jit.compile(**(kwargs or {}))
    steps = [step for trace in traces for step in trace.steps]
    stages = [_stage("source code", "source", "source", text, text)]
    if steps:
        stages.append(_stage("(input)", "input", steps[0].phase, steps[0].before, steps[0].before))
    for number, step in enumerate(steps, 1):
        stages.append(_stage(f"[{number:02d}] {step.name}", "changed" if step.before != step.after else "no-op",
                             step.phase, step.before, step.after))
    return name, stages


def _stage(name: str, flag: str, phase: str, before: str, after: str) -> dict[str, Any]:
    info = lower_trace.Step(0, name, phase, before, after).as_dict()
    return {"name": name, "flag": flag, "rows": after.splitlines(), "phase": phase, "before": before,
            "after": after, "added": info["insertions"], "removed": info["deletions"]}


def emit_html(name: str, stages: Sequence[dict[str, Any]]) -> str:
    """The self-contained page of ``build_pass_data``'s stages (lower_trace's report: the
    source and the input shown as they are, each pass as its diff)."""
    steps = [lower_trace.Step(i, st["name"], st["phase"], st["before"], st["after"]) for i, st in enumerate(stages)]
    return lower_trace.render_html(f"kernel {name!r}", steps, None)


def emit_txt(name: str, stages: Sequence[dict[str, Any]]) -> str:
    """Each stage's header (phase, name, lines added and removed) and its text."""
    passes = sum(1 for st in stages if st["flag"] in ("changed", "no-op"))
    out = [f"# kernel: {name} ({passes} passes)"]
    for st in stages:
        change = {"changed": f" (+{st['added']} -{st['removed']})", "no-op": " (no change)"}.get(st["flag"], "")
        out += ["", f"==== {st['name']} [{st['phase']}]{change}", *st["rows"]]
    return "\n".join(out) + "\n"


def _value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a dtype name and the like


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilelang.tools.pass_visualizer.viewer",
                                     description="every pass of a @tilelang.jit kernel's lowering, as HTML")
    parser.add_argument("path", help="Python file with a @tilelang.jit kernel")
    parser.add_argument("--factory", help="the kernel to compile (default: the first in the file)")
    parser.add_argument("--target", default="auto", help="compilation target (default: auto)")
    parser.add_argument("--set", action="append", default=[], metavar="K=V",
                        help="an argument of the kernel factory (repeatable; V is a Python literal or a string)")
    parser.add_argument("--out", help="the HTML file (default: <kernel>_passes.html next to the source)")
    args = parser.parse_args(argv)
    kwargs = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--set {item!r}: write K=V")
        kwargs[key] = _value(value)
    path = Path(args.path)
    name, stages = build_pass_data(path, args.factory, args.target, kwargs)
    out = Path(args.out) if args.out else path.with_name(f"{name}_passes.html")
    out.write_text(emit_html(name, stages))
    out.with_suffix(".txt").write_text(emit_txt(name, stages))
    passes = [st for st in stages if st["flag"] in ("changed", "no-op")]
    changed = sum(1 for st in passes if st["flag"] == "changed")
    print(f"kernel {name!r}: {len(passes)} passes, {changed} changed the IR -> {out} (and {out.with_suffix('.txt')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m tilelang.autodd source --err-msg MSG -o OUTPUT [--backend runner|subproc]
[--timeout SEC] [-j N]``: see tilelang.autodd."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .reduce import Reduction, prepare, reduce, size
from .run import BACKENDS, Runner, check_source


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tilelang.autodd",
        description="Delta debugging: shrink a Python program (a TileLang kernel's script) while its output "
                    "still contains a chosen message, and write the smallest such program.")
    parser.add_argument("source", type=Path, help="the Python file to reduce")
    parser.add_argument("--err-msg", required=True,
                        help="text (case-sensitive) that stdout or stderr must contain for a candidate to be kept")
    parser.add_argument("-o", "--output", required=True, type=Path,
                        help="where the smallest reproducing program is written (updated as the reduction goes)")
    parser.add_argument("--backend", choices=BACKENDS, default="runner",
                        help="runner: reused worker interpreters (imports paid once); subproc: a fresh "
                             "interpreter per candidate (default: runner)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a candidate may run (default: 60)")
    parser.add_argument("-j", "--jobs", type=int, default=1, help="candidates run at once (default: 1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        source = prepare(args.source.read_text())
    except (OSError, SyntaxError, ValueError) as exc:
        print(f"autodd: cannot read {args.source}: {exc}", file=sys.stderr)
        return 2
    start = time.monotonic()
    with Runner(args.err_msg, args.backend, args.timeout, args.jobs) as runner:
        ok, text = check_source(runner, source)
        if not ok:
            tail = "\n".join(text.strip().splitlines()[-5:])
            print(f"autodd: {args.source} does not print {args.err_msg!r}, so there is nothing to keep it "
                  f"reproducing; its output ended with:\n{tail}", file=sys.stderr)
            return 1
        args.output.write_text(source)
        lines0 = len(source.splitlines())

        def kept(state: Reduction, phase: str) -> None:
            args.output.write_text(state.source)
            print(f"autodd: {len(state.source.splitlines())} lines (from {lines0}) after {state.tried} candidates "
                  f"[{phase}]", file=sys.stderr, flush=True)

        state = reduce(source, runner.reproduces, args.jobs, kept)
    nodes0, nodes = size(source)[0], size(state.source)[0]
    print(f"autodd: wrote {args.output}: {len(state.source.splitlines())} lines from {lines0} ({nodes} syntax nodes "
          f"from {nodes0}); {state.tried} candidates run, {state.kept} kept, {time.monotonic() - start:.1f} s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

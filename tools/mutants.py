"""Mutation testing with cosmic-ray over a copy of the source tree (``nox -s mutants``).

For each group of the plan (code to mutate -> the tests that cover it), one cosmic-ray
session: ``cosmic-ray init``, then the scope filter (only the named functions of a file,
when the plan names some), the operator filter and a fixed-seed sample, a baseline run
that must pass, ``cosmic-ray exec``; then the kill rate per group and overall, printed
and written as ``report.json`` and ``report.md`` with every survivor's diff.

cosmic-ray writes each mutant into the file on disk, so mutants are made in a copy of the
tree (``--tree``), never in the checkout, and the tests import the copy through
PYTHONPATH, ahead of the editable installs (``tilelang`` extends its ``__path__`` in
sys.path order). A killed run leaves its last mutant in the copy only; the next run makes
a fresh copy.

    python tools/mutants.py --plan plan.json --tree DIR --out DIR [--sample N] [--seed S] [GROUP ...]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: operators left out: VariableReplacer/Inserter put random names and numbers in (a new
#: sample each init, so no fixed-seed run could be repeated). Mutants inside annotations
#: are left out too (annotation_spans).
EXCLUDED_OPERATORS = ("core/VariableReplacer", "core/VariableInserter")


def copy_tree(dest: Path) -> None:
    """Every file git knows of (tracked, and untracked but not ignored) copied to ``dest``."""
    shutil.rmtree(dest, ignore_errors=True)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def scope_lines(path: Path, names: list[str]) -> list[tuple[int, int]]:
    """Line ranges of the named top-level functions and classes (``Class.method`` names a
    method) in ``path``; a name not found is an error, so a renamed function cannot quietly
    empty a group."""
    tree = ast.parse(path.read_text())
    found: dict[str, tuple[int, int]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = (node.lineno, node.end_lineno or node.lineno)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        found[f"{node.name}.{item.name}"] = (item.lineno, item.end_lineno or item.lineno)
    missing = [n for n in names if n not in found]
    if missing:
        sys.exit(f"mutants: {path}: no function or class {missing} (the plan in noxfile.py names them)")
    return [found[n] for n in names]


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) of every annotation in a module with ``from __future__ import
    annotations``: never evaluated there, so a mutant inside one cannot change behaviour."""
    module = ast.parse(path.read_text())
    lazy = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and
               any(a.name == "annotations" for a in n.names) for n in module.body)
    if not lazy:
        return []
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.arg):
            found.append(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return [((a.lineno, a.col_offset), (a.end_lineno or a.lineno, a.end_col_offset or 0)) for a in found if a]


def parse_code(spec: str, tree: Path) -> tuple[Path, list[tuple[int, int]] | None]:
    """``path`` (the whole file) or ``path::name,name`` (those definitions only)."""
    path, _, names = spec.partition("::")
    file = tree / path
    if not file.is_file():
        sys.exit(f"mutants: {path} does not exist (the plan in noxfile.py names it)")
    return file, scope_lines(file, names.split(",")) if names else None


def pytest_args(tests: list[str], tree: Path) -> list[str]:
    """The plan's test arguments, relative to the tree (cosmic-ray runs them there), with
    globs expanded: a test file another change adds to a glob's folder joins the run."""
    args: list[str] = []
    for arg in tests:
        if "*" in arg and not arg.startswith("-"):
            found = sorted(str(p.relative_to(tree)) for p in tree.glob(arg))
            if not found:
                sys.exit(f"mutants: no test file matches {arg!r} (the plan in noxfile.py names it)")
            args += found
        else:
            args.append(arg)
    return args


def cosmic_ray(*args: str, cwd: Path, env: dict[str, str]) -> None:
    exe = Path(sys.executable).with_name("cosmic-ray")
    subprocess.run([str(exe), *args], cwd=cwd, env=env, check=True)


def write_config(path: Path, modules: list[Path], command: str, timeout: float) -> None:
    quoted = ", ".join(json.dumps(str(m)) for m in modules)
    path.write_text(
        "[cosmic-ray]\n"
        f"module-path = [{quoted}]\n"
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )


def select(db_path: Path, scopes: dict[Path, list[tuple[int, int]] | None], sample: int, seed: int) -> tuple[int, int]:
    """Skip what the plan leaves out and sample the rest; returns (in scope, kept)."""
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(db_path)) as db:
        items = sorted(db.pending_work_items, key=lambda w: [(str(m.module_path), m.start_pos, m.operator_name,
                                                               m.occurrence) for m in w.mutations])

        annotations = {path: annotation_spans(path) for path in scopes}

        def in_scope(item: object) -> bool:
            for m in item.mutations:  # type: ignore[attr-defined]
                if m.operator_name in EXCLUDED_OPERATORS:
                    return False
                if any(lo <= tuple(m.start_pos) < hi for lo, hi in annotations[Path(m.module_path).resolve()]):
                    return False
                ranges = scopes[Path(m.module_path).resolve()]
                if ranges is not None and not any(lo <= m.start_pos[0] <= hi for lo, hi in ranges):
                    return False
            return True

        scoped = [w for w in items if in_scope(w)]
        kept = scoped if sample <= 0 or len(scoped) <= sample else random.Random(seed).sample(scoped, sample)
        keep = {w.job_id for w in kept}
        skipped = [w.job_id for w in items if w.job_id not in keep]
        if skipped:
            db.set_multiple_results(skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
    return len(scoped), len(kept)


def outcomes(db_path: Path, tree: Path) -> dict[str, object]:
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    counts = {"killed": 0, "survived": 0, "incompetent": 0}
    survivors = []
    with use_db(str(db_path)) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.worker_outcome != WorkerOutcome.NORMAL or result.test_outcome == TestOutcome.INCOMPETENT:
                counts["incompetent"] += 1
            elif result.test_outcome == TestOutcome.KILLED:
                counts["killed"] += 1
            else:
                counts["survived"] += 1
                m = item.mutations[0]
                survivors.append({"file": str(Path(m.module_path).relative_to(tree)), "line": m.start_pos[0],
                                  "operator": m.operator_name, "diff": result.diff})
    survivors.sort(key=lambda s: (s["file"], s["line"], s["operator"]))
    return {**counts, "survivors": survivors}


def kill_rate(killed: int, survived: int) -> float | None:
    return None if killed + survived == 0 else killed / (killed + survived)


def percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{100 * rate:.1f}%"


def run_group(name: str, group: dict[str, list[str]], tree: Path, work: Path, env: dict[str, str],
              args: argparse.Namespace) -> dict[str, object]:
    start = time.monotonic()
    scopes = dict(parse_code(spec, tree) for spec in group["code"])
    scopes = {path.resolve(): ranges for path, ranges in scopes.items()}
    tests = [shlex.quote(arg) for arg in pytest_args(group["tests"], tree)]
    command = f"{shlex.quote(args.python)} -m pytest -x -q -p no:cacheprovider {' '.join(tests)}"
    # the unmutated code must pass its tests, and sets the time a mutant may take
    began = time.monotonic()
    baseline = subprocess.run(shlex.split(command), check=False, cwd=tree, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - began
    if baseline.returncode != 0:  # reported, and the other groups still run
        print(f"mutants: group {name!r}: the tests fail without any mutant:\n{baseline.stdout[-3000:]}", flush=True)
        return {"code": group["code"], "tests": group["tests"], "baseline_failed": True, "mutants_in_scope": 0,
                "mutants_run": 0, "baseline_s": round(seconds, 1), "seconds": round(time.monotonic() - start),
                "killed": 0, "survived": 0, "incompetent": 0, "survivors": [], "kill_rate": None}
    config, db = work / f"{name}.toml", work / f"{name}.sqlite"
    db.unlink(missing_ok=True)
    write_config(config, list(scopes), command, timeout=max(30.0, 3 * seconds))
    cosmic_ray("init", str(config), str(db), cwd=tree, env=env)
    in_scope, kept = select(db, scopes, args.sample, args.seed)
    print(f"mutants: {name}: {kept} of {in_scope} mutants (baseline {seconds:.1f} s)", flush=True)
    cosmic_ray("exec", str(config), str(db), cwd=tree, env=env)
    result = outcomes(db, tree)
    return {"code": group["code"], "tests": group["tests"], "mutants_in_scope": in_scope, "mutants_run": kept,
            "baseline_s": round(seconds, 1), "seconds": round(time.monotonic() - start), **result,
            "kill_rate": kill_rate(result["killed"], result["survived"])}  # type: ignore[arg-type]


def write_reports(out: Path, report: dict[str, object]) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2))
    lines = ["# Mutation testing (cosmic-ray)", "",
             f"sample per group: {report['sample'] or 'all'}, seed {report['seed']}, {report['seconds']} s", "",
             "| group | run / in scope | killed | survived | incompetent | kill rate | seconds |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    groups: dict[str, dict] = report["groups"]  # type: ignore[assignment]
    for name, g in groups.items():
        lines.append(f"| {name} | {g['mutants_run']} / {g['mutants_in_scope']} | {g['killed']} | {g['survived']} "
                     f"| {g['incompetent']} | {percent(g['kill_rate'])} | {g['seconds']} |")
    lines += ["", f"overall kill rate: {percent(report['kill_rate'])}", ""]  # type: ignore[arg-type]
    for name, g in groups.items():
        for s in g["survivors"]:
            lines += [f"## survivor in {name}: {s['file']}:{s['line']} ({s['operator']})", "", "```diff",
                      s["diff"].rstrip(), "```", ""]
    (out / "report.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, required=True, help="JSON: {group: {code: [...], tests: [...]}}")
    parser.add_argument("--tree", type=Path, required=True, help="where the copy of the source tree goes")
    parser.add_argument("--out", type=Path, required=True, help="where the sessions and reports go")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the tests")
    parser.add_argument("--sample", type=int, default=0, help="mutants per group at most (0: all)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("groups", nargs="*", help="groups to run (default: all)")
    args = parser.parse_args()
    plan = json.loads(args.plan.read_text())
    unknown = [g for g in args.groups if g not in plan]
    if unknown:
        sys.exit(f"mutants: no group {unknown}; the groups are {sorted(plan)}")
    tree, out = args.tree.resolve(), args.out.resolve()
    copy_tree(tree)
    out.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p.parent) for p in tree.glob("tilelang-*/src/tilelang"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sources, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    start = time.monotonic()
    groups = {name: run_group(name, plan[name], tree, out, env, args) for name in (args.groups or plan)}
    killed = sum(g["killed"] for g in groups.values())  # type: ignore[misc]
    survived = sum(g["survived"] for g in groups.values())  # type: ignore[misc]
    report = {"tool": "cosmic-ray", "sample": args.sample, "seed": args.seed, "groups": groups,
              "seconds": round(time.monotonic() - start), "kill_rate": kill_rate(killed, survived)}
    write_reports(out, report)
    print(f"\n{'group':<12} {'run':>5} {'killed':>7} {'survived':>9} {'incompetent':>12} {'kill rate':>10}")
    for name, g in groups.items():
        print(f"{name:<12} {g['mutants_run']:>5} {g['killed']:>7} {g['survived']:>9} {g['incompetent']:>12} "
              f"{percent(g['kill_rate']):>10}")
    print(f"{'overall':<12} {'':>5} {killed:>7} {survived:>9} {'':>12} {percent(report['kill_rate']):>10}")
    print(f"mutants: {report['seconds']} s; reports: {out / 'report.md'}, {out / 'report.json'}")
    failed = [name for name, g in groups.items() if g.get("baseline_failed")]
    if failed:
        sys.exit(f"mutants: the tests of {failed} fail without any mutant: no kill rate for them")


if __name__ == "__main__":
    main()

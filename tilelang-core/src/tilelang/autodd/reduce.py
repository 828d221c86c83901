"""The reduction: candidate programs from syntax-tree rewrites, kept while they reproduce.

A candidate is one rewrite of the current program, addressed by its path in the tree:

1. statements removed: from each statement list, chunks of halving size down to single
   statements (delta debugging's ddmin, a list at a time, outer lists first);
2. compound statements replaced by a body: ``if`` by its branches, loops and ``try`` by their
   body, ``with`` by its body (``with e as x`` by ``x = e`` and its body);
3. smaller expressions: a call without one of its arguments, an operation replaced by an
   operand, a conditional expression by a branch, a function parameter dropped (the function
   then takes ``*args, **kwargs``), an integer constant made 0, 1 or half.

Candidates are tried in that order; the first that reproduces becomes the current program
and the candidates are made again from it. A candidate must be smaller (fewer tree nodes,
else shorter source, else smaller constants); sources already tried are not run again.
"""

from __future__ import annotations

import ast
import copy
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

FREEZE = "__freeze__"
_FREEZE_IMPORT = "from tilelang.autodd import __freeze__"
_STMT_LISTS = ("body", "orelse", "finalbody")

Path = tuple[tuple[str, int | None], ...]


# -- freeze annotations -----------------------------------------------------------------------
def prepare(source: str) -> str:
    """``source`` with its freeze comments turned into ``with __freeze__:`` blocks (comments do
    not survive the rewrites), and the import of ``__freeze__`` where the program uses it."""
    lines = source.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = line[:len(line) - len(line.lstrip())]
        if re.search(r"#\s*autodd:\s*freeze-start\b", line):
            end = next((j for j in range(i + 1, len(lines)) if re.search(r"#\s*autodd:\s*end-freeze\b", lines[j])),
                       None)
            if end is None:
                raise ValueError(f"line {i + 1}: '# autodd: freeze-start' without a matching '# autodd: end-freeze'")
            block = lines[i + 1:end]
            first = next((ln for ln in block if ln.strip() and not ln.strip().startswith("#")), None)
            if first is not None:
                inner = first[:len(first) - len(first.lstrip())]
                out.append(f"{inner}with {FREEZE}:")
                out.extend(f"    {ln}" if ln.strip() else ln for ln in block)
            i = end + 1
            continue
        if re.search(r"#\s*autodd:\s*freeze\s*$", line):
            code = line[:line.index("#")].rstrip()
            out.append(f"{indent}with {FREEZE}:")
            out.append(f"{indent}    {code.strip()}")
            i += 1
            continue
        out.append(line)
        i += 1
    text = "\n".join(out) + "\n"
    if FREEZE in text and _FREEZE_IMPORT not in text:
        tree = ast.parse(text)
        position = _after_future_imports(tree)
        text_lines = text.splitlines()
        text_lines.insert(position, _FREEZE_IMPORT)
        text = "\n".join(text_lines) + "\n"
    ast.parse(text)  # still a program
    return text


def _after_future_imports(tree: ast.Module) -> int:
    """The line (0-based) after the docstring and ``from __future__`` imports."""
    line = 0
    for index, stmt in enumerate(tree.body):
        is_doc = index == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and \
            isinstance(stmt.value.value, str)
        if is_doc or (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
            line = stmt.end_lineno or line
            continue
        break
    return line


def _is_freeze(node: ast.AST) -> bool:
    if isinstance(node, ast.With):
        return any(isinstance(item.context_expr, ast.Name) and item.context_expr.id == FREEZE for item in node.items)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == FREEZE


def _holds_freeze(node: ast.AST) -> bool:
    return any(_is_freeze(n) for n in ast.walk(node))


def _is_future(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and (stmt.module == "__future__" or
                                                 any(a.name == FREEZE for a in stmt.names))


# -- addressing ---------------------------------------------------------------------------------
def _get(tree: ast.AST, path: Path) -> ast.AST:
    node: ast.AST = tree
    for name, index in path:
        value = getattr(node, name)
        node = value if index is None else value[index]
    return node


def _nodes(tree: ast.AST) -> Iterator[tuple[ast.AST, Path]]:
    """Every node with its path, outer before inner; frozen subtrees are not entered."""
    stack: deque[tuple[ast.AST, Path]] = deque([(tree, ())])
    while stack:
        node, path = stack.popleft()
        yield node, path
        if _is_freeze(node):
            continue
        for name, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                stack.append((value, (*path, (name, None))))
            elif isinstance(value, list):
                stack.extend((v, (*path, (name, i))) for i, v in enumerate(value) if isinstance(v, ast.AST))


def size(source: str) -> tuple[int, int, int]:
    """What a candidate must make smaller: tree nodes, then characters, then |int constants|."""
    tree = ast.parse(source)
    ints = sum(abs(n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int)
    return sum(1 for _ in ast.walk(tree)), len(source), ints


@dataclass(frozen=True)
class Edit:
    """One rewrite: ``kind`` at ``path`` (``arg``: which chunk, branch, argument or value)."""

    kind: str
    path: Path
    arg: object = None

    def apply(self, source: str) -> str | None:
        tree = ast.parse(source)
        if not _EDITS[self.kind](tree, self.path, self.arg):
            return None
        ast.fix_missing_locations(tree)
        try:
            text = ast.unparse(tree) + "\n"
            compile(text, "<candidate>", "exec")
        except (SyntaxError, ValueError):
            return None
        return text


def _set_body(stmts: list[ast.stmt]) -> list[ast.stmt]:
    return stmts or [ast.Pass()]


def _remove_chunk(tree: ast.AST, path: Path, arg: object) -> bool:
    owner, field_name = _get(tree, path[:-1]) if path[:-1] else tree, path[-1][0]
    stmts = getattr(owner, field_name)
    start, stop = arg  # type: ignore[misc]
    kept = stmts[:start] + stmts[stop:]
    setattr(owner, field_name, kept if field_name in ("orelse", "finalbody") else _set_body(kept))
    return True


def _replace_stmt(tree: ast.AST, path: Path, arg: object) -> bool:
    owner = _get(tree, path[:-1]) if path[:-1] else tree
    name, index = path[-1]
    stmts = getattr(owner, name)
    node = stmts[index]
    if arg == "body":
        new = list(node.body)
    elif arg == "orelse":
        new = list(node.orelse)
    elif arg == "body+finally":
        new = list(node.body) + list(node.finalbody)
    elif arg == "bind":  # with e as x: body -> x = e; body
        new = [ast.Assign(targets=[item.optional_vars], value=item.context_expr)
               for item in node.items if item.optional_vars is not None] + list(node.body)
    else:
        return False
    replaced = stmts[:index] + new + stmts[index + 1:]
    setattr(owner, name, replaced if name in ("orelse", "finalbody") else _set_body(replaced))
    return True


def _replace_expr(tree: ast.AST, path: Path, arg: object) -> bool:
    owner = _get(tree, path[:-1]) if path[:-1] else tree
    name, index = path[-1]
    node = _get(tree, path)
    if isinstance(arg, tuple) and arg[0] == "const":
        new: ast.AST = ast.Constant(arg[1])
    elif isinstance(arg, tuple) and arg[0] == "field":
        new = copy.deepcopy(getattr(node, arg[1]) if arg[2] is None else getattr(node, arg[1])[arg[2]])
    else:
        return False
    if index is None:
        setattr(owner, name, new)
    else:
        getattr(owner, name)[index] = new
    return True


def _drop_argument(tree: ast.AST, path: Path, arg: object) -> bool:
    call = _get(tree, path)
    where, index = arg  # type: ignore[misc]
    values = call.args if where == "args" else call.keywords
    del values[index]
    return True


def _drop_parameter(tree: ast.AST, path: Path, arg: object) -> bool:
    func = _get(tree, path)
    params = func.args
    positional = params.posonlyargs + params.args
    index = int(arg)  # type: ignore[arg-type]
    first_default = len(positional) - len(params.defaults)
    if index >= first_default:
        del params.defaults[index - first_default]
    if index < len(params.posonlyargs):
        del params.posonlyargs[index]
    else:
        del params.args[index - len(params.posonlyargs)]
    params.vararg = params.vararg or ast.arg("args")
    params.kwarg = params.kwarg or ast.arg("kwargs")
    return True


_EDITS: dict[str, Callable[[ast.AST, Path, object], bool]] = {
    "remove": _remove_chunk, "replace_stmt": _replace_stmt, "replace_expr": _replace_expr,
    "drop_argument": _drop_argument, "drop_parameter": _drop_parameter,
}


# -- candidates ---------------------------------------------------------------------------------
def _removals(tree: ast.AST) -> list[Edit]:
    """Chunks of each statement list, halving in size, outer lists first."""
    lists: list[tuple[Path, list[ast.stmt]]] = []
    for node, path in _nodes(tree):
        if _is_freeze(node):
            continue
        for name in _STMT_LISTS:
            stmts = getattr(node, name, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                lists.append(((*path, (name, None)), stmts))
    edits: list[Edit] = []
    for path, stmts in lists:
        free = [i for i, s in enumerate(stmts) if not _holds_freeze(s) and not _is_future(s)]
        if not free:
            continue
        runs = _runs(free)
        chunk = max(len(r) for r in runs)
        while chunk >= 1:
            for run in runs:
                for start in range(0, len(run), chunk):
                    piece = run[start:start + chunk]
                    edits.append(Edit("remove", path, (piece[0], piece[-1] + 1)))
            chunk //= 2
    return list(dict.fromkeys(edits))


def _runs(indices: Sequence[int]) -> list[list[int]]:
    """Consecutive runs of statement indices (frozen statements split them)."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _compounds(tree: ast.AST) -> list[Edit]:
    edits = []
    for node, path in _nodes(tree):
        if not path or path[-1][1] is None or not isinstance(node, ast.stmt) or _holds_freeze(node):
            continue
        if isinstance(node, ast.If):
            edits.append(Edit("replace_stmt", path, "body"))
            if node.orelse:
                edits.append(Edit("replace_stmt", path, "orelse"))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            edits.append(Edit("replace_stmt", path, "body"))
        elif isinstance(node, ast.Try):
            edits.append(Edit("replace_stmt", path, "body+finally"))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            bound = any(item.optional_vars is not None for item in node.items)
            edits.append(Edit("replace_stmt", path, "bind" if bound else "body"))
    return edits


def _expressions(tree: ast.AST) -> list[Edit]:
    edits = []
    for node, path in _nodes(tree):
        if _holds_freeze(node):
            continue
        if isinstance(node, ast.Call):
            edits += [Edit("drop_argument", path, ("keywords", i)) for i in range(len(node.keywords))]
            edits += [Edit("drop_argument", path, ("args", i)) for i in range(len(node.args))]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            edits += [Edit("drop_parameter", path, i) for i in range(len(node.args.posonlyargs + node.args.args))]
        if not path or isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            continue
        if isinstance(node, ast.BinOp):
            edits += [Edit("replace_expr", path, ("field", "left", None)),
                      Edit("replace_expr", path, ("field", "right", None))]
        elif isinstance(node, ast.BoolOp):
            edits += [Edit("replace_expr", path, ("field", "values", i)) for i in range(len(node.values))]
        elif isinstance(node, ast.IfExp):
            edits += [Edit("replace_expr", path, ("field", "body", None)),
                      Edit("replace_expr", path, ("field", "orelse", None))]
        elif isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) > 1:
            smaller = dict.fromkeys((0, 1, node.value // 2))
            edits += [Edit("replace_expr", path, ("const", v)) for v in smaller if v != node.value]
    return edits


PHASES: tuple[tuple[str, Callable[[ast.AST], list[Edit]]], ...] = (
    ("statements", _removals), ("compound statements", _compounds), ("expressions", _expressions))


@dataclass
class Reduction:
    """The state of one reduction: the smallest reproducing source so far and its counts."""

    source: str
    tried: int = 0
    kept: int = 0
    seen: set[str] = field(default_factory=set)


def reduce(source: str, reproduces: Callable[[list[str]], list[bool]], jobs: int = 1,
           on_keep: Callable[[Reduction, str], None] | None = None) -> Reduction:
    """Reduce ``source`` (already ``prepare``d and reproducing) until no candidate both
    reproduces and is smaller. ``reproduces`` runs a batch of candidate sources (up to
    ``jobs`` at once) and says which reproduce; ``on_keep`` hears of each kept candidate
    (with the phase that made it)."""
    state = Reduction(source, seen={source})
    progress = True
    while progress:
        progress = False
        for phase, make in PHASES:
            while _step(state, make, reproduces, max(1, jobs), phase, on_keep):
                progress = True
    return state


def _step(state: Reduction, make: Callable[[ast.AST], list[Edit]], reproduces: Callable[[list[str]], list[bool]],
          jobs: int, phase: str, on_keep: Callable[[Reduction, str], None] | None) -> bool:
    """Try ``make``'s candidates in order, ``jobs`` at a time; keep the first that reproduces."""
    current = size(state.source)
    batch: list[str] = []
    for edit in make(ast.parse(state.source)):
        candidate = edit.apply(state.source)
        if candidate is None or candidate in state.seen or size(candidate) >= current:
            continue
        state.seen.add(candidate)
        batch.append(candidate)
        if len(batch) == jobs:
            if _first(state, batch, reproduces, phase, on_keep):
                return True
            batch = []
    return bool(batch) and _first(state, batch, reproduces, phase, on_keep)


def _first(state: Reduction, batch: list[str], reproduces: Callable[[list[str]], list[bool]], phase: str,
           on_keep: Callable[[Reduction, str], None] | None) -> bool:
    state.tried += len(batch)
    for candidate, ok in zip(batch, reproduces(batch)):
        if ok:
            state.source, state.kept = candidate, state.kept + 1
            if on_keep is not None:
                on_keep(state, phase)
            return True
    return False

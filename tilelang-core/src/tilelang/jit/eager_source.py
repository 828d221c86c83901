"""Reading an eager ``@tilelang.jit`` function's source (plain ``ast``, no TVM).

An eager kernel's body has two parts:

* the declarations: every statement before the first top-level ``with`` — plain Python
  (``T.const``, ``T.dynamic``, tensor annotations such as ``A: T.Tensor((M, K), dtype)``,
  ``C = T.empty(...)``, dtype choices, arithmetic on tile sizes), run by the JIT;
* the kernel: the first top-level ``with`` (normally ``T.Kernel``) and everything after it,
  parsed as TVMScript like a ``T.prim_func`` body; a final ``return`` names the outputs.

Python does not evaluate a bare annotation inside a function (PEP 526), which is why the
declarations are recompiled here with each ``A: X`` turned into ``A = __tilelang_tensor__("A", X)``.
A builder with no top-level ``with``, or one defining a ``@T.prim_func`` (the classic style,
returning it), is not eager: :func:`read_eager_source` returns None for it.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any

from ..errors import LanguageError

#: names the rewritten declarations and the kernel's parameters use (not user-visible)
DECLARE_TENSOR = "__tilelang_tensor__"
DECLARATIONS = "__tilelang_declarations__"

# the last name of an annotation that declares a tensor parameter in the signature:
# `A: T.Tensor((M, K), dtype)`, `A: T.Tensor[[M, K], dtype]`, `A: T.Buffer(...)`
_TENSOR_ANNOTATIONS = ("Tensor", "Buffer")


@dataclass(frozen=True)
class EagerSource:
    """What the JIT needs from an eager kernel's source."""

    name: str
    filename: str
    first_line: int  # file line of the source's first line (a decorator, usually)
    indent: int  # columns stripped from every line
    text: str  # the function's source, dedented by ``indent``
    params: tuple[str, ...]
    tensors: tuple[str, ...]  # tensor parameters, in signature order
    signature_tensors: dict[str, ast.expr]  # annotations written in the signature
    declarations: Any  # code object defining DECLARATIONS(*params) -> locals()
    kernel: tuple[ast.stmt, ...]  # the TVMScript part (final return removed)
    function: ast.FunctionDef
    returns: tuple[str, ...] | None  # names in the final `return`; None: no return


def _function_source(func: Any) -> tuple[str, int, int, str] | None:
    """(dedented text, first line, indent, file) the way TVMScript's Source reads it, so
    line numbers agree with its diagnostics; None where Python cannot give the source."""
    try:
        lines, first_line = inspect.getsourcelines(inspect.unwrap(func))
        filename = inspect.getsourcefile(func) or "<unknown>"
    except (OSError, TypeError):
        return None
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    if indent:
        text = "\n".join(line[indent:].rstrip() for line in lines)
    else:
        text = "".join(lines)
    return text, first_line, indent, filename


def _is_tensor_annotation(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Call):
        target = node.func
    else:
        target = node.value if isinstance(node, ast.Subscript) else None
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
    return name in _TENSOR_ANNOTATIONS


def _is_prim_func_def(stmt: ast.stmt) -> bool:
    """``@T.prim_func def main(...)`` (or ``@T.prim_func(...)``) in the builder's body."""
    if not isinstance(stmt, ast.FunctionDef):
        return False
    for decorator in stmt.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if getattr(target, "attr", getattr(target, "id", None)) == "prim_func":
            return True
    return False


def _declares(stmt: ast.stmt) -> bool:
    """Whether a top-level statement is an eager declaration: a bare annotation or a call of
    ``T.const`` / ``T.empty``."""
    if isinstance(stmt, ast.AnnAssign) and stmt.value is None:
        return True
    value = getattr(stmt, "value", None)
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("const", "empty"))


def makes_outputs(func: Any) -> bool:
    """Whether ``func``'s body calls T.empty before its first ``with`` (upstream's lazy
    T.prim_func returning its outputs, whatever its signature annotates)."""
    code = getattr(inspect.unwrap(func), "__code__", None)
    if code is not None and "empty" not in code.co_names:
        return False  # no `.empty` anywhere in its body: no source to read and parse
    found = _function_source(func)
    if found is None:
        return False
    try:
        fdef = ast.parse(found[0]).body[0]
    except (SyntaxError, IndexError):
        return False
    if not isinstance(fdef, ast.FunctionDef):
        return False
    for stmt in fdef.body:
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return False
        value = getattr(stmt, "value", None)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "empty":
            return True
    return False


def _returned_names(node: ast.Return, name: str) -> tuple[str, ...]:
    value = node.value
    items = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [] if value is None else [value]
    if not all(isinstance(item, ast.Name) for item in items):
        raise LanguageError(f"eager kernel {name!r}: `return` may only name the outputs made by "
                            "T.empty (`return C` or `return C, D`)")
    return tuple(item.id for item in items)


class _NoReturnInside(ast.NodeVisitor):
    """Finds a `return` among the declarations or in the kernel's middle (not in nested
    functions, whose returns are their own)."""

    def __init__(self) -> None:
        self.found: ast.Return | None = None

    def visit_Return(self, node: ast.Return) -> None:
        self.found = self.found or node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return None

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef


def _declarations_function(fdef: ast.FunctionDef, statements: list[ast.stmt],
                           params: tuple[str, ...], first_line: int, filename: str) -> Any:
    """The declarations as a function of the parameters that returns its locals, with each
    bare annotation of a parameter turned into a call that evaluates and records it."""
    body: list[ast.stmt] = []
    for stmt in statements:
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name):
            call = ast.Call(func=ast.Name(DECLARE_TENSOR, ast.Load()),
                            args=[ast.Constant(stmt.target.id), stmt.annotation], keywords=[])
            stmt = ast.copy_location(ast.Assign(targets=[ast.Name(stmt.target.id, ast.Store())],
                                                value=call), stmt)
        body.append(stmt)
    body.append(ast.Return(ast.Call(ast.Name("locals", ast.Load()), [], [])))
    args = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    decl = ast.FunctionDef(name=DECLARATIONS, args=args, body=body, decorator_list=[],
                           returns=None, type_comment=None)
    module = ast.Module(body=[ast.copy_location(decl, fdef)], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, first_line - 1)  # tracebacks show the file's own lines
    return compile(module, filename, "exec")


def read_eager_source(func: Any) -> EagerSource | None:
    """The eager reading of ``func``, or None when it is a classic builder (no top-level
    ``with``) or its source cannot be read."""
    found = _function_source(func)
    if found is None:
        return None
    text, first_line, indent, filename = found
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef):
        return None
    if any(_is_prim_func_def(stmt) for stmt in fdef.body):
        return None  # a classic builder, whatever `with` statements it has around its kernel
    split = next((i for i, s in enumerate(fdef.body) if isinstance(s, (ast.With, ast.AsyncWith))), None)
    if split is None:
        if any(_declares(stmt) for stmt in fdef.body):
            raise LanguageError(
                f"eager kernel {fdef.name!r} ({filename}:{first_line + fdef.lineno - 1}) declares "
                "tensors (annotations, T.const, T.empty) but has no top-level `with T.Kernel(...)`; "
                "write the kernel in the function's body after the declarations (a kernel inside a "
                "T.macro called from the body is not supported)")
        return None
    name = fdef.name

    def where(node: ast.AST) -> str:
        return f"{filename}:{first_line + node.lineno - 1}"

    signature = inspect.signature(func)
    for p in signature.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise LanguageError(f"eager kernel {name!r} ({filename}): parameter {p.name!r} is "
                                f"{p.kind.description}; eager kernels take named parameters only")
    params = tuple(signature.parameters)
    declarations, kernel = list(fdef.body[:split]), list(fdef.body[split:])

    returns = None
    if isinstance(kernel[-1], ast.Return):
        returns = _returned_names(kernel[-1], name)
        kernel.pop()
    stray = _NoReturnInside()
    for stmt in declarations + kernel:
        stray.visit(stmt)
    if stray.found is not None:
        raise LanguageError(f"eager kernel {name!r} ({where(stray.found)}): `return` may only "
                            "be the last statement, naming the T.empty outputs")

    annotated = {}
    for stmt in declarations:
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name):
            if stmt.target.id not in params:
                raise LanguageError(
                    f"eager kernel {name!r} ({where(stmt)}): {stmt.target.id!r} is annotated but "
                    "is not a parameter; annotate parameters to make them input tensors, and "
                    f"declare outputs with `{stmt.target.id} = T.empty(shape, dtype)`")
            annotated[stmt.target.id] = stmt.annotation
    in_signature = {a.arg: a.annotation for a in fdef.args.args + fdef.args.kwonlyargs
                    if a.arg not in annotated and _is_tensor_annotation(a.annotation)}
    tensors = tuple(p for p in params if p in annotated or p in in_signature)
    return EagerSource(
        name=name, filename=filename, first_line=first_line, indent=indent, text=text,
        params=params, tensors=tensors, signature_tensors=in_signature,
        declarations=_declarations_function(fdef, declarations, params, first_line, filename),
        kernel=tuple(kernel), function=fdef, returns=returns,
    )


__all__ = ["DECLARATIONS", "DECLARE_TENSOR", "EagerSource", "read_eager_source"]

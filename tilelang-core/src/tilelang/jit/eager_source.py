"""Reading an eager ``@tilelang.jit`` function's source (plain ``ast``, no TVM).

An eager kernel's body has two parts:

* the declarations: every statement before the first top-level ``with`` — plain Python
  (``T.const``, ``T.dynamic``, tensor annotations such as ``A: T.Tensor((M, K), dtype)``,
  ``C = T.empty(...)``, dtype choices, arithmetic on tile sizes), run by the JIT;
* the kernel: the first top-level ``with`` (normally ``T.Kernel``) and everything after it,
  parsed as TVMScript like a ``T.prim_func`` body; a final ``return`` names the outputs.
  A kernel with tensors and no ``with`` starts at its first top-level ``for`` (bare launch
  loops, ``for bx in T.thread_binding(1, thread="blockIdx.x"):``).

Upstream also lets the kernel live in a ``T.macro`` that the body calls last
(``copy_impl(A, B)``, ``return copy_impl(A)``, ``C = impl(A)`` then ``return C``): the macro
is an ordinary call there, its own statements before its ``with`` (``M, N = A.shape``,
``B = T.empty(...)``) run like declarations. Such a body has no ``with`` of its own; its
last call is a :class:`MacroCall`, which the JIT resolves when it runs the declarations
(the callee may be a global defined after the kernel) and reads with
:func:`read_macro_source`, recursively.

Python does not evaluate a bare annotation inside a function (PEP 526), which is why the
declarations are recompiled here with each ``A: X`` turned into ``A = __tilelang_tensor__("A", X)``.
A builder with no top-level ``with``, or one defining a ``@T.prim_func`` (the classic style,
returning it), is not eager: :func:`read_eager_source` returns None for it.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import LanguageError

#: names the rewritten declarations and the kernel's parameters use (not user-visible)
DECLARE_TENSOR = "__tilelang_tensor__"
DECLARATIONS = "__tilelang_declarations__"
#: the declarations of a body that ends in a macro call capture (callee, args, kwargs) here
MACRO_CALL = "__tilelang_macro_call__"
CAPTURE_CALL = "__tilelang_capture_call__"


def capture_call(callee: Any, *args: Any, **kwargs: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """What the rewritten declarations call in place of the final macro call."""
    return callee, args, kwargs


@dataclass(frozen=True)
class MacroCall:
    """The last statement of a body whose kernel is in a T.macro it calls."""

    callee: str  # the callee as written (`copy_impl`, `kernels.copy`), for messages
    where: str  # file:line of the call
    returned: bool  # `return impl(...)`: the body returns what the macro returns
    targets: tuple[str, ...] | None  # `C = impl(...)` / `C, D = impl(...)`: the names bound

# the last name of an annotation that declares a tensor parameter in the signature:
# `A: T.Tensor((M, K), dtype)`, `A: T.Tensor[[M, K], dtype]`, `A: T.Buffer(...)`
_TENSOR_ANNOTATIONS = ("Tensor", "Buffer")
# a scalar dtype (`n: T.int32`, `scale: T.float32`): a run-time scalar parameter, as upstream
# makes it (its eager builder calls the dtype, giving a variable), not a compile-time value
_SCALAR_DTYPE = re.compile(r"(u?int(8|16|32|64)|float(16|32|64)|bfloat16|bool|int|uint|long|short|half|float|double)")


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
    var_keyword: str | None = None  # the `**kwargs` parameter: more compile-time constants
    macro_call: MacroCall | None = None  # the kernel is in this call's T.macro (``kernel`` empty)
    #: run-time scalar parameters (a scalar dtype annotation), in signature order; their
    #: signature annotations are in ``signature_tensors`` too (declared the same way)
    scalars: tuple[str, ...] = ()

    @property
    def inputs(self) -> tuple[str, ...]:
        """The kernel's run-time parameters before its outputs: tensors and scalars, in
        signature order."""
        return tuple(p for p in self.params if p in self.tensors or p in self.scalars)


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


def _is_scalar_annotation(node: ast.expr | None) -> bool:
    """``T.int32``, ``T.float32``, ``T.bool`` ...: a scalar dtype written as an attribute."""
    return isinstance(node, ast.Attribute) and _SCALAR_DTYPE.fullmatch(node.attr) is not None


def _pointers_as_tensors(fdef: ast.FunctionDef, declarations: list[ast.stmt]) -> list[ast.stmt]:
    """Upstream's eager pointer parameters: ``A: T.ptr`` in the signature, then
    ``A = T.make_tensor(A, shape, dtype)`` among the declarations, is the tensor parameter
    ``A: T.Tensor(shape, dtype)`` (a call passes the tensor; its shape is checked)."""
    def is_pointer(node: ast.expr | None) -> bool:  # `T.ptr` or `T.ptr(T.float16)`
        target = node.func if isinstance(node, ast.Call) else node
        return getattr(target, "attr", getattr(target, "id", None)) == "ptr"

    pointers = {a.arg for a in fdef.args.args + fdef.args.kwonlyargs if is_pointer(a.annotation)}
    result = []
    for stmt in declarations:
        value = getattr(stmt, "value", None)
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id in pointers and isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute) and value.func.attr == "make_tensor"
                and value.args and isinstance(value.args[0], ast.Name) and value.args[0].id == stmt.targets[0].id):
            tensor = ast.Attribute(value.func.value, "Tensor", ast.Load())
            annotation = ast.Call(tensor, value.args[1:], value.keywords)
            stmt = ast.copy_location(ast.AnnAssign(ast.Name(stmt.targets[0].id, ast.Store()), annotation, None, 1), stmt)
            ast.fix_missing_locations(stmt)
        result.append(stmt)
    return result


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
                           params: tuple[str, ...], first_line: int, filename: str,
                           call: ast.Call | None = None, annotations: bool = True) -> Any:
    """The declarations as a function of the parameters that returns its locals, with each
    bare annotation of a parameter turned into a call that evaluates and records it
    (``annotations``; a macro's are left alone) and the final macro ``call`` into a capture
    of its callee and arguments (evaluated, not called)."""
    body: list[ast.stmt] = []
    for stmt in statements:
        if annotations and isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name):
            declare = ast.Call(func=ast.Name(DECLARE_TENSOR, ast.Load()),
                               args=[ast.Constant(stmt.target.id), stmt.annotation], keywords=[])
            stmt = ast.copy_location(ast.Assign(targets=[ast.Name(stmt.target.id, ast.Store())],
                                                value=declare), stmt)
        body.append(stmt)
    if call is not None:
        capture = ast.Call(ast.Name(CAPTURE_CALL, ast.Load()), [call.func, *call.args], call.keywords)
        body.append(ast.copy_location(ast.Assign([ast.Name(MACRO_CALL, ast.Store())], capture), call))
    body.append(ast.Return(ast.Call(ast.Name("locals", ast.Load()), [], [])))
    args = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    decl = ast.FunctionDef(name=DECLARATIONS, args=args, body=body, decorator_list=[],
                           returns=None, type_comment=None)
    module = ast.Module(body=[ast.copy_location(decl, fdef)], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, first_line - 1)  # tracebacks show the file's own lines
    return compile(module, filename, "exec")


def _final_macro_call(fdef: ast.FunctionDef, where: Callable[[ast.AST], str]
                      ) -> tuple[int, ast.Call, MacroCall, ast.Return | None] | None:
    """(index, call, MacroCall, final return) when the body ends in a call of a named
    function, the forms a body whose kernel is in a T.macro takes; else None."""
    body = fdef.body
    final = body[-1] if isinstance(body[-1], ast.Return) else None
    if final is not None and isinstance(final.value, ast.Call):
        index, stmt, returned, final = len(body) - 1, body[-1], True, None
    else:
        index = len(body) - (2 if final is not None else 1)
        if index < 0:
            return None
        stmt, returned = body[index], False
    call = getattr(stmt, "value", None)
    if not isinstance(call, ast.Call) or not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    targets = None
    if isinstance(stmt, ast.Assign):
        target = stmt.targets[0] if len(stmt.targets) == 1 else None
        items = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if not all(isinstance(item, ast.Name) for item in items):
            return None
        targets = tuple(item.id for item in items)
    elif not isinstance(stmt, (ast.Expr, ast.Return)):
        return None
    return index, call, MacroCall(ast.unparse(call.func), where(call), returned, targets), final


def read_eager_source(func: Any) -> EagerSource | None:
    """The eager reading of ``func``, or None when it is a classic builder (no top-level
    ``with``, nor a final macro call after tensor declarations) or its source cannot be read."""
    return _read(func, None)


def read_macro_source(func: Any, caller: str) -> EagerSource:
    """The reading of a T.macro's function that eager kernel ``caller`` calls last: its
    statements before its first top-level ``with`` run as declarations (its parameters are
    what the call passes: nothing is annotated into a tensor), the rest is the kernel."""
    source = _read(func, caller)
    assert source is not None  # _read raises for a macro it cannot read
    return source


def _read(func: Any, caller: str | None) -> EagerSource | None:
    """``caller`` None: an eager @tilelang.jit function (or lazy T.prim_func); else the
    name of the eager kernel whose last statement calls the T.macro ``func``."""
    name = getattr(func, "__name__", "kernel")
    what = f"eager kernel {name!r}" if caller is None else f"T.macro {name!r} (called by eager kernel {caller!r})"
    found = _function_source(func)
    if found is None:
        if caller is None:
            return None
        raise LanguageError(f"{what}: its source cannot be read; define it in a file")
    text, first_line, indent, filename = found
    try:
        tree = ast.parse(text)
    except SyntaxError:
        tree = None
    fdef = tree.body[0] if tree is not None and tree.body else None
    if not isinstance(fdef, ast.FunctionDef):
        if caller is None:
            return None
        raise LanguageError(f"{what}: its source does not parse as a function definition")
    if caller is None and any(_is_prim_func_def(stmt) for stmt in fdef.body):
        return None  # a classic builder, whatever `with` statements it has around its kernel
    name = fdef.name

    def where(node: ast.AST) -> str:
        return f"{filename}:{first_line + node.lineno - 1}"

    split = next((i for i, s in enumerate(fdef.body) if isinstance(s, (ast.With, ast.AsyncWith))), None)
    final_call = _final_macro_call(fdef, where) if split is None else None
    if split is None:
        signature_tensors = any(_is_tensor_annotation(a.annotation) for a in fdef.args.args + fdef.args.kwonlyargs)
        declares = any(_declares(stmt) for stmt in fdef.body)
        if final_call is None and caller is None and (declares or signature_tensors):
            # a kernel of bare launch loops (`for bx in T.thread_binding(1, "blockIdx.x"):`)
            split = next((i for i, s in enumerate(fdef.body) if isinstance(s, ast.For)), None)
    if split is None:
        if final_call is None or (caller is None and not (declares or signature_tensors)):
            if caller is not None or declares:
                kind = "declares tensors (annotations, T.const, T.empty) but " if caller is None else ""
                raise LanguageError(
                    f"{what} ({where(fdef)}) {kind}has no top-level `with T.Kernel(...)`; write the "
                    "kernel in the function's body after the declarations, or in a T.macro that the "
                    "body calls as its last statement (`copy_impl(A, B)` or `return copy_impl(A)`)")
            return None

    signature = inspect.signature(func)
    allowed = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD)
    for p in signature.parameters.values():
        if caller is None and p.kind not in allowed:
            raise LanguageError(f"{what} ({filename}): parameter {p.name!r} is {p.kind.description}; "
                                "eager kernels take named parameters (and `**kwargs`) only")
    var_keyword = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)
    params = tuple(signature.parameters)

    returns = None
    call = macro_call = None
    if final_call is not None:
        index, call, macro_call, final = final_call
        declarations, kernel = list(fdef.body[:index]), []
        if final is not None:
            returns = _returned_names(final, name)
    else:
        declarations, kernel = list(fdef.body[:split]), list(fdef.body[split:])
        if isinstance(kernel[-1], ast.Return):
            returns = _returned_names(kernel[-1], name)
            kernel.pop()
    stray = _NoReturnInside()
    for stmt in declarations + kernel:
        stray.visit(stmt)
    if stray.found is not None:
        raise LanguageError(f"{what} ({where(stray.found)}): `return` may only "
                            "be the last statement, naming the T.empty outputs")

    if caller is None:
        declarations = _pointers_as_tensors(fdef, declarations)
    annotated = {}
    for stmt in declarations if caller is None else ():
        if isinstance(stmt, ast.AnnAssign) and stmt.value is None and isinstance(stmt.target, ast.Name):
            if stmt.target.id not in params:
                raise LanguageError(
                    f"{what} ({where(stmt)}): {stmt.target.id!r} is annotated but "
                    "is not a parameter; annotate parameters to make them input tensors, and "
                    f"declare outputs with `{stmt.target.id} = T.empty(shape, dtype)`")
            annotated[stmt.target.id] = stmt.annotation
    in_signature = {a.arg: a.annotation for a in fdef.args.args + fdef.args.kwonlyargs
                    if caller is None and a.arg not in annotated
                    and (_is_tensor_annotation(a.annotation) or _is_scalar_annotation(a.annotation))}
    written = {**in_signature, **annotated}
    scalars = tuple(p for p in params if p in written and _is_scalar_annotation(written[p]))
    tensors = tuple(p for p in params if p in written and p not in scalars)
    code = _declarations_function(fdef, declarations, params, first_line, filename, call=call,
                                  annotations=caller is None)
    return EagerSource(
        name=name, filename=filename, first_line=first_line, indent=indent, text=text,
        params=params, tensors=tensors, signature_tensors=in_signature, declarations=code,
        kernel=tuple(kernel), function=fdef, returns=returns, var_keyword=var_keyword,
        macro_call=macro_call, scalars=scalars,
    )


def macro_function(callee: Any) -> tuple[Callable[..., Any], bool] | None:
    """(the Python function, hygienic?) of a ``T.macro``, else None. TVMScript's decorator
    returns a plain function closing over its ScriptMacro (tvm/tirx/script/parser/entry.py,
    ``macro``), whose ``func`` and ``hygienic`` this reads; recognized by class name, so
    that reading a source imports no TVM."""
    for cell in getattr(callee, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if any(klass.__name__ == "ScriptMacro" for klass in type(value).__mro__):
            return value.func, bool(value.hygienic)
    return None


__all__ = ["CAPTURE_CALL", "DECLARATIONS", "DECLARE_TENSOR", "MACRO_CALL", "EagerSource", "MacroCall",
           "capture_call", "macro_function", "read_eager_source", "read_macro_source"]

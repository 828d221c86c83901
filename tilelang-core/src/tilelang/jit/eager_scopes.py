"""Running an eager kernel's declarations through the T.macro calls that hold its kernel.

An eager body either holds its kernel (a top-level ``with``) or ends in a call of a
``T.macro`` that does (``eager_source.MacroCall``), which may end in such a call again. Each
function in that chain is a :class:`Scope`: its declarations run as plain Python with its
own globals and closure (a hygienic macro's names are its definition's, as a Python call's
are; a non-hygienic one sees its caller's), on the values the call passes. The last scope's
kernel is what TVMScript parses; the chain decides which outputs the call returns and the
names the kernel's output parameters get.
"""

from __future__ import annotations

import ast
import copy
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import LanguageError
from .eager_source import (
    CAPTURE_CALL,
    DECLARATIONS,
    MACRO_CALL,
    EagerSource,
    capture_call,
    macro_function,
    read_macro_source,
)

#: a name of the kernel's scope that a kernel parameter's name would shadow, renamed
_SHADOWED = "__tilelang_macro_{}"
#: macro calls deeper than this are a macro calling itself (each level is one source)
_MAX_DEPTH = 32


def function_namespace(func: Callable[..., Any]) -> dict[str, Any]:
    """The names a function's body sees besides its locals: its globals and closure."""
    namespace = dict(func.__globals__)
    namespace.update(inspect.getclosurevars(func).nonlocals)
    return namespace


@dataclass
class Scope:
    """One function of the chain, after its declarations ran."""

    source: EagerSource
    func: Callable[..., Any]
    names: dict[str, Any]  # what its body sees besides its locals (globals, closure, ...)
    locals: dict[str, Any]


class ScopeRunner:
    """Runs a chain of declarations (within the caller's EagerBuild); remembers the
    macros' readings."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self._sources: dict[Callable[..., Any], EagerSource] = {}

    def run(self, source: EagerSource, func: Callable[..., Any], names: dict[str, Any],
            arguments: Mapping[str, Any]) -> list[Scope]:
        """``names``: the eager function's namespace (a copy of its own, which its
        declarations' code is defined in); ``arguments``: its parameters' values."""
        scopes: list[Scope] = []
        while True:
            names[CAPTURE_CALL] = capture_call
            exec(source.declarations, names)  # noqa: S102 - the user's own code
            local_values = names[DECLARATIONS](**arguments)
            call = source.macro_call
            captured = local_values.pop(MACRO_CALL, None)
            scopes.append(Scope(source, func, names, local_values))
            if call is None:
                return scopes
            if len(scopes) > _MAX_DEPTH:
                raise LanguageError(f"eager kernel {self.kernel!r}: T.macro calls nest deeper than "
                                    f"{_MAX_DEPTH} ({call.where}); does a macro call itself?")
            callee, args, kwargs = captured
            found = macro_function(callee)
            if found is None:
                raise LanguageError(
                    f"eager kernel {self.kernel!r} ({call.where}): its body has no top-level `with "
                    f"T.Kernel(...)` and ends in a call of {call.callee!r}, a {type(callee).__name__}, "
                    "not a T.macro; write the kernel in the body, or in a @T.macro it calls")
            func, hygienic = found
            try:
                bound = inspect.signature(func).bind(*args, **kwargs)
            except TypeError as err:
                raise LanguageError(f"eager kernel {self.kernel!r} ({call.where}): calling T.macro "
                                    f"{call.callee!r}: {err}") from None
            bound.apply_defaults()
            source = self._source(func)
            names = function_namespace(func) if hygienic else {**names, **local_values}
            arguments = dict(bound.arguments)

    def _source(self, func: Callable[..., Any]) -> EagerSource:
        source = self._sources.get(func)
        if source is None:
            source = self._sources[func] = read_macro_source(func, self.kernel)
        return source


def returned(scopes: list[Scope]) -> list[tuple[str, Any]] | None:
    """(name, value) of what the outermost function returns; None without a `return`
    (the call then gives the kernel's result: every output). Follows ``return impl(...)``
    and ``C = impl(...)`` through the chain, innermost first."""
    value: list[tuple[str, Any]] | None = None
    for scope in reversed(scopes):
        call = scope.source.macro_call
        inner, value = value, None
        if call is not None and call.targets is not None:
            results = [v for _, v in inner or ()]
            if len(call.targets) == 1:
                results = [results[0] if len(results) == 1 else (tuple(results) or None)]
            elif len(results) != len(call.targets):
                raise LanguageError(f"T.macro {call.callee!r} ({call.where}) returns {len(results)} "
                                    f"value(s), which `{', '.join(call.targets)} = ...` cannot unpack")
            scope.locals.update(zip(call.targets, results))
        if call is not None and call.returned:
            value = list(inner or ())
        elif scope.source.returns is not None:
            value = [(n, scope.locals.get(n, scope.names.get(n))) for n in scope.source.returns]
    return value


def output_names(scopes: list[Scope], outputs: list[Any], inputs: tuple[str, ...], kernel: str) -> list[str]:
    """The parameter name of each T.empty output: the name it has in the outermost scope
    that holds it, made unique among the kernel's parameters."""
    taken, names = set(inputs), []
    for out in outputs:
        name = next((k for scope in scopes for k, v in scope.locals.items() if v is out), None)
        if name is None:
            raise LanguageError(f"eager kernel {kernel!r}: a T.empty result is not "
                                "assigned to a name; write `C = T.empty(shape, dtype)`")
        unique, count = name, 0
        while unique in taken:
            count += 1
            unique = f"{name}_{count}"
        taken.add(unique)
        names.append(unique)
    return names


class _Rename(ast.NodeTransformer):
    def __init__(self, renames: Mapping[str, str]) -> None:
        self.renames = renames

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.renames:
            return ast.copy_location(ast.Name(self.renames[node.id], node.ctx), node)
        return node


def unshadowed(kernel: tuple[ast.stmt, ...], scope: Scope, params: Mapping[str, Any]
               ) -> tuple[list[ast.stmt], dict[str, Any]]:
    """The kernel statements of a macro scope, and the namespace they see. The kernel's
    parameters are named after the outer function's tensors, but a macro's body means its
    own names: where a parameter's name is bound in the macro to something else, that name
    is renamed in its kernel (``copy(B, A)`` called as ``copy(A, B)``)."""
    namespace = {**scope.names, **scope.locals}
    missing = object()
    renames = {}
    for name, value in params.items():
        own = namespace.get(name, missing)
        if own is not missing and own is not value:
            renames[name] = _SHADOWED.format(name)
    for name, hidden in renames.items():
        namespace[hidden] = namespace.pop(name)
    for name in params:
        namespace.pop(name, None)  # the parameter itself
    if not renames:
        return list(kernel), namespace
    return [_Rename(renames).visit(copy.deepcopy(stmt)) for stmt in kernel], namespace


__all__ = ["Scope", "ScopeRunner", "function_namespace", "output_names", "returned", "unshadowed"]

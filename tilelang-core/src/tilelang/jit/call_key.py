"""The in-process memo key of a ``@tilelang.jit`` call: its arguments, canonical and hashable.

A builder's non-tensor arguments are compile-time constants: each distinct set compiles its
own kernel. Calls that mean the same thing must find the same kernel, whatever their form:
``f(512, 512)``, ``f(512, 512, False)`` (a default spelt out) and ``f(token_stride=512,
hidden=512)`` bind to the same parameters, so the key is built from the bound arguments with
the defaults applied, in signature order. Keywords gathered by a ``**kwargs`` parameter are
part of it, sorted by name (a dict's order carries no meaning).

Lists, tuples, dicts and sets are not hashable or not canonical as they are, so they are
turned into tagged tuples (``[1, 2]`` and ``(1, 2)`` stay distinct: a builder may tell them
apart). Any other unhashable value (a dataclass with ``eq=True``, an object with a mutable
``__eq__``) has no sound key, and the call is refused with an ArgumentError (a TypeError)
that names the argument.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from ..errors import ArgumentError


def normalized(value: Any, name: str, where: str, leaf: Callable[[Any], None] | None = None) -> Hashable:
    """A hashable, canonical stand-in for a compile-time argument ``name`` of ``where``
    (e.g. "kernel 'matmul'"); equal values give equal keys. ``leaf`` sees each value that is
    not a list, tuple, dict or set first (it may refuse one by raising)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(normalized(v, name, where, leaf) for v in value))
    if isinstance(value, dict):
        items = [(normalized(k, name, where, leaf), normalized(v, name, where, leaf)) for k, v in value.items()]
        return ("dict", tuple(sorted(items, key=repr)))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, frozenset(normalized(v, name, where, leaf) for v in value))
    if leaf is not None:
        leaf(value)
    try:
        hash(value)
    except TypeError:
        raise ArgumentError(
            f"{where}: argument {name}={value!r} is an unhashable {type(value).__name__}, which "
            "cannot be normalised into a compile-time cache key (lists, tuples, dicts and sets of "
            "hashable values can); pass a hashable value instead, e.g. a tuple or a frozen "
            "dataclass") from None
    return (type(value).__name__, value)


def bound_arguments(signature: inspect.Signature, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                    where: str) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults applied (a ``**kwargs`` parameter
    holds the extra keywords); Python's own binding errors, as an ArgumentError."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as err:  # "missing a required argument: 'x'", "multiple values for ..."
        raise ArgumentError(f"{where}: {err}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def arguments_key(arguments: Mapping[str, Any], var_keyword: str | None,
                  freeze: Callable[[str, Any], Hashable]) -> tuple[Hashable, ...]:
    """The key of arguments in parameter order, each frozen by ``freeze(name, value)``; the
    ``**kwargs`` parameter ``var_keyword`` holds keywords, each frozen under its own name."""
    key: list[Hashable] = []
    for name, value in arguments.items():
        if name == var_keyword:
            key.append(("**", tuple((k, freeze(k, v)) for k, v in sorted(value.items()))))
        else:
            key.append(freeze(name, value))
    return tuple(key)


def call_key(signature: inspect.Signature, arguments: Mapping[str, Any], where: str) -> Hashable:
    """The canonical key of bound ``arguments`` (see the module docstring)."""
    var_keyword = next((n for n, p in signature.parameters.items() if p.kind is p.VAR_KEYWORD), None)
    return arguments_key({name: arguments[name] for name in signature.parameters}, var_keyword,
                         lambda name, value: normalized(value, name, where))


__all__ = ["arguments_key", "bound_arguments", "call_key", "normalized"]

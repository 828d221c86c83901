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
from collections.abc import Hashable, Mapping
from typing import Any

from ..errors import ArgumentError


def normalized(value: Any, name: str, where: str) -> Hashable:
    """A hashable, canonical stand-in for a compile-time argument ``name`` of ``where``
    (e.g. "kernel 'matmul'"); equal values give equal keys."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(normalized(v, name, where) for v in value))
    if isinstance(value, dict):
        items = [(normalized(k, name, where), normalized(v, name, where)) for k, v in value.items()]
        return ("dict", tuple(sorted(items, key=repr)))
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, frozenset(normalized(v, name, where) for v in value))
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


def call_key(signature: inspect.Signature, arguments: Mapping[str, Any], where: str) -> Hashable:
    """The canonical key of bound ``arguments`` (see the module docstring)."""
    key = []
    for name, param in signature.parameters.items():
        value = arguments[name]
        if param.kind is param.VAR_KEYWORD:
            key.append(("**", tuple((k, normalized(v, k, where)) for k, v in sorted(value.items()))))
        else:
            key.append(normalized(value, name, where))
    return tuple(key)


__all__ = ["bound_arguments", "call_key", "normalized"]

"""The tuning cache: one JSON file per tuning problem under ``<kernel cache>/autotuner/``,
holding the best configuration and every configuration's timing or error.

Its key covers what decides the outcome: the builder's source and the values it closes
over, its fixed arguments, the configurations, the compile options as resolved into a
backend context (its fingerprint names backend, target and execution backend with their
versions), how configurations are checked and timed, and the tilelang version. Values
with no stable text (an object printed by address) make the problem uncacheable rather
than risk reusing another problem's result.
"""

from __future__ import annotations

import enum
import inspect
import json
import logging
import os
import tempfile
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._version import __version__
from ..cache import KernelCache, cache_key

log = logging.getLogger("tilelang.autotuner")

FORMAT = 1  # bumped when the file's layout changes


class Unkeyable(Exception):
    """A value that has no stable text form, so it cannot be part of a cache key."""


def stable_text(value: Any) -> Any:
    """A JSON-able form of ``value`` that is the same in every process, or Unkeyable."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return str(value)  # dtype objects are str subclasses
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, (list, tuple)):
        return [stable_text(v) for v in value]
    if isinstance(value, Mapping):
        return sorted([str(k), stable_text(v)] for k, v in value.items())
    if isinstance(value, types.FunctionType):
        return ["function", value.__qualname__, function_text(value)]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if type(value).__module__.startswith("torch") and hasattr(value, "shape"):
        return ["tensor", str(value.dtype), list(value.shape)]
    text = repr(value)
    if " at 0x" in text or " object at " in text:
        raise Unkeyable(f"{type(value).__name__} value {text[:60]} has no stable text form")
    return [type(value).__qualname__, text]


def function_text(fn: Any) -> Any:
    """A function's source, defaults and closure values: what decides what it builds."""
    target = getattr(fn, "func", fn)  # functools.partial: its function and bound arguments
    try:
        source = inspect.getsource(target)
    except (OSError, TypeError) as err:
        raise Unkeyable(f"the source of {getattr(target, '__qualname__', target)!r} is not "
                        f"available ({err})") from None
    closure = {}
    code = getattr(target, "__code__", None)
    for name, cell in zip(code.co_freevars if code else (), getattr(target, "__closure__", None) or ()):
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if value is not fn and value is not target:  # a function that refers to itself
            closure[name] = stable_text(value)
    parts = [source, sorted(closure.items()), stable_text(getattr(target, "__defaults__", None)),
             stable_text(getattr(target, "__kwdefaults__", None))]
    if target is not fn:
        parts.append(stable_text([fn.args, fn.keywords]))
    return parts


def problem_key(parts: Mapping[str, Any]) -> str | None:
    """The key of a tuning problem described by ``parts`` (values made stable), or None."""
    try:
        text = json.dumps({k: stable_text(v) for k, v in parts.items()}, sort_keys=True)
    except Unkeyable as why:
        log.info("tilelang autotuner: results are not cached: %s", why)
        return None
    return cache_key([f"format={FORMAT}", f"tilelang={__version__}", text])


def result_path(key: str) -> Path:
    return KernelCache().root / "autotuner" / f"{key}.json"


def load(key: str) -> dict[str, Any] | None:
    """The stored result, or None (missing, unreadable or of another format: tune again)."""
    path = result_path(key)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("tilelang autotuner: ignoring unreadable cached result %s (%s)", path, err)
        return None
    return data if data.get("format") == FORMAT else None


def store(key: str, data: dict[str, Any]) -> Path:
    """Write atomically (a temporary file renamed into place): a concurrent reader sees
    the old file or the new one, never half of one."""
    path = result_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{key[:8]}-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump({"format": FORMAT, **data}, out, indent=1, sort_keys=True, default=str)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


__all__ = ["Unkeyable", "function_text", "load", "problem_key", "result_path", "stable_text", "store"]

"""Lazy component references: ``"package.module:attribute"``.

A manifest may name a component by reference so that registering it imports nothing heavy
(TVM, an SDK). The reference is checked when registered (the module must be findable) and
imported on first use.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import Any

from ..errors import ManifestError

_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def check_ref(value: str, where: str) -> None:
    """Raise ManifestError unless ``value`` is a well-formed, findable reference."""
    if not _REF.match(value):
        raise ManifestError(f"{where}: {value!r} is not a 'package.module:attribute' reference")
    module = value.split(":", 1)[0]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ManifestError(f"{where}: module {module!r} of reference {value!r} cannot be found")


def resolve(value: Any) -> Any:
    """Import and return the object a reference names; other values are returned as is."""
    if not isinstance(value, str):
        return value
    module_name, _, attr_path = value.partition(":")
    obj: Any = importlib.import_module(module_name)
    for attr in attr_path.split("."):
        obj = getattr(obj, attr)
    return obj

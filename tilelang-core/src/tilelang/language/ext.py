"""``T.ext.<name>``: language extensions contributed by plugins, imported on first use.

A plugin maps a name to ``"package.module:attribute"`` through the
``tilelang_language_extensions`` hook. Ordinary imports never import the implementation.
"""

from __future__ import annotations

from typing import Any

from ..backend import refs
from ..backend.registry import REGISTRY
from ..errors import LanguageError


class _Extensions:
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        ref = REGISTRY.language_extensions.get(name)
        if ref is None:
            known = ", ".join(sorted(REGISTRY.language_extensions)) or "none"
            raise LanguageError(
                f"T.ext.{name}: no installed plugin provides this language extension "
                f"(installed: {known})"
            )
        return refs.resolve(ref)

    def __dir__(self) -> list[str]:
        return sorted(REGISTRY.language_extensions)


ext = _Extensions()

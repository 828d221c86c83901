"""``T.ext.<name>``: language extensions contributed by plugins, imported on first use.

Two ways to provide one, both by ``"package.module:attribute"`` reference:

* a target backend's manifest (``BackendModule.language_extensions``): an extension only
  that backend compiles. A kernel using it is routed to that backend
  (tilelang.backend.routing) and any other backend refuses it with a LanguageError;
* the ``tilelang_language_extensions`` hook: backend-neutral helpers (no routing).

Ordinary imports never import an implementation: ``T.ext.<name>`` imports it the first time
the name is used. An extension marks the IR with :func:`extension_call`, so that routing and
the refusal can find it without knowing any backend.
"""

from __future__ import annotations

import functools
from typing import Any

from ..backend import refs
from ..backend.registry import REGISTRY, origin, with_refusals
from ..backend.routing import EXTENSION_OP, extension_name, extensions_in
from ..errors import LanguageError


def _providers(name: str) -> list[tuple[str, str]]:
    """(who provides it, reference) of every registered provider of ``name``."""
    found = [(f"target backend {m.name!r} (from {origin('backend', m.name)[0]})", m.language_extensions[name])
             for _, m in sorted(REGISTRY.backends.items()) if name in m.language_extensions]
    if name in REGISTRY.language_extensions:
        found.append(("a language-extension hook", REGISTRY.language_extensions[name]))
    return found


def installed_extensions() -> list[str]:
    names = set(REGISTRY.language_extensions)
    for module in REGISTRY.backends.values():
        names.update(module.language_extensions)
    return sorted(names)


class _Extensions:
    def __init__(self) -> None:
        self._resolved: dict[tuple[str, str], Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_resolved":
            raise AttributeError(name)
        providers = _providers(name)
        if not providers:
            known = ", ".join(installed_extensions()) or "none"
            raise LanguageError(with_refusals(
                f"T.ext.{name}: no installed plugin provides this language extension "
                f"(installed: {known}); install the distribution that provides it", name))
        if len(providers) > 1:
            raise LanguageError(
                f"T.ext.{name}: several plugins provide this language extension: "
                + "; ".join(who for who, _ in providers)
                + ". Keep one: leave the others out with TILELANG_PLUGINS_DENY=<entry point>")
        key = (name, providers[0][1])
        if key not in self._resolved:
            self._resolved[key] = refs.resolve(providers[0][1])
        return self._resolved[key]

    def __dir__(self) -> list[str]:
        return installed_extensions()


ext = _Extensions()


@functools.cache
def _extension_op() -> Any:
    import tvm
    from tvm.tirx import CallEffectKind

    tvm.ir.register_op_attr(EXTENSION_OP, "TCallEffectKind", CallEffectKind.Opaque.value)
    tvm.ir.register_op_attr(EXTENSION_OP, "TScriptPrinterName", "tl_ext")
    return tvm.ir.Op.get(EXTENSION_OP)


def extension_call(name: str, *operands: Any, dtype: str = "int32") -> Any:
    """The IR node of extension ``name`` applied to ``operands``: ``tl.ext("<name>", ...)``.
    An extension's implementation emits it (``T.evaluate(extension_call(...))`` for a
    statement); the providing backend's pipeline lowers it."""
    import tvm

    return tvm.ir.Call(_extension_op(), [tvm.ir.StringImm(name), *operands], ret_ty=dtype)


__all__ = ["EXTENSION_OP", "ext", "extension_call", "extension_name", "extensions_in", "installed_extensions"]

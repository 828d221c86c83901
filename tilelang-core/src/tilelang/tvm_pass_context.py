"""``tvm.transform.PassContext(config={"tl.<name>": ...})``: upstream TileLang's pass configs
in TVM's pass context.

Upstream's TVM fork registers its ``tl.*`` keys with TVM's PassContext, so its tests and
scripts write ``with tvm.transform.PassContext(config={"tl.disable_tma_lower": True}):``
around ``tilelang.lower(...)``, and read ``PassContext.current().config["tl..."]``. Apache
TVM 0.27 refuses a key it has not registered ("Invalid config option"), and it registers
keys from C++ only. ``install()`` puts a subclass of TVM's PassContext in its place
(``tvm.transform.PassContext`` is ``tvm.ir.transform.PassContext``) that:

- takes out of ``config`` every key TileLang knows (a key some installed backend honours,
  one of core's session keys, one of upstream's ``PassConfigKey`` names) and keeps those on
  the context object; a ``tl.`` key nobody knows raises TVM's AttributeError, naming the
  nearest key; upstream's ``tir.<name>`` is TVM 0.27's ``tirx.<name>``; the rest go to TVM;
- puts them, while the context is entered, on this thread's stack, so that
  ``PassContext.current().config`` shows them beside TVM's and ``tilelang.lower`` applies
  them (``ambient_pass_configs``), under the kernel's own and the call's ``pass_configs``.

As upstream, ``tilelang.compile`` and ``@tilelang.jit`` compile in a context of their own
(their ``pass_configs``, which are part of the kernel cache's key): an enclosing context's
TileLang keys are not applied there, and a warning says so.
"""

from __future__ import annotations

import difflib
import threading
from enum import Enum
from typing import Any

_STACK = threading.local()  # .entered: [(context handle, its TileLang configs)], innermost last


def _entered() -> list[tuple[int, dict[str, Any]]]:
    if not hasattr(_STACK, "entered"):
        _STACK.entered = []
    return _STACK.entered


def tilelang_keys() -> frozenset[str]:
    """The pass-config keys TileLang knows: every installed backend's, core's session keys,
    upstream's ``PassConfigKey`` names."""
    from .backend.pass_configs import SESSION_CONFIGS, UPSTREAM_KEYS
    from .backend.registry import REGISTRY

    backends = {key for module in REGISTRY.backends.values() for key in module.pass_configs}
    return frozenset(backends | set(SESSION_CONFIGS) | UPSTREAM_KEYS)


def split_config(config: Any) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """(what TVM's PassContext takes, TileLang's keys) of a ``config`` mapping."""
    from .backend.pass_configs import tvm_config_names

    if not config:
        return None, {}
    known_to_tvm = tvm_config_names()
    ours_known = tilelang_keys()
    tvm_part: dict[str, Any] = {}
    ours: dict[str, Any] = {}
    for key, value in dict(config).items():
        name = key.value if isinstance(key, Enum) else key  # tilelang.PassConfigKey members
        if isinstance(name, str) and name not in known_to_tvm:
            if name in ours_known:
                ours[name] = value
                continue
            if name.startswith("tir.") and "tirx." + name[4:] in known_to_tvm:
                tvm_part["tirx." + name[4:]] = value
                continue
            if name.startswith("tl."):
                close = difflib.get_close_matches(name, sorted(ours_known | known_to_tvm), n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise AttributeError(
                    f"Invalid config option {name!r}: neither TVM nor TileLang (its installed backends, "
                    f"tilelang.PassConfigKey) knows it{hint}")
        tvm_part[name] = value
    return (tvm_part or None), ours


def _configs_of(context: Any) -> dict[str, Any]:
    """The TileLang configs of an entered context (a TVM-made wrapper of it too)."""
    handle = context.__chandle__()
    for entered, configs in reversed(_entered()):
        if entered == handle:
            return configs
    return {}


def ambient_pass_configs() -> dict[str, Any]:
    """The configs of the innermost entered PassContext: TVM's keys and TileLang's."""
    import sys

    if "tvm" not in sys.modules:
        return {}
    import tvm

    # (its `config` shows TileLang's keys beside TVM's: install below)
    return {str(k): v for k, v in tvm.ir.transform.PassContext.current().config.items()}


def ambient_tilelang_configs() -> dict[str, Any]:
    """Only TileLang's keys of the innermost entered PassContext."""
    import sys

    if "tvm" not in sys.modules or not _entered():
        return {}
    import tvm

    return dict(_configs_of(tvm.ir.transform.PassContext.current()))


_TVM_CONFIG: Any = None  # TVM's own PassContext.config property


def install() -> None:
    """Replace ``tvm.ir.transform.PassContext`` (= ``tvm.transform.PassContext``) by the
    subclass that takes TileLang's keys (idempotent)."""
    global _TVM_CONFIG
    from tvm.ir import transform

    base = transform.PassContext
    if getattr(base, "_tilelang_keys", False):
        return
    for klass in base.__mro__:  # the original class: its reflected `config` field
        if "config" in vars(klass):
            _TVM_CONFIG = vars(klass)["config"]
            break

    class PassContext(base):  # type: ignore[misc, valid-type]
        __doc__ = base.__doc__
        __slots__ = ("_tilelang_configs",)
        _tilelang_keys = True

        def __init__(self, opt_level: int = 2, required_pass: Any = None, disabled_pass: Any = None,
                     instruments: Any = None, config: Any = None) -> None:
            tvm_part, ours = split_config(config)
            object.__setattr__(self, "_tilelang_configs", ours)
            super().__init__(opt_level, required_pass, disabled_pass, instruments, tvm_part)

        def __enter__(self) -> Any:
            super().__enter__()
            _entered().append((self.__chandle__(), self._tilelang_configs))
            return self

        def __exit__(self, ptype: object, value: object, trace: object) -> None:
            stack = _entered()
            if stack and stack[-1][0] == self.__chandle__():
                stack.pop()
            super().__exit__(ptype, value, trace)

    def config(context: Any) -> Any:
        own = _TVM_CONFIG.__get__(context)
        ours = getattr(context, "_tilelang_configs", None)
        if ours is None:  # a wrapper TVM made (PassContext.current()): its entered configs
            ours = _configs_of(context) if _entered() else {}
        if not ours:
            return own
        return {**{str(k): v for k, v in own.items()}, **ours}

    base.config = property(config, doc="TVM's configs of this context and, while it is entered, "
                                       "TileLang's (tilelang.tvm_pass_context).")
    PassContext.__module__ = base.__module__
    PassContext.__qualname__ = base.__qualname__
    transform.PassContext = PassContext

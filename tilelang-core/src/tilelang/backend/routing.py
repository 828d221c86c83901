"""Per-kernel routing (seed 003): one kernel may move to another target backend of the
same hardware, decided once, before its BackendContext is built.

Two sources of decisions, both backend-neutral here:

* language extensions: a kernel that uses ``T.ext.<name>`` goes to the target backend
  whose manifest provides ``<name>`` (when that backend owns the requested target kind),
  since no other backend can compile it;
* kernel routers (the ``tilelang_kernel_routers`` hook): a router sees the kernel and the
  requested target and may name another target backend, with a reason. Routers act only
  where the user opted in: ``TILELANG_ROUTE`` lists them (see :func:`route_switches`);
  a router may also honour a spelling of its own (a backend's ``TILELANG_USE_<X>=1``).

The decision is a :class:`Route`: logged at debug level, held by the context (so it is part
of ``describe()`` and of the cache key) and written to the artifact. Core knows no router
and no backend: names come from the registry.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import BackendNotFoundError, CompileError, LanguageError, TileLangError
from . import refs
from .availability import probe
from .execution_backend import ExecutionBackendSpec
from .manifest import BackendModule
from .registry import REGISTRY, origin, with_refusals

log = logging.getLogger("tilelang.routing")

#: ``TILELANG_ROUTE``: comma-separated routes. ``<router>`` enables that router for every
#: requested backend, ``<from>-><router>`` only for kernels requested on backend <from>;
#: ``none`` (or ``off``) turns every route off, language-extension routes included.
ROUTE_ENV = "TILELANG_ROUTE"
_OFF = frozenset({"none", "off", "0"})
EXTENSION_ROUTER = "T.ext"


@dataclass(frozen=True)
class RouteRequest:
    """What a router sees: the kernel (a PrimFunc) and where it was asked to go."""

    kernel: Any
    kernel_name: str
    target: Any  # the requested tvm Target, canonicalized by the requested backend
    backend: str  # the target backend the request resolved to
    target_source: str  # how the target was chosen ("explicit", "alias 'x'", "auto (...)")
    execution_backend: str | None  # as requested: "auto", a name, or None (code generation)
    opted_in: bool  # TILELANG_ROUTE enables this router for this backend
    extensions: tuple[str, ...]  # the T.ext names the kernel uses


@dataclass(frozen=True)
class RouteDecision:
    """A router's answer: compile with ``backend`` (the requested one: stay) because ``reason``."""

    backend: str
    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.backend, str) or not self.backend:
            raise TypeError(f"RouteDecision.backend must be a backend name, got {self.backend!r}")
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise TypeError("RouteDecision.reason must say why, in words")


@dataclass(frozen=True)
class KernelRouter:
    """A plugin's router. ``route`` (callable or "package.module:attribute", imported on
    first use) returns a RouteDecision, or None when it has nothing to say about a kernel.
    It must not compile anything: it runs for every kernel compiled."""

    name: str
    route: Callable[[RouteRequest], RouteDecision | None] | str
    description: str = ""

    def __post_init__(self) -> None:
        from .manifest import (  # one naming rule for every registry name
            _NAME,
            _check_callable,
        )

        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise TypeError(f"KernelRouter name must be lower_snake_case, got {self.name!r}")
        _check_callable(self.route, f"KernelRouter({self.name!r}).route")


@dataclass(frozen=True)
class Route:
    """The decision applied to one kernel."""

    router: str
    requested: str  # the target backend the request named
    backend: str  # the one that compiles it
    reason: str

    @property
    def moved(self) -> bool:
        return self.backend != self.requested

    def describe(self) -> str:
        if self.moved:
            return f"routed {self.requested!r} -> {self.backend!r} by {self.router}: {self.reason}"
        return f"stays on {self.requested!r} ({self.router}: {self.reason})"


def route_switches(value: str | None = None) -> tuple[bool, set[tuple[str | None, str]]]:
    """(routing on at all, {(from backend or None for any, router)}) from TILELANG_ROUTE."""
    text = os.environ.get(ROUTE_ENV, "") if value is None else value
    entries = [e.strip() for e in text.split(",") if e.strip()]
    if any(e.lower() in _OFF for e in entries):
        return False, set()
    switches: set[tuple[str | None, str]] = set()
    for entry in entries:
        source, arrow, router = entry.partition("->")
        if not arrow:
            source, router = "", source
        if not router.strip():
            raise BackendNotFoundError(
                f"{ROUTE_ENV}={text!r}: entry {entry!r} names no router; write '<router>' or "
                "'<from backend>-><router>' (e.g. 'cuda->myrouter'), or 'none'")
        switches.add((source.strip() or None, router.strip()))
    return True, switches


def _check_switches(switches: set[tuple[str | None, str]]) -> None:
    for _, router in sorted(switches, key=lambda s: (s[0] or "", s[1])):
        if router not in REGISTRY.kernel_routers:
            installed = ", ".join(sorted(REGISTRY.kernel_routers)) or "none"
            raise BackendNotFoundError(with_refusals(
                f"{ROUTE_ENV} names router {router!r}, which no installed plugin provides "
                f"(installed routers: {installed}); to fix: install the distribution that "
                f"provides it, or remove it from {ROUTE_ENV}", router))


#: the op every backend-specific language extension emits: ``tl.ext("<name>", *operands)``
#: (tilelang.language.ext.extension_call registers it)
EXTENSION_OP = "tl.ext"


def extension_name(call: Any) -> str | None:
    """The extension name of a ``tl.ext`` call, else None."""
    if getattr(getattr(call, "op", None), "name", None) != EXTENSION_OP:
        return None
    return str(call.args[0].value)


def extensions_in(node: Any) -> tuple[str, ...]:
    """The T.ext names called anywhere in a PrimFunc or statement, sorted."""
    import tvm
    import tvm_ffi

    found: set[str] = set()

    def visit(call: Any) -> None:
        name = extension_name(call)
        if name is not None:
            found.add(name)

    tvm_ffi.structural_walk(node, (tvm.ir.Call, visit))
    return tuple(sorted(found))


used_extensions = extensions_in


def extension_providers(name: str) -> list[BackendModule]:
    """The registered target backends whose manifests provide language extension ``name``."""
    return [m for _, m in sorted(REGISTRY.backends.items()) if name in m.language_extensions]


def _extension_route(request: RouteRequest) -> RouteDecision | None:
    providers = {m.name: m for name in request.extensions for m in extension_providers(name)}
    if not providers or request.backend in providers:
        return None
    kind = request.target.kind.name
    owning = [m for m in providers.values() if kind in m.target_kinds]
    if len(owning) != 1:
        return None  # the engine's extension check says which backend would compile it
    module = owning[0]
    used = ", ".join(f"T.ext.{n}" for n in request.extensions)
    return RouteDecision(module.name, f"uses {used}, which target backend {module.name!r} provides")


def _ask(router: KernelRouter, request: RouteRequest) -> RouteDecision | None:
    dist, version = origin("router", router.name)
    try:
        decision = refs.resolve(router.route)(request)
    except TileLangError:
        raise
    except Exception as err:
        raise CompileError(
            f"kernel {request.kernel_name!r}: kernel router {router.name!r} (from {dist} {version}) "
            f"raised {type(err).__name__}: {err}. To compile without it: leave it out of "
            f"{ROUTE_ENV}, or disable its plugin with TILELANG_PLUGINS_DENY=<entry point>") from err
    if decision is not None and not isinstance(decision, RouteDecision):
        raise CompileError(
            f"kernel {request.kernel_name!r}: kernel router {router.name!r} (from {dist} {version}) "
            f"returned {decision!r}; a router returns a RouteDecision or None (a bug in {dist})")
    return decision


def _usable(decision: RouteDecision, request: RouteRequest,
            execution_specs: Callable[[BackendModule], Sequence[ExecutionBackendSpec]]) -> str | None:
    """None when the kernel can move to the decision's backend, else why it stays."""
    module = REGISTRY.backends.get(decision.backend)
    if module is None:
        return f"target backend {decision.backend!r} is not installed"
    if request.target.kind.name not in module.target_kinds:
        return f"target backend {decision.backend!r} does not own target kind {request.target.kind.name!r}"
    why = probe(module.unavailable_reason)
    if why is not None:
        return f"target backend {decision.backend!r} cannot compile here: {why}"
    wanted = request.execution_backend
    specs = list(execution_specs(module))
    if wanted not in (None, "auto") and wanted not in [s.name for s in specs]:
        return f"execution backend {wanted!r} was requested and {decision.backend!r} cannot use it"
    if wanted is None:
        return None  # code generation only: nothing has to run here
    reasons = []
    for spec in specs:
        impl = REGISTRY.execution_backends.get(spec.name)
        why = "not installed" if impl is None else (probe(impl.unavailable_reason) or probe(spec.is_available))
        if why is None:
            return None
        reasons.append(f"{spec.name}: {why}")
    # moving would fail at execution-backend selection: the kernel stays where it can run
    return f"no execution backend of {decision.backend!r} can run it here ({'; '.join(reasons)})"


def route_kernel(kernel: Any, kernel_name: str, target: Any, module: BackendModule, target_source: str,
                 execution_backend: str | None,
                 execution_specs: Callable[[BackendModule], Sequence[ExecutionBackendSpec]]) -> Route | None:
    """Decide once where one kernel compiles. None: nothing had anything to say."""
    enabled, switches = route_switches()
    if not enabled:
        return None
    _check_switches(switches)
    extensions = used_extensions(kernel)
    base = {"kernel": kernel, "kernel_name": kernel_name, "target": target, "backend": module.name,
                "target_source": target_source, "execution_backend": execution_backend, "extensions": extensions}
    asked: list[tuple[str, RouteDecision]] = []
    decision = _extension_route(RouteRequest(opted_in=True, **base))
    if decision is not None:
        asked.append((EXTENSION_ROUTER, decision))
    else:
        for name, router in sorted(REGISTRY.kernel_routers.items()):
            opted_in = (None, name) in switches or (module.name, name) in switches
            answer = _ask(router, RouteRequest(opted_in=opted_in, **base))
            if answer is not None:
                asked.append((f"router {name!r}", answer))
                if answer.backend != module.name:
                    break
    if not asked:
        return None
    who, decision = asked[-1]
    if decision.backend != module.name:
        why_not = _usable(decision, RouteRequest(opted_in=True, **base), execution_specs)
        if why_not is not None:
            decision = RouteDecision(module.name, f"not moved to {decision.backend!r} ({decision.reason}): {why_not}")
    route = Route(who, module.name, decision.backend, decision.reason)
    log.debug("tilelang: kernel %r %s", kernel_name, route.describe())
    return route


def check_extensions(kernel: Any, kernel_name: str, module: BackendModule, route: Route | None) -> None:
    """Refuse a kernel that uses a language extension the compiling backend does not provide."""
    missing = [n for n in used_extensions(kernel) if n not in module.language_extensions]
    if not missing:
        return
    providers = sorted({m.name for n in missing for m in extension_providers(n)})
    where = (f"provided by target backend(s) {', '.join(repr(p) for p in providers)}: compile it with "
             f"target={providers[0]!r}" if providers else "provided by no installed target backend")
    raise LanguageError(
        f"kernel {kernel_name!r} uses {', '.join(f'T.ext.{n}' for n in missing)}, which target backend "
        f"{module.name!r} does not implement ({where}"
        + (f"; routing: {route.describe()}" if route is not None else
           f"; routing is off ({ROUTE_ENV}=none)" if not route_switches()[0] else "") + ")")

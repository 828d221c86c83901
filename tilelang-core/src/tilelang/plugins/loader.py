"""Loading plugins from the ``tilelang.plugins`` entry-point group.

Order: entry points sorted by (entry-point name, distribution name). Every plugin is
imported and asked for its contributions first; then claims are settled: a third party
claiming a first-party name (tilelang.backend.names) is refused and the first party keeps
it; any other name claimed by two plugins leaves both unused, and the record names both.
Then the rest is published to the registry in the same sorted order, and what was refused
is written to the registry so that later "not found" errors can say so. A plugin that
fails never breaks ``import tilelang``: it is recorded with its error; strict mode raises
one PluginError, a line per plugin, after every plugin was tried.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from .. import env
from ..backend.execution_backend import ExecutionBackend, validate_execution_backend
from ..backend.manifest import BackendModule
from ..backend.names import is_first_party, reserved_owner
from ..backend.registration import register_backend, register_execution_backend
from ..backend.registry import REGISTRY
from ..backend.routing import KernelRouter
from ..backend.target import TargetDetector
from ..errors import ManifestError, PluginError
from . import hookspecs
from .api import API_ATTRIBUTE, PLUGIN_API_VERSION, api_incompatibility

log = logging.getLogger("tilelang.plugins")

ENTRY_POINT_GROUP = "tilelang.plugins"

LOADED, FAILED, DISABLED, CONFLICT, INCOMPATIBLE = "loaded", "failed", "disabled", "conflict", "incompatible"

__all__ = [
    "API_ATTRIBUTE",
    "ENTRY_POINT_GROUP",
    "PLUGIN_API_VERSION",
    "PluginRecord",
    "load_plugins",
    "plugin_records",
]


@dataclass
class PluginRecord:
    """What happened to one entry point."""

    name: str
    distribution: str
    version: str
    value: str
    status: str = LOADED
    error: str | None = None
    backends: tuple[str, ...] = ()
    execution_backends: tuple[str, ...] = ()
    detectors: tuple[str, ...] = ()
    language_extensions: tuple[str, ...] = ()
    kernel_routers: tuple[str, ...] = ()
    contributions: dict[str, list[Any]] = field(default_factory=dict, repr=False)

    def aliases(self) -> tuple[str, ...]:
        return tuple(a for m in self.contributions.get("tilelang_backend_modules", ()) for a in m.aliases)

    def headline(self) -> str:
        """One line: which plugin, and what happened to it."""
        first = (self.error or "").strip().splitlines()
        return f"plugin {self.name!r} from {self.distribution} {self.version} {self.status}" + (
            f": {first[0]}" if first else ""
        )


_records: list[PluginRecord] = []
_loaded = False


def plugin_records() -> list[PluginRecord]:
    """Records of every entry point seen by the last load, in load order."""
    return list(_records)


def _entry_points() -> list[Any]:
    # importlib-metadata, the design's dependency: one API on every Python this supports
    import importlib_metadata

    unique = {}
    for ep in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else ""
        unique.setdefault((ep.name, dist, ep.value), ep)  # one dist can be on sys.path twice
    return [unique[k] for k in sorted(unique)]


def _fail(record: PluginRecord, status: str, message: str) -> None:
    record.status, record.error = status, message
    if env.flag(env.PLUGINS_STRICT):
        return  # reported once, as the PluginError that load_plugins raises
    log.warning("tilelang plugin %r (%s) %s: %s", record.name, record.distribution, status, message)


def _collect(pm: pluggy.PluginManager, plugin: Any, record: PluginRecord) -> None:
    """Call this plugin's own hook implementations and validate what they return."""
    expected: dict[str, type] = {
        "tilelang_backend_modules": BackendModule,
        "tilelang_execution_backends": ExecutionBackend,
        "tilelang_target_detectors": TargetDetector,
        "tilelang_kernel_routers": KernelRouter,
    }
    for hook_name, kind in expected.items():
        items: list[Any] = []
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            if impl.plugin is plugin:
                items.extend(impl.function() or ())
        for item in items:
            if not isinstance(item, kind):
                raise ManifestError(f"{hook_name} returned {item!r}, expected a {kind.__name__}")
            if kind is ExecutionBackend:
                # validated here, before anything is published, so that an invalid
                # contribution refuses the whole plugin instead of half of it
                validate_execution_backend(item, hook_name)
        record.contributions[hook_name] = items
    extensions: dict[str, str] = {}
    for impl in pm.hook.tilelang_language_extensions.get_hookimpls():
        if impl.plugin is plugin:
            extensions.update(impl.function() or {})
    record.contributions["tilelang_language_extensions"] = list(extensions.items())
    record.backends = tuple(m.name for m in record.contributions["tilelang_backend_modules"])
    record.execution_backends = tuple(b.name for b in record.contributions["tilelang_execution_backends"])
    record.detectors = tuple(d.name for d in record.contributions["tilelang_target_detectors"])
    record.language_extensions = tuple(sorted(extensions))
    record.kernel_routers = tuple(r.name for r in record.contributions["tilelang_kernel_routers"])
    for category, names in (("target backend", record.backends), ("execution backend", record.execution_backends)):
        if len(set(names)) != len(names):
            raise ManifestError(f"it provides the {category} name(s) {names} more than once")


def _load_one(pm: pluggy.PluginManager, ep: Any) -> PluginRecord:
    dist = ep.dist
    record = PluginRecord(
        name=ep.name,
        distribution=dist.name if dist is not None else "<unknown>",
        version=dist.version if dist is not None else "",
        value=ep.value,
    )
    allow, deny = env.name_list(env.PLUGINS_ALLOW), env.name_list(env.PLUGINS_DENY)
    if (allow is not None and ep.name not in allow) or (deny is not None and ep.name in deny):
        record.status = DISABLED
        record.error = f"disabled by {env.PLUGINS_DENY if deny and ep.name in deny else env.PLUGINS_ALLOW}"
        return record
    try:
        plugin = ep.load()
    except Exception as err:  # noqa: BLE001 - any import failure is recorded
        _fail(record, FAILED, f"import of {ep.value!r} failed: {type(err).__name__}: {err}\n"
              + traceback.format_exc(limit=-3))
        return record
    why = api_incompatibility(getattr(plugin, API_ATTRIBUTE, None), ep.value)
    if why is not None:
        _fail(record, INCOMPATIBLE, why)
        return record
    try:
        pm.register(plugin, name=f"{record.distribution}:{ep.name}")
        pm.check_pending()
        _collect(pm, plugin, record)
    except Exception as err:  # noqa: BLE001 - validation failures are recorded
        if pm.is_registered(plugin):
            pm.unregister(plugin)
        _fail(record, FAILED, f"{type(err).__name__}: {err}")
    return record


def _claims(record: PluginRecord) -> list[tuple[str, str]]:
    """(category, name) of every name a loaded plugin claims."""
    return [
        (category, name)
        for category, names in (
            ("target backend", record.backends),
            ("execution backend", record.execution_backends),
            ("target detector", record.detectors),
            ("language extension", record.language_extensions),
            ("kernel router", record.kernel_routers),
            ("target alias", record.aliases()),
        )
        for name in names
    ]


def _who(record: PluginRecord) -> str:
    return f"{record.distribution} {record.version} (entry point {record.name!r})"


def _refuse_reserved(records: Iterable[PluginRecord]) -> None:
    """A third party claiming a first-party name is refused; the first party keeps it."""
    for record in records:
        if record.status != LOADED or is_first_party(record.distribution):
            continue
        for category, name in [("entry point", record.name), *_claims(record)]:
            owner = reserved_owner(name)
            if owner is not None:
                _fail(record, CONFLICT,
                      f"{category} {name!r} is reserved for the first-party distribution {owner}; "
                      f"{_who(record)} claims it, so it is not used and {owner} keeps the name "
                      f"(to fix: rename it in {record.distribution})")
                break


def _resolve_conflicts(records: list[PluginRecord]) -> None:
    _refuse_reserved(records)
    claims: dict[tuple[str, str], list[PluginRecord]] = {}
    for record in records:
        if record.status == LOADED:
            for claim in _claims(record):
                claims.setdefault(claim, []).append(record)
    for (category, name), owners in sorted(claims.items()):
        live = [r for r in owners if r.status == LOADED]
        if len(live) < 2:
            continue
        first = [r for r in live if is_first_party(r.distribution)]
        if len(first) == 1:
            # a built-in is never switched off by a name clash with a third party
            for record in live:
                if record is not first[0]:
                    _fail(record, CONFLICT,
                          f"{category} {name!r} belongs to the first-party {_who(first[0])} and is "
                          f"claimed by {_who(record)} too; {first[0].distribution} keeps it and "
                          f"{record.distribution} is not used (to fix: rename it in {record.distribution})")
            continue
        who = " and ".join(_who(r) for r in live)
        for record in live:
            _fail(record, CONFLICT, f"{category} {name!r} is claimed by {who}; neither is used")


def _publish(record: PluginRecord) -> None:
    """Register everything the plugin contributed, or nothing: a failure part-way removes
    what this plugin had registered already."""
    c, dist, version, ep = record.contributions, record.distribution, record.version, record.name
    published: list[tuple[dict[Any, Any], Any]] = []  # (registry table, key) to roll back
    try:
        for module in c["tilelang_backend_modules"]:
            register_backend(module, distribution=dist, version=version, entry_point=ep)
            key = ("backend", module.name)
            published += [(REGISTRY.backends, module.name), (REGISTRY.origins, key), (REGISTRY.entry_points, key)]
        for backend in c["tilelang_execution_backends"]:
            register_execution_backend(backend, distribution=dist, version=version, entry_point=ep)
            key = ("execution", backend.name)
            published += [(REGISTRY.execution_backends, backend.name), (REGISTRY.origins, key),
                          (REGISTRY.entry_points, key)]
        for detector in c["tilelang_target_detectors"]:
            REGISTRY.detectors[detector.name] = detector
            REGISTRY.origins[("detector", detector.name)] = (dist, version)
            published += [(REGISTRY.detectors, detector.name), (REGISTRY.origins, ("detector", detector.name))]
        for router in c["tilelang_kernel_routers"]:
            REGISTRY.kernel_routers[router.name] = router
            REGISTRY.origins[("router", router.name)] = (dist, version)
            published += [(REGISTRY.kernel_routers, router.name), (REGISTRY.origins, ("router", router.name))]
        for name, ref in c["tilelang_language_extensions"]:
            REGISTRY.language_extensions[name] = ref
            published.append((REGISTRY.language_extensions, name))
    except BaseException:
        for table, key in reversed(published):
            table.pop(key, None)
        raise


def _record_refusals(records: Iterable[PluginRecord]) -> None:
    """Write why each unused plugin's names are missing, for later error messages."""
    for record in records:
        if record.status == LOADED:
            continue
        names = {record.name, *record.backends, *record.execution_backends, *record.aliases()}
        names |= {f"kind:{k}" for m in record.contributions.get("tilelang_backend_modules", ())
                  for k in m.target_kinds}
        for name in sorted(names):
            REGISTRY.refused.setdefault(name, []).append(record.headline())


def _raise_strict(records: Iterable[PluginRecord]) -> None:
    failed = [r for r in records if r.status in (FAILED, CONFLICT, INCOMPATIBLE)]
    if not failed:
        return
    error = PluginError("\n".join(r.headline() for r in failed))
    module = sys.modules.get("tilelang")
    if getattr(getattr(module, "__spec__", None), "_initializing", False):
        _report_without_traceback(error)
    raise error


def _report_without_traceback(error: PluginError) -> None:
    """During ``import tilelang`` (the ``tilelang`` console script imports it before any
    command can catch anything), print this one error as its lines, no traceback, if
    nothing catches it; every other exception keeps the usual report."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: Any) -> None:
        if value is error:
            sys.stderr.write(f"tilelang: {env.PLUGINS_STRICT} is set and plugins failed:\n{value}\n")
            return
        previous(kind, value, tb)

    sys.excepthook = hook


def load_plugins(*, force: bool = False) -> list[PluginRecord]:
    """Load every entry point once (again with force=True, after clearing the registry)."""
    global _loaded

    if _loaded and not force:
        return plugin_records()
    REGISTRY.clear()
    _records.clear()
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    records = [_load_one(pm, ep) for ep in _entry_points()]
    _resolve_conflicts(records)
    for record in records:
        if record.status == LOADED:
            try:
                _publish(record)
            except Exception as err:  # noqa: BLE001
                _fail(record, FAILED, f"{type(err).__name__}: {err}")
    _record_refusals(records)
    _records.extend(records)
    _loaded = True
    if env.flag(env.PLUGINS_STRICT):
        _raise_strict(records)
    return plugin_records()

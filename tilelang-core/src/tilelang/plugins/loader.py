"""Loading plugins from the ``tilelang.plugins`` entry-point group.

Order: entry points sorted by (entry-point name, distribution name). Every plugin is
imported and asked for its contributions first; then names claimed by two plugins are
resolved (neither plugin is used, and the record names both); then the rest is published
to the registry in the same sorted order. A plugin that fails never breaks
``import tilelang``: it is recorded with its error, unless strict mode asks to raise.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from .. import env
from ..errors import ManifestError, PluginError
from . import hookspecs

log = logging.getLogger("tilelang.plugins")

ENTRY_POINT_GROUP = "tilelang.plugins"
#: The plugin API this core implements. A plugin declares the API it was written against
#: as a module attribute ``TILELANG_PLUGIN_API``; a different major version is refused.
PLUGIN_API_VERSION = 1

LOADED, FAILED, DISABLED, CONFLICT, INCOMPATIBLE = "loaded", "failed", "disabled", "conflict", "incompatible"


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
    contributions: dict[str, list[Any]] = field(default_factory=dict, repr=False)


_records: list[PluginRecord] = []
_manager: pluggy.PluginManager | None = None
_loaded = False


def plugin_records() -> list[PluginRecord]:
    """Records of every entry point seen by the last load, in load order."""
    return list(_records)


def _entry_points() -> list[Any]:
    # the standard library's importlib.metadata (Python >= 3.10 selects groups natively)
    from importlib.metadata import entry_points

    eps = entry_points(group=ENTRY_POINT_GROUP)
    unique = {}
    for ep in eps:
        dist = ep.dist.name if ep.dist is not None else ""
        unique.setdefault((ep.name, dist, ep.value), ep)  # one dist can be on sys.path twice
    return [unique[k] for k in sorted(unique)]


def _fail(record: PluginRecord, status: str, message: str, strict: bool) -> None:
    record.status, record.error = status, message
    log.warning("tilelang plugin %r (%s) %s: %s", record.name, record.distribution, status, message)
    if strict:
        raise PluginError(
            f"plugin {record.name!r} from {record.distribution} {record.version} {status}: {message}"
        )


def _collect(pm: pluggy.PluginManager, plugin: Any, record: PluginRecord) -> None:
    """Call this plugin's own hook implementations and validate what they return."""
    from ..backend import BackendModule, ExecutionBackend, TargetDetector
    from ..backend.execution_backend import validate_execution_backend

    expected = {
        "tilelang_backend_modules": BackendModule,
        "tilelang_execution_backends": ExecutionBackend,
        "tilelang_target_detectors": TargetDetector,
        "tilelang_kernel_routers": object,
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
    for category, names in (("target backend", record.backends), ("execution backend", record.execution_backends)):
        if len(set(names)) != len(names):
            raise ManifestError(f"it provides the {category} name(s) {names} more than once")


def _load_one(pm: pluggy.PluginManager, ep: Any, strict: bool) -> PluginRecord:
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
              + traceback.format_exc(limit=-3), strict)
        return record
    api = getattr(plugin, "TILELANG_PLUGIN_API", None)
    if api != PLUGIN_API_VERSION:
        _fail(record, INCOMPATIBLE,
              f"written for plugin API {api!r}, this tilelang-core implements {PLUGIN_API_VERSION} "
              "(set TILELANG_PLUGIN_API in the plugin module; upgrade the plugin or tilelang-core)",
              strict)
        return record
    try:
        pm.register(plugin, name=f"{record.distribution}:{ep.name}")
        pm.check_pending()
        _collect(pm, plugin, record)
    except Exception as err:  # noqa: BLE001 - validation failures are recorded
        if pm.is_registered(plugin):
            pm.unregister(plugin)
        _fail(record, FAILED, f"{type(err).__name__}: {err}", strict)
    return record


def _resolve_conflicts(records: Iterable[PluginRecord], strict: bool) -> None:
    claims: dict[tuple[str, str], list[PluginRecord]] = {}
    for record in records:
        if record.status != LOADED:
            continue
        for category, names in (
            ("target backend", record.backends),
            ("execution backend", record.execution_backends),
            ("target detector", record.detectors),
            ("language extension", record.language_extensions),
            ("target alias", tuple(a for m in record.contributions.get("tilelang_backend_modules", ())
                                   for a in m.aliases)),
        ):
            for name in names:
                claims.setdefault((category, name), []).append(record)
    for (category, name), owners in sorted(claims.items()):
        if len(owners) < 2:
            continue
        who = " and ".join(f"{r.distribution} {r.version} (entry point {r.name!r})" for r in owners)
        for record in owners:
            if record.status == LOADED:
                _fail(record, CONFLICT, f"{category} {name!r} is claimed by {who}; neither is used", strict)


def _publish(record: PluginRecord) -> None:
    """Register everything the plugin contributed, or nothing: a failure part-way removes
    what this plugin had registered already."""
    from ..backend.module import register_backend, register_execution_backend
    from ..backend.registry import REGISTRY

    c, dist, version = record.contributions, record.distribution, record.version
    published: list[tuple[dict[Any, Any], Any]] = []  # (registry table, key) to roll back
    try:
        for module in c["tilelang_backend_modules"]:
            register_backend(module, distribution=dist, version=version)
            published += [(REGISTRY.backends, module.name), (REGISTRY.origins, ("backend", module.name))]
        for backend in c["tilelang_execution_backends"]:
            register_execution_backend(backend, distribution=dist, version=version)
            published += [
                (REGISTRY.execution_backends, backend.name),
                (REGISTRY.origins, ("execution", backend.name)),
            ]
        for detector in c["tilelang_target_detectors"]:
            REGISTRY.detectors[detector.name] = detector
            published.append((REGISTRY.detectors, detector.name))
        for name, ref in c["tilelang_language_extensions"]:
            REGISTRY.language_extensions[name] = ref
            published.append((REGISTRY.language_extensions, name))
    except BaseException:
        for table, key in reversed(published):
            table.pop(key, None)
        raise


def load_plugins(*, force: bool = False) -> list[PluginRecord]:
    """Load every entry point once (again with force=True, after clearing the registry)."""
    global _loaded, _manager
    from ..backend.registry import REGISTRY

    if _loaded and not force:
        return plugin_records()
    strict = env.flag(env.PLUGINS_STRICT)
    REGISTRY.clear()
    _records.clear()
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    records = [_load_one(pm, ep, strict) for ep in _entry_points()]
    _resolve_conflicts(records, strict)
    for record in records:
        if record.status == LOADED:
            try:
                _publish(record)
            except Exception as err:  # noqa: BLE001
                _fail(record, FAILED, f"{type(err).__name__}: {err}", strict)
    _records.extend(records)
    _manager, _loaded = pm, True
    return plugin_records()

"""Plugins: one entry-point group, pluggy hookspecs, deterministic eager loading."""

from .hookspecs import hookimpl, hookspec
from .loader import (
    ENTRY_POINT_GROUP,
    PLUGIN_API_VERSION,
    PluginRecord,
    load_plugins,
    plugin_records,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGIN_API_VERSION",
    "PluginRecord",
    "hookimpl",
    "hookspec",
    "load_plugins",
    "plugin_records",
]

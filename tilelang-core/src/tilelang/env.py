"""Environment switches, read in one place so that they are documented together.

TILELANG_PLUGINS_STRICT=1        a plugin that fails to load raises instead of being recorded
TILELANG_PLUGINS_ALLOW=a,b       only these entry-point names load (core's built-ins included)
TILELANG_PLUGINS_DENY=a,b        these entry-point names never load
TILELANG_NO_PLUGIN_AUTOLOAD=1    `import tilelang` loads no entry points; call
                                 tilelang.plugins.load_plugins() or register by hand
TILELANG_CACHE_DIR=path          kernel cache location (default: the per-user cache dir)
TILELANG_DISABLE_CACHE=1         compile every time; read and write no cache entries
"""

from __future__ import annotations

import os


def flag(name: str) -> bool:
    """True when the variable is set to a true-looking value (1, true, yes, on)."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def name_list(name: str) -> frozenset[str] | None:
    """A comma-separated set of names, or None when the variable is unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


PLUGINS_STRICT = "TILELANG_PLUGINS_STRICT"
PLUGINS_ALLOW = "TILELANG_PLUGINS_ALLOW"
PLUGINS_DENY = "TILELANG_PLUGINS_DENY"
NO_PLUGIN_AUTOLOAD = "TILELANG_NO_PLUGIN_AUTOLOAD"
CACHE_DIR = "TILELANG_CACHE_DIR"
DISABLE_CACHE = "TILELANG_DISABLE_CACHE"

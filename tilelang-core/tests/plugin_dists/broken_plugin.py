"""A plugin whose import fails: the loader must record it, not break ``import tilelang``."""

raise ImportError("acme-sdk is not installed (broken_plugin needs it)")

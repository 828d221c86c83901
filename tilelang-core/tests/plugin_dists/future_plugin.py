"""A plugin written for a plugin API this tilelang-core does not implement."""

from tilelang.plugin import BackendModule, hookimpl

TILELANG_PLUGIN_API = "2.0"


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    raise AssertionError("an incompatible plugin's hooks must never be called")

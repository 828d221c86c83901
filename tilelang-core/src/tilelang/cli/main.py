"""The ``tilelang`` console script: a click group that later command groups attach to."""

from __future__ import annotations

import click

import tilelang
from tilelang import env
from tilelang.backend.registry import REGISTRY
from tilelang.errors import PluginError
from tilelang.plugins import load_plugins, plugin_records

from .backends import backends


def _ensure_plugins_loaded() -> None:
    """Load entry points if nothing has been loaded or registered yet.

    ``import tilelang`` loads them unless TILELANG_NO_PLUGIN_AUTOLOAD is set; the CLI reports
    what is installed, so it loads them then too (allow/deny lists still apply). It does not
    reload when something is registered already: reloading clears the registry and would
    drop backends registered by hand in this process.
    """
    if plugin_records() or REGISTRY.backends or REGISTRY.execution_backends:
        return
    try:
        load_plugins()
    except PluginError as err:  # strict mode: one line per plugin, no traceback
        raise click.ClickException(f"{env.PLUGINS_STRICT} is set and plugins failed:\n{err}") from err


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(tilelang.__version__, prog_name="tilelang")
def cli() -> None:
    """TileLang: a tile-level kernel language whose backends are plugins."""
    _ensure_plugins_loaded()


cli.add_command(backends)


def main() -> None:
    """Console-script entry point (``tilelang = "tilelang.cli.main:main"``)."""
    cli(prog_name="tilelang")

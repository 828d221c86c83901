"""In-process stand-ins for installed plugin distributions (test_coexistence.py and
test_routing.py): what ``tilelang.plugins.loader._entry_points`` yields, and plugin modules
built from hook functions, so loader tests need no venv; and ``dist_info``, an installed
distribution's metadata folder on disk (the cache-key tests)."""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilelang.plugins import hookimpl
from tilelang.plugins.api import PLUGIN_API_VERSION


@dataclass(frozen=True)
class FakeDist:
    name: str
    version: str = "1.0"


@dataclass(frozen=True)
class FakeEntryPoint:
    """What loader._entry_points yields: name, value, dist and load()."""

    name: str
    dist: FakeDist
    module: types.ModuleType | None  # None: importing it fails

    @property
    def value(self) -> str:
        return f"fake_{self.name}"

    def load(self) -> Any:
        if self.module is None:
            raise ImportError(f"{self.value} needs an SDK that is not installed")
        return self.module


def plugin(name: str, api: object = PLUGIN_API_VERSION, **hooks: Callable[[], Any]) -> types.ModuleType:
    """A plugin module: TILELANG_PLUGIN_API (left out when api is None) and hook functions."""
    module = types.ModuleType(f"fake_{name}")
    if api is not None:
        module.TILELANG_PLUGIN_API = api
    for hook_name, function in hooks.items():
        setattr(module, hook_name, hookimpl(function))
    return module


def dist_info(site: Path, name: str, record: list[str], direct_url: dict | None = None) -> Path:
    """``<site>/<name>-1.0.dist-info`` with METADATA, ``record`` (plus its own line) as
    RECORD and, given, direct_url.json (an editable install's)."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    (info / "RECORD").write_text("\n".join([*record, f"{info.name}/RECORD,,"]) + "\n")
    return info

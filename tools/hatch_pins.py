"""Hatchling metadata hook shared by every first-party distribution in this repository.

One version source: ``tilelang-core/src/tilelang/_version.py``. Each distribution's
``pyproject.toml`` declares ``dynamic = ["version", "dependencies", "optional-dependencies"]``
and lists its requirements under ``[tool.tilelang]``; first-party names listed there get an
exact ``==<version>`` pin here, third-party requirements keep their ranges. A first-party
requirement whose distribution has no folder in this repository yet (``tilelang-cutedsl``
until it lands) is left out, and an extra left with nothing is not offered: pip would
otherwise look the name up on an index.
"""

from __future__ import annotations

import re
from pathlib import Path

from hatchling.metadata.plugin.interface import MetadataHookInterface

REPO = Path(__file__).resolve().parent.parent
VERSION_FILE = REPO / "tilelang-core" / "src" / "tilelang" / "_version.py"
FIRST_PARTY = re.compile(r"^tilelang(-[a-z0-9-]+)?$")


def read_version() -> str:
    match = re.search(r'__version__\s*=\s*"([^"]+)"', VERSION_FILE.read_text())
    if match is None:
        raise RuntimeError(f"no __version__ in {VERSION_FILE}")
    return match.group(1)


def pin(requirement: str, version: str) -> str:
    """Pin a bare first-party name (optionally with extras) to the repository version."""
    name = re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0]
    if FIRST_PARTY.match(name) and requirement.strip() == requirement.split(";")[0].strip():
        if not re.search(r"[<>=!~]", requirement):
            return f"{requirement}=={version}"
    return requirement


def present(requirement: str) -> bool:
    """False for a first-party distribution that this repository does not hold (yet)."""
    name = re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0]
    return name == "tilelang" or not FIRST_PARTY.match(name) or (REPO / name / "pyproject.toml").is_file()


class TileLangPinsHook(MetadataHookInterface):
    PLUGIN_NAME = "custom"

    def update(self, metadata: dict) -> None:
        version = read_version()
        config = self.config
        metadata["version"] = version
        metadata["dependencies"] = [pin(r, version) for r in config.get("dependencies", []) if present(r)]
        extras = {extra: [pin(r, version) for r in reqs if present(r)]
                  for extra, reqs in config.get("optional-dependencies", {}).items()}
        metadata["optional-dependencies"] = {extra: reqs for extra, reqs in extras.items() if reqs}

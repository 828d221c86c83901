"""Building one of this repository's distributions as a wheel and reading it back, for
tests that check what a wheel ships (files, entry points, pinned requirements)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WheelContents:
    names: list[str]  # every path in the archive
    metadata: str  # the METADATA file
    entry_points: str  # entry_points.txt

    @property
    def package_files(self) -> list[str]:
        return [n for n in self.names if ".dist-info/" not in n]


def build_wheel(dist_dir: Path, out_dir: Path) -> WheelContents:
    """``pip wheel --no-deps --no-build-isolation`` of ``dist_dir`` (hatchling must be
    installed), then the built wheel's contents."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out_dir), str(dist_dir)], check=True)
    (wheel,) = out_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        return WheelContents(names, archive.read(info).decode(),
                             archive.read(info.replace("METADATA", "entry_points.txt")).decode())

"""Installs resolve to this project: upstream TileLang publishes ``tilelang`` 0.1.x on PyPI,
so with an index reachable pip must still take this repository's wheels (the epoch in
``tilelang/_version.py`` makes them newer than every upstream release), and the meta
distribution offers no extra whose distribution this repository does not hold.

These tests build every first-party wheel (``pip wheel --no-deps``, a few seconds) and ask
pip what a clean venv would install (``--dry-run --report``). They need the index: without
it they skip, except in CI, where they fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
import tilelang

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = [REPO, *sorted(p.parent for p in REPO.glob("tilelang-*/pyproject.toml"))]
# extra of the meta distribution -> the distribution it installs (root pyproject.toml)
EXTRAS = {"cuda": "tilelang-cuda", "rocm": "tilelang-rocm", "cutedsl": "tilelang-cutedsl",
          "nvrtc": "tilelang-exec-nvrtc", "cython": "tilelang-exec-cython"}


@pytest.fixture(scope="module")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(out), *map(str, DISTRIBUTIONS)], check=True)
    return out


@pytest.fixture(scope="module")
def clean_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with nothing installed (not even pip: this pip resolves for it via --python)."""
    root = tmp_path_factory.mktemp("clean-venv")
    venv.create(root, with_pip=False)
    return root / "bin" / "python"


def dry_run(python: Path, report: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--dry-run",
                           "--quiet", "--report", str(report), *args], capture_output=True, text=True, check=False)


def installs(report: Path) -> dict[str, tuple[str, str]]:
    data = json.loads(report.read_text())
    return {item["metadata"]["name"].lower(): (item["metadata"]["version"], item["download_info"]["url"])
            for item in data["install"]}


@pytest.fixture(scope="module")
def upstream(clean_python: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Upstream's newest epoch-0 ``tilelang`` as the index offers it (the control: without
    it the other tests would prove nothing)."""
    report = tmp_path_factory.mktemp("upstream") / "report.json"
    result = dry_run(clean_python, report, "--no-deps", "tilelang<1!0")
    if result.returncode != 0:
        message = f"no package index reachable for pip (upstream's tilelang not found):\n{result.stderr}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    ((version, _url),) = installs(report).values()
    return version


def test_extras_resolve_to_this_projects_wheels_with_pypi_reachable(
        wheel_dir: Path, clean_python: Path, upstream: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = dry_run(clean_python, report, "--find-links", str(wheel_dir), "tilelang[cuda,nvrtc]")
    assert result.returncode == 0, result.stderr
    ours = {name: found for name, found in installs(report).items() if name.startswith("tilelang")}
    assert sorted(ours) == ["tilelang", "tilelang-core", "tilelang-cuda", "tilelang-exec-nvrtc"], (
        f"pip chose {ours} (upstream's newest: {upstream})")
    for name, (version, url) in ours.items():
        assert version == tilelang.__version__, f"{name} {version} from {url}: not this repository's"
        assert url.startswith(wheel_dir.as_uri()), f"{name} came from {url}, not the wheel dir"


def test_an_upstream_version_pin_gets_upstreams_release(wheel_dir: Path, clean_python: Path, upstream: str,
                                                         tmp_path: Path) -> None:
    # the converse: a pin on upstream's numbering keeps meaning upstream's release
    report = tmp_path / "report.json"
    result = dry_run(clean_python, report, "--no-deps", "--find-links", str(wheel_dir), "tilelang==0.1.0")
    assert result.returncode == 0, result.stderr
    version, url = installs(report)["tilelang"]
    assert version == "0.1.0" and not url.startswith(wheel_dir.as_uri())


def test_meta_distribution_offers_only_extras_whose_distribution_exists(wheel_dir: Path) -> None:
    (wheel,) = wheel_dir.glob("tilelang-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith("/METADATA"))).decode()
    offered = set(re.findall(r"^Provides-Extra: (\S+)$", metadata, re.MULTILINE))
    present = {extra for extra, dist in EXTRAS.items() if (REPO / dist / "pyproject.toml").is_file()}
    # ray, vis: tilelang-core[ray] (the autotuner's RayExecutor), tilelang-core[vis] (plot_layout)
    assert offered == present | {"all", "ray", "vis"}
    required = set(re.findall(r"^Requires-Dist: (tilelang[a-z0-9-]*)", metadata, re.MULTILINE))
    assert required == {"tilelang-core"} | {EXTRAS[extra] for extra in present}
    for line in re.findall(r"^Requires-Dist: tilelang.*$", metadata, re.MULTILINE):
        assert f"=={tilelang.__version__}" in line, line

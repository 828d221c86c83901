"""The installed-distributions environment of test_plugins.py (the venv, the throwaway
plugin distributions, the scripts the tests run in it and the session fixtures).

Plugin loading end to end, through real installed distributions.

Once per session this builds a temporary venv, installs tilelang-core into it (a real,
non-editable wheel install) and the throwaway plugin distributions described by
``PLUGIN_DISTS``, each generated in a temporary directory from a module under
``plugin_dists/`` and a hatchling ``pyproject.toml``. Every test then runs Python (or the
installed ``tilelang`` console script) in that venv in a subprocess; the environment
switches TILELANG_PLUGINS_ALLOW / _DENY / _STRICT / TILELANG_NO_PLUGIN_AUTOLOAD select
what loads, so one venv serves every case.

Why not ``python -m venv --system-site-packages``: the dev environment is usually a venv
itself, and a venv's "system site" is the base interpreter's, without apache-tvm. Instead
the temp venv sees the dev environment's site-packages through a directory of symlinks
that leaves out every ``tilelang*`` distribution (and editable-install hooks), so the only
tilelang in the temp venv is the one installed here.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sysconfig
import textwrap
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
CORE = TESTS.parent
DIST_SOURCES = TESTS / "plugin_dists"

#: subprocess time limit (s); a compile takes about a second
TIMEOUT = 180


@dataclass(frozen=True)
class PluginDist:
    """One throwaway distribution: one module, one ``tilelang.plugins`` entry point."""

    distribution: str
    version: str
    source: str  # file name under plugin_dists/ (without .py)
    module: str  # module name it is installed as
    entry_point: str

    def pyproject(self) -> str:
        return textwrap.dedent(
            f"""\
            [build-system]
            requires = ["hatchling>=1.21"]
            build-backend = "hatchling.build"

            [project]
            name = "{self.distribution}"
            version = "{self.version}"
            requires-python = ">=3.10"
            # a vendor pins a range of tilelang-core (installed with --no-deps here)
            dependencies = ["tilelang-core>=0.1,<1"]

            [project.entry-points."tilelang.plugins"]
            {self.entry_point} = "{self.module}"

            [tool.hatch.build.targets.wheel]
            include = ["{self.module}.py"]
            """
        )

    def write(self, root: Path) -> Path:
        project = root / self.distribution
        project.mkdir(parents=True)
        (project / "pyproject.toml").write_text(self.pyproject())
        shutil.copyfile(DIST_SOURCES / f"{self.source}.py", project / f"{self.module}.py")
        return project


# dup-plugin-b is listed (and installed) before dup-plugin-a: load order must not care.
PLUGIN_DISTS = (
    PluginDist("tilelang-acme", "1.2.3", "acme_backend", "acme_backend", "acme"),
    PluginDist("broken-plugin", "0.1.0", "broken_plugin", "broken_plugin", "broken"),
    PluginDist("dup-plugin-b", "1.0.0", "dup_backend", "dup_backend_b", "dup"),
    PluginDist("dup-plugin-a", "1.0.0", "dup_backend", "dup_backend_a", "dup"),
    PluginDist("future-plugin", "9.0.0", "future_plugin", "future_plugin", "future"),
    PluginDist("halfway-plugin", "0.0.1", "halfway_plugin", "halfway_plugin", "halfway"),
    PluginDist("tilelang-exec-launchlog", "0.3.0", "launch_log_exec", "launch_log_exec", "launch_log"),
    PluginDist("squatter-plugin", "6.6.6", "squatter_plugin", "squatter_plugin", "squat"),
)

_DEV_ONLY = ("tilelang", "_editable_impl_tilelang", "__editable__.tilelang", "__editable___tilelang")


def _shadow_dev_site(shadow: Path) -> None:
    """Symlink every entry of this environment's site-packages except tilelang's own."""
    shadow.mkdir()
    paths = sysconfig.get_paths()
    for site_dir in dict.fromkeys((paths["purelib"], paths["platlib"])):
        for entry in sorted(Path(site_dir).iterdir()):
            target = shadow / entry.name
            if entry.name.lower().startswith(_DEV_ONLY) or target.exists():
                continue
            target.symlink_to(entry)


class PluginVenv:
    """A temporary venv with tilelang-core and PLUGIN_DISTS installed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.venv = root / "venv"
        self.bin = self.venv / ("Scripts" if os.name == "nt" else "bin")
        self.python = self.bin / "python"
        self.workdir = root / "work"  # neutral cwd: nothing importable next to it
        self.cache = root / "kernel-cache"
        self._scripts = itertools.count()

    def create(self) -> None:
        self.workdir.mkdir()
        shadow = self.root / "dev-site"
        _shadow_dev_site(shadow)
        venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(self.venv)
        purelib = self._check_output("import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
        # addsitedir, unlike a plain path line, also runs the .pth files found there
        (Path(purelib) / "_tilelang_test_dev_site.pth").write_text(
            f"import site; site.addsitedir({str(shadow)!r})\n"
        )
        if importlib.util.find_spec("hatchling") is None:
            # --no-build-isolation builds with the venv's own hatchling; an environment
            # without it (tilelang-core[test] does not list it) gets it from the index
            self.pip_install("hatchling>=1.21")
        projects = [dist.write(self.root / "dists") for dist in PLUGIN_DISTS]
        self.pip_install("--no-deps", "--no-build-isolation", str(CORE), *map(str, projects))

    def environ(self, **overrides: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("TILELANG_") and k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
        }
        env.update(
            PATH=f"{self.bin}{os.pathsep}{env.get('PATH', '')}",
            PYTHONNOUSERSITE="1",
            TILELANG_CACHE_DIR=str(self.cache),
        )
        env.update(overrides)
        return env

    def _check_output(self, code: str) -> str:
        return subprocess.run(
            [str(self.python), "-c", code], check=True, capture_output=True, text=True,
            env=self.environ(), cwd=self.root, timeout=TIMEOUT,
        ).stdout

    def pip_install(self, *args: str) -> None:
        cmd = [str(self.python), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
               "--quiet", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, env=self.environ(),
                              cwd=self.root, timeout=TIMEOUT)
        if done.returncode != 0:
            pytest.fail(f"pip install failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    def run(self, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, capture_output=True, text=True, env=self.environ(**env),
                              cwd=self.workdir, timeout=TIMEOUT)

    def python_json(self, *code: str, **env: str) -> Any:
        """Run the code blocks in the venv, in order; the last must print one JSON value."""
        # a file, not -c: TVMScript parses kernels from their source
        script = self.workdir / f"script_{next(self._scripts)}.py"
        script.write_text("\n".join(textwrap.dedent(block) for block in code))
        done = self.run([str(self.python), str(script)], **env)
        assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        return json.loads(done.stdout.strip().splitlines()[-1])

    def backends_list(self, **env: str) -> dict[str, Any]:
        """``tilelang backends list --json`` through the installed console script."""
        done = self.run([str(self.bin / "tilelang"), "backends", "list", "--json"], **env)
        assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        return json.loads(done.stdout)


def make_plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    env = PluginVenv(tmp_path_factory.mktemp("plugin-venv"))
    env.create()
    return env


# Prints what the loader did: every record in load order and the registry's contents.
STATE = """
import json
import tilelang
from tilelang.backend import registered_backends, registered_execution_backends
from tilelang.plugins import plugin_records

def state():
    return {
        "records": [
            {"name": r.name, "distribution": r.distribution, "version": r.version,
             "status": r.status, "error": r.error, "backends": list(r.backends)}
            for r in plugin_records()
        ],
        "backends": sorted(registered_backends()),
        "execution_backends": sorted(registered_execution_backends()),
    }
"""

# A small elementwise kernel (the language surface of upstream TileLang).
KERNEL = """
import numpy as np
import tilelang.language as T

def add_kernel(M, N, block=32):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=128) as bx:
            for i, j in T.Parallel(block, N):
                if bx * block + i < M:
                    C[bx * block + i, j] = A[bx * block + i, j] + B[bx * block + i, j]
    return main

def run_add(**compile_options):
    kernel = tilelang.compile(add_kernel(100, 24), out_idx=[-1], **compile_options)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((100, 24), dtype=np.float32)
    b = rng.standard_normal((100, 24), dtype=np.float32)
    c = kernel(a, b)
    return kernel, float(np.abs(np.asarray(c) - (a + b)).max())
"""

EXPECTED_ORDER = [
    ("acme", "tilelang-acme"),
    ("broken", "broken-plugin"),
    ("cpu", "tilelang-core"),
    ("dup", "dup-plugin-a"),
    ("dup", "dup-plugin-b"),
    ("future", "future-plugin"),
    ("halfway", "halfway-plugin"),
    ("launch_log", "tilelang-exec-launchlog"),
    ("squat", "squatter-plugin"),
    ("tvm_ffi", "tilelang-core"),
]


def loader_state(plugin_venv: PluginVenv) -> dict[str, Any]:
    """The loader's outcome with no environment switches set (every plugin tried)."""
    return plugin_venv.python_json(STATE, "print(json.dumps(state()))")


def _records(state: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [r for r in state["records"] if r["name"] == name]


def _one(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [item for item in items if item["name"] == name]
    assert len(found) == 1, f"expected one entry named {name!r} in {items}"
    return found[0]



"""`tilelang backends list/show`: what users and scripts read about installed backends.

The JSON form is a contract for scripts (schema in tilelang.cli.report), so most checks go
through it; the table and `show` are checked for the facts a user looks for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import tilelang
from click.testing import CliRunner
from tilelang.backend import (
    BackendModule,
    ExecutionBackend,
    ExecutionBackendSpec,
    register_backend,
    register_execution_backend,
)
from tilelang.backend.registry import REGISTRY
from tilelang.cli.main import cli
from tilelang.plugins import PluginRecord, loader

CORE = "tilelang-core"


def invoke(*args: str) -> Any:
    # A wide console keeps rich from wrapping table cells, so substrings can be checked.
    return CliRunner().invoke(cli, ["backends", *args], env={"COLUMNS": "250"})


def list_json() -> dict[str, Any]:
    result = invoke("list", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in entries}


def _hand_made_backend(name: str, unavailable_reason: Any) -> BackendModule:
    """A manifest like tilelang/cpu/backend.py's, for a kind no target ever has."""
    return BackendModule(
        name=name,
        target_kinds=("cli_test_kind",),
        pipelines={"cli_test_kind": "tilelang.cpu.pipeline:CPU_PIPELINE"},
        device_codegens={"cli_test_kind": "tilelang.cpu.codegen:CPU_DEVICE_CODEGEN"},
        execution_backends=(ExecutionBackendSpec("tvm_ffi"), ExecutionBackendSpec("cli_missing")),
        unavailable_reason=unavailable_reason,
        description="registered by test_cli",
    )


@pytest.fixture
def hand_registered() -> Iterator[None]:
    """Two hand-registered target backends: one says why not, one's probe raises."""

    def boom() -> str | None:
        raise RuntimeError("probe exploded")

    register_backend(_hand_made_backend("cli_unavailable", lambda: "needs the [acme] SDK"))
    register_backend(_hand_made_backend("cli_raising", boom))
    try:
        yield
    finally:
        REGISTRY.backends.pop("cli_unavailable", None)
        REGISTRY.backends.pop("cli_raising", None)


def test_list_json_reports_core_builtins_available() -> None:
    data = list_json()
    assert data["tilelang_version"] == tilelang.__version__
    cpu = by_name(data["target_backends"])["cpu"]
    assert cpu["distribution"] == CORE and cpu["version"] == tilelang.__version__
    assert cpu["status"] == "available" and cpu["reason"] is None
    assert cpu["target_kinds"] == ["llvm", "c"]
    assert cpu["execution_backends"] == ["tvm_ffi", "cython"]
    tvm_ffi = by_name(data["execution_backends"])["tvm_ffi"]
    assert tvm_ffi["distribution"] == CORE
    assert (tvm_ffi["status"], tvm_ffi["reason"]) == ("available", None)
    assert "cpu" in tvm_ffi["used_by"]
    plugins = by_name(data["plugins"])
    assert plugins["cpu"]["status"] == "loaded" and plugins["cpu"]["backends"] == ["cpu"]
    assert plugins["tvm_ffi"]["execution_backends"] == ["tvm_ffi"]
    auto = data["auto_target"]
    assert auto["detector"] is not None and auto["backend"] is not None and auto["error"] is None


def test_list_json_keys_are_stable() -> None:
    data = list_json()
    assert set(data) == {
        "tilelang_version", "checked", "auto_target", "target_backends", "execution_backends",
        "plugins", "missing",
    }
    assert set(data["auto_target"]) == {"target", "resolved", "detector", "backend", "error"}
    backend_keys = {
        "name", "distribution", "version", "target_kinds", "execution_backends",
        "status", "reason", "description", "entry_point",
    }
    assert set(data["target_backends"][0]) == backend_keys | {"accepts_external_execution_backends"}
    assert set(data["execution_backends"][0]) == backend_keys | {"used_by", "serves"}
    assert set(data["plugins"][0]) == {
        "name", "distribution", "version", "value", "status", "error",
        "backends", "execution_backends", "detectors", "language_extensions",
    }


@pytest.mark.parametrize("no_autoload", ["", "1"])
def test_list_json_through_python_dash_m(no_autoload: str) -> None:
    """Also with autoload off: the CLI reports what is installed, so it loads entry points."""
    env = {**os.environ, "TILELANG_NO_PLUGIN_AUTOLOAD": no_autoload}
    proc = subprocess.run(
        [sys.executable, "-m", "tilelang", "backends", "list", "--json"],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert by_name(data["target_backends"])["cpu"]["distribution"] == CORE
    assert by_name(data["execution_backends"])["tvm_ffi"]["status"] == "available"


def test_list_table_shows_rows_and_auto_target() -> None:
    result = invoke("list", "--probe")  # (without it, the CPU's detector answers only once TVM is imported)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert any(line.split()[:2] == ["target", "cpu"] and "available" in line for line in lines)
    assert any(line.split()[:2] == ["execution", "tvm_ffi"] for line in lines)
    assert 'target="auto" resolves to' in result.stdout


def test_show_cpu_prints_kinds_and_components() -> None:
    result = invoke("show", "cpu")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "target backend 'cpu'" in out
    assert "target kinds: llvm, c" in out
    assert "llvm: tilelang.cpu.pipeline:CPU_PIPELINE" in out
    assert "c: tilelang.cpu.codegen:C_HOST_CODEGEN" in out
    assert "aliases: cpu" in out
    assert "1. tvm_ffi: from tilelang-core" in out
    assert "plugin entry point 'cpu'" in out  # the entry point of the same name


def test_show_execution_backend() -> None:
    result = invoke("show", "tvm_ffi")
    assert result.exit_code == 0, result.output
    assert "execution backend 'tvm_ffi'" in result.stdout
    assert "used by target backends: cpu" in result.stdout


def test_show_unknown_name_exits_2_and_lists_known_names() -> None:
    result = invoke("show", "no_such_backend")
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(
        "Error: no target backend, execution backend or plugin named 'no_such_backend'; "
        "known names: "
    )
    known = result.stderr.strip().split("known names: ", 1)[1].split(", ")
    assert {"cpu", "tvm_ffi"} <= set(known)


@pytest.mark.usefixtures("hand_registered")
def test_hand_registered_unavailable_backend() -> None:
    entries = by_name(list_json()["target_backends"])
    entry = entries["cli_unavailable"]
    assert entry["status"] == "unavailable"
    assert entry["reason"] == "needs the [acme] SDK"
    assert entry["distribution"] == "<registered by hand>"
    assert entry["execution_backends"] == ["tvm_ffi", "cli_missing"]

    table = invoke("list")
    assert table.exit_code == 0, table.output
    # rich markup would swallow "[acme]": the reason must come through verbatim.
    assert "unavailable: needs the [acme] SDK" in table.stdout
    assert "cli_missing (not installed: install a distribution that registers it" in table.stdout

    show = invoke("show", "cli_unavailable")
    assert show.exit_code == 0, show.output
    assert "reason: needs the [acme] SDK" in show.stdout
    assert "plugin entry point: none (registered by hand)" in show.stdout
    assert "2. cli_missing: not installed" in show.stdout


@pytest.mark.usefixtures("hand_registered")
def test_raising_availability_probe_does_not_crash() -> None:
    entry = by_name(list_json()["target_backends"])["cli_raising"]
    assert entry["status"] == "unavailable"
    assert entry["reason"] == "availability check raised RuntimeError: probe exploded"
    table = invoke("list")
    assert table.exit_code == 0, table.output
    assert "unavailable: availability check raised RuntimeError: probe exploded" in table.stdout


class _RaisingExecutionBackend(ExecutionBackend):
    name = "cli_raising_exec"
    description = "registered by test_cli"

    def unavailable_reason(self) -> str | None:
        raise OSError("driver not found")

    def build(self, artifact: Any, context: Any) -> Any:
        raise NotImplementedError

    def load(self, artifact: Any, directory: Any, context: Any) -> Any:
        raise NotImplementedError


def test_raising_execution_backend_probe() -> None:
    register_execution_backend(_RaisingExecutionBackend())
    try:
        entry = by_name(list_json()["execution_backends"])["cli_raising_exec"]
    finally:
        REGISTRY.execution_backends.pop("cli_raising_exec", None)
    assert entry["status"] == "unavailable"
    assert entry["reason"] == "availability check raised OSError: driver not found"


def test_problem_plugins_get_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records that are not "loaded" show as plugin rows with the error's first line."""
    broken = PluginRecord(
        name="acme", distribution="tilelang-acme", version="9.9", value="tilelang_acme.plugin",
        status="failed",
        error="import of 'tilelang_acme.plugin' failed: ImportError: no acme\nTraceback ...",
    )
    off = PluginRecord(
        name="vendor_x", distribution="vendor-x", version="1.0", value="vendor_x",
        status="disabled", error="disabled by TILELANG_PLUGINS_DENY",
    )
    monkeypatch.setattr(loader, "_records", [*loader.plugin_records(), broken, off])
    table = invoke("list")
    assert table.exit_code == 0, table.output
    row = next(line for line in table.stdout.splitlines() if line.split()[:2] == ["plugin", "acme"])
    assert "failed: import of 'tilelang_acme.plugin' failed: ImportError: no acme" in row
    assert "Traceback" not in table.stdout
    assert "disabled: disabled by TILELANG_PLUGINS_DENY" in table.stdout

    plugins = by_name(list_json()["plugins"])
    assert plugins["acme"]["status"] == "failed"
    assert plugins["acme"]["error"].endswith("Traceback ...")

    show = invoke("show", "acme")
    assert show.exit_code == 0, show.output
    assert "status: failed" in show.stdout and "    Traceback ..." in show.stdout


def test_missing_first_party_backends_name_their_pip_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """An uninstalled first-party backend is named with the extra that installs it, in the
    footer and where a target backend lists it."""
    monkeypatch.setattr(REGISTRY, "execution_backends",
                        {k: v for k, v in REGISTRY.execution_backends.items() if k != "nvrtc"})
    monkeypatch.setattr(REGISTRY, "refused", {k: v for k, v in REGISTRY.refused.items() if k != "nvrtc"})
    register_backend(BackendModule(
        name="cli_wants_nvrtc",
        target_kinds=("cli_test_kind",),
        pipelines={"cli_test_kind": "tilelang.cpu.pipeline:CPU_PIPELINE"},
        device_codegens={"cli_test_kind": "tilelang.cpu.codegen:CPU_DEVICE_CODEGEN"},
        execution_backends=(ExecutionBackendSpec("nvrtc"),),
    ))
    try:
        data = list_json()
        table = invoke("list")
    finally:
        REGISTRY.backends.pop("cli_wants_nvrtc", None)
    assert {"name": "nvrtc", "install": "pip install 'tilelang[nvrtc]'"} in data["missing"]
    assert table.exit_code == 0, table.output
    assert "not installed: nvrtc (pip install 'tilelang[nvrtc]')" in table.stdout.splitlines()
    row = next(line for line in table.stdout.splitlines() if line.split()[:2] == ["target", "cli_wants_nvrtc"])
    assert "nvrtc (not installed: pip install 'tilelang[nvrtc]')" in row
    assert row.split()[2] == "-"  # registered by hand: no entry point

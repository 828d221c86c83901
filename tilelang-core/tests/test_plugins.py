"""Plugin loading end to end, through real installed distributions (the environment: a
temporary venv with tilelang-core installed from a wheel and throwaway plugin
distributions, is built once per session by ``plugin_venv.py``). Every test runs Python
(or the installed ``tilelang`` console script) in that venv in a subprocess; the
environment switches TILELANG_PLUGINS_ALLOW / _DENY / _STRICT / TILELANG_NO_PLUGIN_AUTOLOAD
select what loads, so one venv serves every case.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from plugin_venv import (
    EXPECTED_ORDER,
    KERNEL,
    STATE,
    PluginVenv,
    _one,
    _records,
    loader_state,
    make_plugin_venv,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def plugin_venv(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    return make_plugin_venv(tmp_path_factory)


@pytest.fixture(scope="session")
def default_state(plugin_venv: PluginVenv) -> dict[str, Any]:
    return loader_state(plugin_venv)


# -- load order -----------------------------------------------------------------------------


def test_plugins_load_in_entry_point_then_distribution_order(default_state: dict[str, Any]) -> None:
    order = [(r["name"], r["distribution"]) for r in default_state["records"]]
    assert order == EXPECTED_ORDER


def test_core_is_installed_as_a_real_distribution(plugin_venv: PluginVenv) -> None:
    found = plugin_venv.python_json(
        """
        import json, tilelang
        from importlib.metadata import distribution
        print(json.dumps([tilelang.__file__, distribution("tilelang-core").read_text("direct_url.json")]))
        """
    )
    assert Path(found[0]).is_relative_to(plugin_venv.venv), found[0]
    assert '"editable": true' not in (found[1] or ""), found[1]


# -- a vendor target backend ----------------------------------------------------------------


def test_vendor_backend_beside_the_cpu_compiles_and_runs_by_its_alias(plugin_venv: PluginVenv) -> None:
    # no TILELANG_PLUGINS_DENY: acme and core's cpu both own llvm, and the alias names acme
    result = plugin_venv.python_json(
        STATE, KERNEL, """
        kernel, error = run_add(target="acme")
        cpu_kernel, cpu_error = run_add(target="cpu")
        print(json.dumps({
            "module": kernel.context.module.name,
            "kind": kernel.context.target.kind.name,
            "execution_backend": kernel.context.execution_backend.name,
            "describe": kernel.describe(),
            "error": error,
            "cpu": [cpu_kernel.context.module.name, cpu_error],
            "state": state(),
        }))
        """,
    )
    assert result["module"] == "acme"
    assert result["kind"] == "llvm"
    assert result["execution_backend"] == "tvm_ffi"
    assert result["describe"] == (
        "main: target backend 'acme' (llvm, alias 'acme'), execution backend 'tvm_ffi' [tilelang-acme]"
    )
    assert result["error"] <= 1e-6  # an exact float32 add
    assert result["cpu"][0] == "cpu" and result["cpu"][1] <= 1e-6  # the CPU still works
    assert {"acme", "cpu"} <= set(result["state"]["backends"])


def test_vendor_detector_wins_auto_when_its_device_is_present(plugin_venv: PluginVenv) -> None:
    code = """
        kernel, error = run_add()
        print(json.dumps([kernel.context.module.name, kernel.context.target_source, error]))
        """
    module, source, error = plugin_venv.python_json(STATE, KERNEL, code, ACME_DEVICE="1")
    assert (module, source) == ("acme", "auto (acme)") and error <= 1e-6
    module, source, error = plugin_venv.python_json(STATE, KERNEL, code)
    assert (module, source) == ("cpu", "auto (cpu)") and error <= 1e-6


def test_vendor_backend_is_listed_by_the_cli(plugin_venv: PluginVenv) -> None:
    report = plugin_venv.backends_list()
    acme = _one(report["target_backends"], "acme")
    assert acme["distribution"] == "tilelang-acme"
    assert acme["version"] == "1.2.3"
    assert acme["entry_point"] == "acme"
    assert acme["status"] == "available"
    assert acme["target_kinds"] == ["llvm"]
    assert acme["execution_backends"] == ["tvm_ffi"]
    assert acme["description"] == "Acme's accelerator (a CPU in disguise)"
    assert _one(report["target_backends"], "cpu")["distribution"] == "tilelang-core"
    assert _one(report["execution_backends"], "tvm_ffi")["used_by"] == ["acme", "cpu"]


def test_two_backends_owning_one_kind_at_one_priority_are_ambiguous_by_kind(plugin_venv: PluginVenv) -> None:
    # acme and core's cpu both own "llvm" at priority 0: an explicit kind must fail, name
    # both and say how to choose; never silently pick one by registration order.
    result = plugin_venv.python_json(
        """
        import json, tilelang
        from tilelang.backend import create_backend_context
        try:
            create_backend_context("llvm")
        except tilelang.BackendNotFoundError as err:
            print(json.dumps(str(err)))
        """
    )
    assert re.fullmatch(
        r"target .*llvm.* is claimed by several target backends of priority 0: "
        r"acme \(from tilelang-acme, entry point acme\), cpu \(from tilelang-core, entry point cpu\)\. "
        r"Choose one: name it by its alias \(target='acme' or target='cpu'\), or leave the others "
        r"out with TILELANG_PLUGINS_DENY=<entry point> .*",
        result,
    ), result


# -- an execution backend from another distribution -------------------------------------------


def test_outside_execution_backend_serves_the_cpu(plugin_venv: PluginVenv) -> None:
    log = plugin_venv.root / "launches.log"
    result = plugin_venv.python_json(
        STATE, KERNEL, """
        kernel, error = run_add(target="cpu", execution_backend="launch_log")
        try:
            run_add(target="acme", execution_backend="launch_log")
        except tilelang.BackendNotFoundError as err:
            refused = str(err)
        print(json.dumps([kernel.context.execution_backend.name, error, refused]))
        """,
        LAUNCH_LOG=str(log),
    )
    name, error, refused = result
    assert name == "launch_log" and error <= 1e-6
    assert log.read_text() == "launch main\n"
    assert refused == (
        "target backend 'acme' cannot use execution backend 'launch_log'; it declares: tvm_ffi. "
        "'launch_log' (from tilelang-exec-launchlog) offers to serve it, but 'acme' does not accept "
        "execution backends from other distributions (its manifest's "
        "accepts_external_execution_backends is False)"
    )
    report = plugin_venv.backends_list()
    cpu = _one(report["target_backends"], "cpu")
    assert cpu["execution_backends"] == ["tvm_ffi", "cython", "launch_log"]
    assert cpu["accepts_external_execution_backends"] is True
    launch_log = _one(report["execution_backends"], "launch_log")
    assert launch_log["used_by"] == ["cpu"]
    assert launch_log["serves"] == [{"target_backends": ["cpu", "acme"], "target_kinds": []}]


# -- first-party names ---------------------------------------------------------------------------


def test_third_party_claiming_a_first_party_name_is_refused(default_state: dict[str, Any]) -> None:
    (squat,) = _records(default_state, "squat")
    assert squat["status"] == "conflict"
    assert squat["error"] == (
        "target backend 'cpu' is reserved for the first-party distribution tilelang-core; "
        "squatter-plugin 6.6.6 (entry point 'squat') claims it, so it is not used and "
        "tilelang-core keeps the name (to fix: rename it in squatter-plugin)"
    )
    (cpu,) = _records(default_state, "cpu")
    assert cpu["status"] == "loaded" and cpu["backends"] == ["cpu"]


# -- a plugin that fails to import ------------------------------------------------------------

BROKEN_ERROR = "import of 'broken_plugin' failed: ImportError: acme-sdk is not installed (broken_plugin needs it)"


def test_broken_plugin_is_recorded_and_import_tilelang_works(default_state: dict[str, Any]) -> None:
    (broken,) = _records(default_state, "broken")
    assert broken["status"] == "failed"
    assert broken["distribution"] == "broken-plugin"
    assert broken["error"].startswith(BROKEN_ERROR)
    assert "cpu" in default_state["backends"]  # the others still load
    assert "tvm_ffi" in default_state["execution_backends"]


def test_broken_plugin_is_logged_and_listed_by_the_cli(plugin_venv: PluginVenv) -> None:
    done = plugin_venv.run([str(plugin_venv.python), "-c", "import tilelang"])
    assert done.returncode == 0, done.stderr
    assert f"tilelang plugin 'broken' (broken-plugin) failed: {BROKEN_ERROR}" in done.stderr

    report = plugin_venv.backends_list()
    broken = _one(report["plugins"], "broken")
    assert broken["status"] == "failed"
    assert broken["distribution"] == "broken-plugin"
    assert broken["value"] == "broken_plugin"
    assert broken["error"].startswith(BROKEN_ERROR)


STRICT_ENV = {"TILELANG_PLUGINS_STRICT": "1", "TILELANG_PLUGINS_ALLOW": "cpu,tvm_ffi,broken"}
STRICT_MESSAGE = f"plugin 'broken' from broken-plugin 0.1.0 failed: {BROKEN_ERROR}"


def test_strict_mode_cli_prints_one_line_per_plugin_and_no_traceback(plugin_venv: PluginVenv) -> None:
    done = plugin_venv.run([str(plugin_venv.bin / "tilelang"), "backends", "list"],
                           TILELANG_PLUGINS_STRICT="1")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "tilelang: TILELANG_PLUGINS_STRICT is set and plugins failed:"
    assert lines[1] == STRICT_MESSAGE
    # one line per plugin that failed, in load order
    assert [line.split()[1] for line in lines[1:]] == ["'broken'", "'dup'", "'dup'", "'future'",
                                                      "'halfway'", "'squat'"]


def test_strict_mode_makes_import_tilelang_raise_plugin_error(plugin_venv: PluginVenv) -> None:
    result = plugin_venv.python_json(
        """
        import json
        try:
            import tilelang
        except Exception as err:
            print(json.dumps([type(err).__module__, type(err).__qualname__, str(err)]))
        else:
            print(json.dumps(None))
        """,
        **STRICT_ENV,
    )
    assert result is not None, "import tilelang did not raise in strict mode"
    module, name, message = result
    assert (module, name) == ("tilelang.errors", "PluginError")
    assert message.startswith(STRICT_MESSAGE)


def test_strict_mode_load_plugins_raises_plugin_error(plugin_venv: PluginVenv) -> None:
    result = plugin_venv.python_json(
        """
        import json, tilelang
        try:
            tilelang.load_plugins()
        except tilelang.PluginError as err:
            print(json.dumps(str(err)))
        """,
        TILELANG_NO_PLUGIN_AUTOLOAD="1",
        **STRICT_ENV,
    )
    assert result.startswith(STRICT_MESSAGE)


# -- two distributions claiming one name ------------------------------------------------------


def test_two_plugins_claiming_one_backend_name_are_both_refused(default_state: dict[str, Any]) -> None:
    records = _records(default_state, "dup")
    assert [r["distribution"] for r in records] == ["dup-plugin-a", "dup-plugin-b"]
    message = (
        "target backend 'dup' is claimed by dup-plugin-a 1.0.0 (entry point 'dup') and "
        "dup-plugin-b 1.0.0 (entry point 'dup'); neither is used"
    )
    for record in records:
        assert record["status"] == "conflict"
        assert record["error"] == message
    assert "dup" not in default_state["backends"]


# -- plugin API version ------------------------------------------------------------------------


def test_plugin_for_another_api_version_is_incompatible(default_state: dict[str, Any]) -> None:
    (future,) = _records(default_state, "future")
    assert future["status"] == "incompatible"  # and its hook (which raises) was never called
    assert future["error"] == (
        "written for plugin API 2.0, this tilelang-core implements 1.14 (the major versions "
        "differ); install a release of the plugin written for API 1.x, or a tilelang-core "
        "that implements 2.x"
    )
    assert future["backends"] == []


# -- a plugin that is only partly valid -------------------------------------------------------


def test_partly_invalid_plugin_registers_nothing(default_state: dict[str, Any]) -> None:
    (halfway,) = _records(default_state, "halfway")
    assert halfway["status"] == "failed"
    assert halfway["error"] == (
        "ManifestError: tilelang_execution_backends: execution backend name 'Half-Way' must be "
        "lower_snake_case"
    )
    assert "halfway" not in default_state["backends"]  # its valid target backend included
    assert "Half-Way" not in default_state["execution_backends"]


# -- environment switches --------------------------------------------------------------------


def test_deny_list_disables_the_tvm_ffi_execution_backend(plugin_venv: PluginVenv) -> None:
    result = plugin_venv.python_json(
        STATE, KERNEL, """
        try:
            run_add(target="cpu")
        except tilelang.BackendNotFoundError as err:
            error = str(err)
        else:
            error = None
        print(json.dumps({"state": state(), "error": error}))
        """,
        TILELANG_PLUGINS_DENY="tvm_ffi,acme,launch_log",
    )
    (tvm_ffi,) = _records(result["state"], "tvm_ffi")
    assert tvm_ffi["status"] == "disabled"
    assert tvm_ffi["error"] == "disabled by TILELANG_PLUGINS_DENY"
    assert result["state"]["execution_backends"] == []
    assert result["error"] is not None, "compiling without any execution backend did not raise"
    assert result["error"].startswith(
        "no usable execution backend for target backend 'cpu' (requested 'auto'; declared in "
        "order: tvm_ffi, cython): tvm_ffi: not installed (plugin 'tvm_ffi' from tilelang-core "
    )


def test_allow_list_disables_every_other_plugin(plugin_venv: PluginVenv) -> None:
    result = plugin_venv.python_json(
        STATE, KERNEL, """
        kernel, error = run_add()
        print(json.dumps({"state": state(), "module": kernel.context.module.name, "error": error}))
        """,
        TILELANG_PLUGINS_ALLOW="cpu,tvm_ffi",
    )
    statuses = {(r["name"], r["distribution"]): r["status"] for r in result["state"]["records"]}
    assert statuses == {
        key: "loaded" if key[0] in {"cpu", "tvm_ffi"} else "disabled" for key in EXPECTED_ORDER
    }
    for record in result["state"]["records"]:
        if record["status"] == "disabled":
            assert record["error"] == "disabled by TILELANG_PLUGINS_ALLOW"
    assert result["state"]["backends"] == ["cpu"]
    assert result["state"]["execution_backends"] == ["tvm_ffi"]
    # with acme disabled, "auto" is the CPU again and nothing is ambiguous
    assert result["module"] == "cpu"
    assert result["error"] <= 1e-6


def test_no_autoload_registers_nothing_until_load_plugins(plugin_venv: PluginVenv) -> None:
    result = plugin_venv.python_json(
        STATE, """
        before = state()
        tilelang.load_plugins()
        print(json.dumps({"before": before, "after": state()}))
        """,
        TILELANG_NO_PLUGIN_AUTOLOAD="1",
    )
    assert result["before"] == {"records": [], "backends": [], "execution_backends": []}
    after = result["after"]
    assert [(r["name"], r["distribution"]) for r in after["records"]] == EXPECTED_ORDER
    assert after["backends"] == ["acme", "cpu"]
    assert after["execution_backends"] == ["launch_log", "tvm_ffi"]

"""Coexistence rules, plugin API versions and strict mode, in process (the fast subset).

The loader reads entry points through ``loader._entry_points``; these tests replace it
with core's own entry points plus fake ones (a module object and a distribution name), so
that every rule of docs/architecture-notes.md item 27 runs in milliseconds. The same rules
run end to end through installed distributions in test_plugins.py (marked slow).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import tilelang
from click.testing import CliRunner
from fake_plugins import FakeDist, FakeEntryPoint, plugin
from tilelang import BackendNotFoundError, ManifestError, PluginError
from tilelang.backend import (
    BackendModule,
    ExecutionBackend,
    ExecutionBackendSpec,
    TargetDetector,
    create_backend_context,
    registered_backends,
)
from tilelang.backend.execution_backend import validate_execution_backend
from tilelang.backend.registry import REGISTRY, origin
from tilelang.backend.resolution import execution_specs
from tilelang.cli.main import cli
from tilelang.plugins import loader, plugin_records
from tilelang.plugins.api import PLUGIN_API_VERSION, api_incompatibility


def llvm_backend(name: str, **fields: Any) -> BackendModule:
    """A manifest on core's llvm kind that reuses the CPU's components (by reference)."""
    manifest: dict[str, Any] = {
        "name": name,
        "target_kinds": ("llvm",),
        "pipelines": {"llvm": "tilelang.cpu.pipeline:CPU_PIPELINE"},
        "device_codegens": {"llvm": "tilelang.cpu.codegen:CPU_DEVICE_CODEGEN"},
        "host_codegens": {"llvm": "tilelang.cpu.codegen:LLVM_HOST_CODEGEN"},
        "execution_backends": (ExecutionBackendSpec("tvm_ffi", requires_device_compile=False),),
        "aliases": (name,),
        "default_target": lambda: {"kind": "llvm"},
    }
    return BackendModule(**{**manifest, **fields})


def backends_plugin(*modules: BackendModule, **hooks: Callable[[], Any]) -> types.ModuleType:
    return plugin("backends", tilelang_backend_modules=lambda: list(modules), **hooks)


class LoggingExecutionBackend(ExecutionBackend):
    """Never builds anything here: these tests stop at context resolution."""

    name = "logx"

    def __init__(self, *serves: ExecutionBackendSpec) -> None:
        self.serves = serves

    def build(self, artifact: Any, context: Any) -> Any:
        raise NotImplementedError

    def load(self, artifact: Any, directory: Any, context: Any) -> Any:
        raise NotImplementedError


@pytest.fixture
def load_with() -> Iterator[Callable[..., list[loader.PluginRecord]]]:
    """load_with(*fake_entry_points): reload with core's entry points plus the fakes."""
    real = [ep for ep in loader._entry_points() if ep.dist is not None and ep.dist.name == "tilelang-core"]
    original = loader._entry_points

    def load(*fakes: FakeEntryPoint, strict: bool = False) -> list[loader.PluginRecord]:
        every = sorted([*real, *fakes], key=lambda ep: (ep.name, ep.dist.name, ep.value))
        loader._entry_points = lambda: every  # type: ignore[assignment]
        with pytest.MonkeyPatch.context() as mp:
            for var in ("TILELANG_PLUGINS_ALLOW", "TILELANG_PLUGINS_DENY", "TILELANG_DEFAULT_TARGET"):
                mp.delenv(var, raising=False)
            mp.setenv("TILELANG_PLUGINS_STRICT", "1" if strict else "")
            return tilelang.load_plugins(force=True)

    try:
        yield load
    finally:
        loader._entry_points = original  # type: ignore[assignment]
        tilelang.load_plugins(force=True)


def record(name: str) -> loader.PluginRecord:
    (found,) = [r for r in plugin_records() if r.name == name]
    return found


# -- plugin API versions ------------------------------------------------------------------------


@pytest.mark.parametrize("declared", ["1.14", "1.13", "1.12", "1.11", "1.10", "1.9", "1.8", "1.7", "1.6", "1.5", "1.4", "1.3", "1.2", "1.1", "1.0"])
def test_same_major_and_an_older_or_equal_minor_is_accepted(declared: str) -> None:
    assert PLUGIN_API_VERSION == "1.14"
    assert api_incompatibility(declared, "acme") is None


FIX = "to fix: set TILELANG_PLUGIN_API = \"1.14\" in module 'fake_acme'"


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ("1.15", ("written for plugin API 1.15, newer than this tilelang-core's 1.14; upgrade "
                 "tilelang-core (or install an older release of the plugin)")),
        ("2.0", ("written for plugin API 2.0, this tilelang-core implements 1.14 (the major "
                 "versions differ); install a release of the plugin written for API 1.x, or a "
                 "tilelang-core that implements 2.x")),
        ("0.9", ("written for plugin API 0.9, this tilelang-core implements 1.14 (the major "
                 "versions differ); install a release of the plugin written for API 1.x, or a "
                 "tilelang-core that implements 0.x")),
        (1, ('TILELANG_PLUGIN_API is 1 (int); it must be a "major.minor" string (this '
             f"tilelang-core implements 1.14); {FIX}")),
        (1.1, ('TILELANG_PLUGIN_API is 1.1 (float); it must be a "major.minor" string (this '
               f"tilelang-core implements 1.14); {FIX}")),
        ("1", ("TILELANG_PLUGIN_API '1' is not a 'major.minor' version (this tilelang-core "
               f"implements 1.14); {FIX}")),
        (None, ("module 'fake_acme' has no TILELANG_PLUGIN_API attribute: a plugin must declare "
                'the plugin API it was written for, as a "major.minor" string (this '
                f"tilelang-core implements 1.14); {FIX}")),
    ],
    ids=["newer-minor", "other-major", "older-major", "int", "float", "no-minor", "missing"],
)
def test_incompatible_api_declarations_are_refused_with_the_fix(
    load_with: Any, declared: object, message: str
) -> None:
    acme = FakeEntryPoint("acme", FakeDist("tilelang-acme"), plugin("acme", api=declared))
    expected = f"plugin 'acme' from tilelang-acme 1.0 incompatible: {message}"
    with pytest.raises(PluginError, match=f"^{re.escape(expected)}$"):
        load_with(acme, strict=True)
    load_with(acme)  # not strict: recorded, and import tilelang goes on
    assert (record("acme").status, record("acme").error) == ("incompatible", message)


def test_loader_refuses_an_int_version_and_a_missing_attribute(load_with: Any) -> None:
    load_with(
        FakeEntryPoint("int_api", FakeDist("int-api"), plugin("int_api", api=1)),
        FakeEntryPoint("no_api", FakeDist("no-api"), plugin("no_api", api=None)),
        FakeEntryPoint("old_minor", FakeDist("old-minor"), plugin("old_minor", api="1.0")),
    )
    assert record("int_api").status == "incompatible"
    assert record("int_api").error.startswith("TILELANG_PLUGIN_API is 1 (int); it must be")
    assert record("no_api").status == "incompatible"
    assert record("no_api").error.startswith("module 'fake_no_api' has no TILELANG_PLUGIN_API attribute")
    assert record("old_minor").status == "loaded"


# -- aliases, priorities, detectors ----------------------------------------------------------------


def test_alias_names_its_backend_and_an_explicit_kind_tie_is_an_error(load_with: Any) -> None:
    load_with(FakeEntryPoint("acme", FakeDist("tilelang-acme"), backends_plugin(llvm_backend("acme"))))
    assert create_backend_context("acme").module.name == "acme"
    assert create_backend_context("acme").target_source == "alias 'acme'"
    assert create_backend_context("cpu").module.name == "cpu"
    with pytest.raises(BackendNotFoundError, match=(
        r"^target .*llvm.* is claimed by several target backends of priority 0: "
        r"acme \(from tilelang-acme, entry point acme\), cpu \(from tilelang-core, entry point cpu\)\. "
        r"Choose one: name it by its alias \(target='acme' or target='cpu'\), or leave the others out "
        r"with TILELANG_PLUGINS_DENY=<entry point> \(or list the ones to keep in "
        r"TILELANG_PLUGINS_ALLOW\); a backend's author tells them apart with a supports_target "
        r"predicate or a higher priority in its manifest$"
    )):
        create_backend_context("llvm")


@pytest.mark.parametrize("names", [("acme", "zeta"), ("zeta", "acme")])
def test_declared_priority_orders_backends_of_one_kind_never_registration_order(
    load_with: Any, names: tuple[str, str]
) -> None:
    modules = {name: llvm_backend(name, priority=5 if name == "zeta" else 1) for name in names}
    load_with(*(FakeEntryPoint(n, FakeDist(f"tilelang-{n}"), backends_plugin(modules[n])) for n in names))
    assert create_backend_context("llvm").module.name == "zeta"


def test_a_vendor_detector_wins_auto_over_the_cpu_at_equal_priority(load_with: Any) -> None:
    present = {"acme": True}
    detector = TargetDetector("acme", priority=0, detect=lambda: {"kind": "llvm"} if present["acme"] else None)
    load_with(FakeEntryPoint("acme", FakeDist("tilelang-acme"), backends_plugin(
        llvm_backend("acme"), tilelang_target_detectors=lambda: [detector])))
    context = create_backend_context()
    assert (context.module.name, context.target_source) == ("acme", "auto (acme)")
    present["acme"] = False
    context = create_backend_context()
    assert (context.module.name, context.target_source) == ("cpu", "auto (cpu)")


# -- first-party names --------------------------------------------------------------------------


def test_a_third_party_claiming_cpu_is_refused_and_core_keeps_it(load_with: Any) -> None:
    squatter = llvm_backend("cpu", priority=100)
    load_with(FakeEntryPoint("squat", FakeDist("squatter", "6.6"), backends_plugin(squatter)))
    assert record("squat").status == "conflict"
    assert record("squat").error == (
        "target backend 'cpu' is reserved for the first-party distribution tilelang-core; "
        "squatter 6.6 (entry point 'squat') claims it, so it is not used and tilelang-core keeps "
        "the name (to fix: rename it in squatter)"
    )
    assert registered_backends()["cpu"] is not squatter
    assert origin("backend", "cpu")[0] == "tilelang-core"
    assert create_backend_context("cpu").module.name == "cpu"


def test_a_reserved_entry_point_name_is_refused(load_with: Any) -> None:
    load_with(FakeEntryPoint("cuda", FakeDist("not-nvidia"), backends_plugin(llvm_backend("fastgpu"))))
    assert record("cuda").status == "conflict"
    assert record("cuda").error.startswith(
        "entry point 'cuda' is reserved for the first-party distribution tilelang-cuda; "
        "not-nvidia 1.0 (entry point 'cuda') claims it"
    )
    assert "fastgpu" not in registered_backends()


def test_the_first_party_keeps_a_name_it_shares_with_a_third_party(load_with: Any) -> None:
    extension = {"tilelang_language_extensions": lambda: {"wmma": "tilelang.math:cdiv"}}
    load_with(
        FakeEntryPoint("cuda_ext", FakeDist("tilelang-cuda"), plugin("cuda_ext", **extension)),
        FakeEntryPoint("vendor_ext", FakeDist("vendor"), plugin("vendor_ext", **extension)),
    )
    assert record("cuda_ext").status == "loaded"
    assert record("vendor_ext").status == "conflict"
    assert record("vendor_ext").error == (
        "language extension 'wmma' belongs to the first-party tilelang-cuda 1.0 (entry point "
        "'cuda_ext') and is claimed by vendor 1.0 (entry point 'vendor_ext') too; tilelang-cuda "
        "keeps it and vendor is not used (to fix: rename it in vendor)"
    )
    assert REGISTRY.language_extensions["wmma"] == "tilelang.math:cdiv"


def test_a_later_error_about_a_name_in_conflict_says_so(load_with: Any) -> None:
    twin = llvm_backend("twin_a", aliases=("twin",))
    other = llvm_backend("twin_b", aliases=("twin",))
    load_with(
        FakeEntryPoint("twin_a", FakeDist("twin-a"), backends_plugin(twin)),
        FakeEntryPoint("twin_b", FakeDist("twin-b"), backends_plugin(other)),
    )
    with pytest.raises(BackendNotFoundError, match=re.escape(
        ". Note: 'twin' was claimed by a plugin that is not used: plugin 'twin_a' from twin-a 1.0 "
        "conflict: target alias 'twin' is claimed by twin-a 1.0 (entry point 'twin_a') and twin-b "
        "1.0 (entry point 'twin_b'); neither is used; plugin 'twin_b' from twin-b 1.0 conflict: "
    )):
        create_backend_context("twin")


# -- execution backends from other distributions -----------------------------------------------


def test_an_outside_execution_backend_serves_a_backend_that_accepts_it(load_with: Any) -> None:
    logx = LoggingExecutionBackend(ExecutionBackendSpec("logx", target_backends=("cpu", "acme"),
                                                        requires_device_compile=False))
    load_with(FakeEntryPoint("logx", FakeDist("logx-dist"), backends_plugin(
        llvm_backend("acme"), tilelang_execution_backends=lambda: [logx])))
    cpu = registered_backends()["cpu"]
    assert [s.name for s in execution_specs(cpu)] == ["tvm_ffi", "cython", "logx"]
    context = create_backend_context("cpu", execution_backend="logx")
    assert context.execution_backend is logx and context.execution_spec.name == "logx"
    with pytest.raises(BackendNotFoundError, match=re.escape(
        "target backend 'acme' cannot use execution backend 'logx'; it declares: tvm_ffi. 'logx' "
        "(from logx-dist) offers to serve it, but 'acme' does not accept execution backends from "
        "other distributions (its manifest's accepts_external_execution_backends is False)"
    )):
        create_backend_context("acme", execution_backend="logx")


def test_an_outside_spec_for_one_kind_moves_a_chosen_target_to_that_kind(load_with: Any) -> None:
    logx = LoggingExecutionBackend(ExecutionBackendSpec("logx", target_kinds=("c",)))
    load_with(FakeEntryPoint("logx", FakeDist("logx-dist"),
                             plugin("logx", tilelang_execution_backends=lambda: [logx])))
    context = create_backend_context("cpu", execution_backend="logx")
    assert context.target.kind.name == "c"
    assert context.target_source == "alias 'cpu', kind 'c' for execution backend 'logx'"


@pytest.mark.parametrize(
    ("serves", "message"),
    [
        ((ExecutionBackendSpec("other", target_backends=("cpu",)),),
         ("test: 'logx'.serves holds a spec named 'other'; name it 'logx', after the execution "
          "backend that offers it")),
        ((ExecutionBackendSpec("logx"),),
         ("test: 'logx'.serves holds a spec that names no target_backends and no target_kinds; "
          "say which target backends or kinds it serves")),
    ],
    ids=["wrong-name", "serves-nothing"],
)
def test_offered_specs_are_validated(serves: tuple[ExecutionBackendSpec, ...], message: str) -> None:
    with pytest.raises(ManifestError, match=f"^{re.escape(message)}$"):
        validate_execution_backend(LoggingExecutionBackend(*serves), "test")


def test_spec_target_backends_must_be_a_tuple_of_names() -> None:
    with pytest.raises(ManifestError, match=re.escape(
        "ExecutionBackendSpec('logx').target_backends must be a tuple of names, got 'cpu'"
    )):
        ExecutionBackendSpec("logx", target_backends="cpu")  # type: ignore[arg-type]


def test_priority_must_be_an_int() -> None:
    with pytest.raises(ManifestError, match=re.escape("BackendModule('acme'): priority must be an int, got True")):
        llvm_backend("acme", priority=True)


# -- strict mode --------------------------------------------------------------------------------


def test_strict_mode_raises_one_error_with_a_line_per_plugin(load_with: Any) -> None:
    with pytest.raises(PluginError, match="^" + re.escape(
        "plugin 'broken' from broken-dist 0.1 failed: import of 'fake_broken' failed: ImportError: "
        "fake_broken needs an SDK that is not installed\n"
        "plugin 'future' from future-dist 9.0 incompatible: written for plugin API 2.0, this "
        "tilelang-core implements 1.14 (the major versions differ); install a release of the plugin "
        "written for API 1.x, or a tilelang-core that implements 2.x"
    ) + "$"):
        load_with(
            FakeEntryPoint("broken", FakeDist("broken-dist", "0.1"), None),
            FakeEntryPoint("future", FakeDist("future-dist", "9.0"), plugin("future", api="2.0")),
            strict=True,
        )
    assert record("cpu").status == "loaded"  # every plugin was tried before raising


def test_strict_mode_cli_prints_the_lines_and_exits_1(load_with: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    load_with(FakeEntryPoint("broken", FakeDist("broken-dist", "0.1"), None))
    # as with TILELANG_NO_PLUGIN_AUTOLOAD: the CLI loads the entry points itself
    monkeypatch.setattr(loader, "_records", [])
    monkeypatch.setattr(loader, "_loaded", False)
    REGISTRY.clear()
    result = CliRunner().invoke(cli, ["backends", "list"], env={"TILELANG_PLUGINS_STRICT": "1"})
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.output.strip().splitlines() == [
        "Error: TILELANG_PLUGINS_STRICT is set and plugins failed:",
        ("plugin 'broken' from broken-dist 0.1 failed: import of 'fake_broken' failed: ImportError: "
         "fake_broken needs an SDK that is not installed"),
    ]


# -- `tilelang backends list` in a fresh process ------------------------------------------------


def _fresh(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILELANG_PLUGINS")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300,
                          check=False, env=env)


def test_backends_list_in_a_fresh_process_does_not_import_tvm() -> None:
    done = _fresh("-c", (
        "import sys\n"
        "from tilelang.cli.main import cli\n"
        "try:\n"
        "    cli(['backends', 'list'], prog_name='tilelang')\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        "print('tvm imported:', 'tvm' in sys.modules, 'tvm_ffi' in sys.modules)\n"
    ))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "tvm imported: False False"
    assert 'target="auto"' in done.stdout


def test_piped_list_keeps_every_cell_whole() -> None:
    table = _fresh("-m", "tilelang", "backends", "list")
    data = _fresh("-m", "tilelang", "backends", "list", "--json")
    assert table.returncode == 0 and data.returncode == 0, table.stderr + data.stderr
    report = json.loads(data.stdout)
    assert report["checked"] is False  # nothing imported TVM
    lines = table.stdout.splitlines()
    assert lines[1].split() == ["kind", "name", "entry", "point", "distribution", "target", "kinds",
                                "execution", "backends", "status"]
    for category, key in (("target", "target_backends"), ("execution", "execution_backends")):
        for entry in report[key]:
            (row,) = [line for line in lines if line.split()[:2] == [category, entry["name"]]]
            status = entry["status"] + (f": {entry['reason']}" if entry["reason"] else "")
            assert row.endswith(status), row  # the whole status on the row's one line
            assert f"{entry['distribution']} {entry['version']}".strip() in row
            assert row.split()[2] == (entry["entry_point"] or "-")

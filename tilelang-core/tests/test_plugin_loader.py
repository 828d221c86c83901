"""The plugin loader in process, fast (test_plugins.py runs it through real installed
distributions in a venv, marked slow): loading happens once per process, a forced reload
reads the entry points again, and strict mode's error during ``import tilelang`` is printed
as its lines while every other exception keeps Python's report. Found by ``nox -s mutants``:
with ``_loaded`` never set, or the excepthook's identity check broken, the fast tests passed."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
import tilelang
from fake_plugins import FakeDist, FakeEntryPoint, plugin
from tilelang.errors import PluginError
from tilelang.jit.adapter.tvm_ffi.backend import TVMFFIExecutionBackend
from tilelang.plugins import loader


@pytest.fixture
def counted_entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Core's entry points plus one that fails to import; how often the loader read them."""
    real = [ep for ep in loader._entry_points() if ep.dist is not None and ep.dist.name == "tilelang-core"]
    every = [*real, FakeEntryPoint("broken", FakeDist("broken-dist", "0.1"), None)]
    reads: list[int] = []

    def entry_points() -> list[object]:
        reads.append(1)
        return every

    monkeypatch.setattr(loader, "_entry_points", entry_points)
    for var in ("TILELANG_PLUGINS_ALLOW", "TILELANG_PLUGINS_DENY", "TILELANG_PLUGINS_STRICT"):
        monkeypatch.delenv(var, raising=False)
    try:
        yield reads
    finally:
        monkeypatch.undo()
        tilelang.load_plugins(force=True)


def test_plugins_load_once_per_process_and_again_when_forced(counted_entry_points: list[int]) -> None:
    first = tilelang.load_plugins(force=True)
    assert len(counted_entry_points) == 1
    again = tilelang.load_plugins()
    assert len(counted_entry_points) == 1  # the records of the first load, nothing read again
    assert [(r.name, r.status) for r in again] == [(r.name, r.status) for r in first]
    assert ("broken", "failed") in [(r.name, r.status) for r in again]
    tilelang.load_plugins(force=True)
    assert len(counted_entry_points) == 2


def test_a_failed_import_is_recorded_with_the_error_and_where_it_was_raised(counted_entry_points: list[int]) -> None:
    records = {r.name: r for r in tilelang.load_plugins(force=True)}
    error = records["broken"].error
    assert error.startswith("import of 'fake_broken' failed: ImportError: fake_broken needs an SDK that is "
                            "not installed\nTraceback (most recent call last):")
    assert 'raise ImportError(f"{self.value} needs an SDK that is not installed")' in error
    assert records["cpu"].status == "loaded"


def test_strict_errors_during_import_are_printed_as_their_lines(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[BaseException] = []
    monkeypatch.setattr(sys, "excepthook", lambda kind, value, tb: seen.append(value))
    error = PluginError("plugin 'broken' from broken-dist 0.1 failed: ImportError")
    loader._report_without_traceback(error)
    sys.excepthook(PluginError, error, None)
    assert capsys.readouterr().err == ("tilelang: TILELANG_PLUGINS_STRICT is set and plugins failed:\n"
                                       "plugin 'broken' from broken-dist 0.1 failed: ImportError\n")
    assert seen == []
    # any other exception, another PluginError included, keeps the previous hook's report
    other = PluginError("plugin 'other' failed")
    sys.excepthook(PluginError, other, None)
    bug = ValueError("a bug elsewhere")
    sys.excepthook(ValueError, bug, None)
    assert seen == [other, bug]
    assert capsys.readouterr().err == ""


class _DuplicateExecutionBackend(TVMFFIExecutionBackend):
    name = "dup_exec"


def test_a_plugin_providing_one_name_twice_is_refused(counted_entry_points: list[int],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    twice = FakeEntryPoint("twice", FakeDist("twice-dist"), plugin(
        "twice", tilelang_execution_backends=lambda: [_DuplicateExecutionBackend(), _DuplicateExecutionBackend()]))
    with_core = loader._entry_points
    monkeypatch.setattr(loader, "_entry_points", lambda: [*with_core(), twice])
    records = {r.name: r for r in tilelang.load_plugins(force=True)}
    assert (records["twice"].status, records["twice"].error) == (
        "failed", "ManifestError: it provides the execution backend name(s) ('dup_exec', 'dup_exec') more than once")

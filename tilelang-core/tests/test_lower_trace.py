"""tilelang.tools.lower_trace: the IR before and after every pass of a compilation (from the
environment or enable()), the code generator's step, the HTML report, and the one-shot
lower_trace() over a chain of passes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError
from tilelang.tools import lower_trace as lt

KERNEL = textwrap.dedent('''
    import numpy as np
    import tilelang
    import tilelang.language as T


    @T.prim_func
    def add_one(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            tile = T.alloc_shared((128,), "float32")
            T.copy(A[bx * 128], tile)
            for i in T.Parallel(128):
                B[bx * 128 + i] = tile[i] + 1.0


    kernel = tilelang.compile(add_one, target="cpu")
    a = np.ones(256, "float32")
    b = np.zeros_like(a)
    kernel(a, b)
    assert (b == 2).all()
''')


def test_the_environment_traces_every_pass_of_a_compilation(tmp_path):
    script = tmp_path / "traced.py"
    script.write_text(KERNEL)
    env = {**os.environ, "TL_LOWER_TRACE": "1", "TL_LOWER_TRACE_DIR": str(tmp_path / "trace"),
           "TILELANG_DISABLE_CACHE": "1"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "trace" / "traced"
    report = root / "report.html"
    assert report.is_file()  # the latest run's report
    (run,) = (root / ".run_records").iterdir()
    assert re.fullmatch(r"run_\d{8}_\d{6}_\d+_\d+_add_one", run.name)
    befores = sorted(run.rglob("*_before.tir"))
    assert len(befores) > 10
    tile_ops = next(p for p in befores if "LowerTileOps" in p.name)
    after = tile_ops.with_name(tile_ops.name.replace("_before.tir", "_after.tir"))
    assert "T.tl_copy" in tile_ops.read_text() and "T.tl_copy" not in after.read_text()
    assert tile_ops.read_text() != after.read_text()  # the pass that lowers tile operations changed the IR
    (codegen,) = (run / "codegen").glob("*_codegen_after.src")
    assert "add_one" in codegen.read_text()  # the generated source
    page = report.read_text()
    assert "kernel &#x27;add_one&#x27;" in page and "LowerTileOps" in page and 'class="add"' in page
    assert f"tilelang lower trace: kernel 'add_one', {len(befores)} steps" in done.stderr


def _fresh_kernel(value: float):
    @T.prim_func
    def scale(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tile = T.alloc_shared((64,), "float32")
            T.copy(A, tile)
            for i in T.Parallel(64):
                A[i] = tile[i] * value

    return scale


def test_enable_prints_diffs_and_disable_stops(monkeypatch, capsys):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    monkeypatch.chdir(os.environ.get("TMPDIR", "/tmp"))
    try:
        lt.enable("terminal")
        tilelang.compile(_fresh_kernel(3.0), target="cpu")
        err = capsys.readouterr().err
        assert re.search(r"^\[\d\d\] tl\.cpu\.lower / tl\.LowerTileOps: \+\d+ -\d+$", err, re.MULTILINE)
        assert re.search(r"^\[\d\d\] codegen / codegen: \+\d+ -\d+$", err, re.MULTILINE)
        assert "no change" in err
        lt.disable()
        monkeypatch.setenv("TL_LOWER_TRACE", "terminal")  # disable() wins over the environment
        tilelang.compile(_fresh_kernel(5.0), target="cpu")
        assert "tl.LowerTileOps" not in capsys.readouterr().err
    finally:
        lt._override.clear()


def test_a_failed_compilation_still_writes_its_report(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    monkeypatch.setenv("TL_LOWER_TRACE_DIR", str(tmp_path))

    @T.prim_func
    def role(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            with T.ws(1):
                A[tx] = 1.0  # a role reading the thread index: refused on the CPU, in a pass

    try:
        lt.enable("html")
        with pytest.raises(LanguageError):
            tilelang.compile(role, target="cpu")
    finally:
        lt._override.clear()
    (report,) = tmp_path.rglob(".run_records/*/report.html")
    assert "the compilation failed: LanguageError: kernel &#x27;role&#x27;, T.ws" in report.read_text()


def test_lower_trace_diffs_a_chain_of_passes(tmp_path, capsys):
    from tilelang.transform import Simplify

    @T.prim_func
    def func(A: T.Tensor((8,), "float32")):
        for i in T.serial(8):
            A[i] = A[(i + 1) * 2 - i - i - 2]

    path = tmp_path / "chain.html"
    results = lt.lower_trace(func, [("Simplify", Simplify()), ("again", Simplify())],
                             mode="both", html_path=path)
    assert [r["name"] for r in results] == ["Simplify", "again"]
    first, second = results
    assert first["changed"] and first["insertions"] >= 1 and first["deletions"] >= 1
    assert not second["changed"] and second["diff_lines"] == []
    assert "A[(i + 1) * 2 - i - i - 2]" in first["before_script"] and "A[i] = A[0]" in first["after_script"]
    assert "[00] lower_trace / Simplify: +" in capsys.readouterr().out
    assert path.read_text().startswith("<!doctype html>")
    with pytest.raises(ValueError, match="lower_trace: mode must be one of terminal, html, both, got 'pdf'"):
        lt.lower_trace(func, Simplify(), mode="pdf")


def test_a_bad_environment_value_names_the_choices(monkeypatch):
    monkeypatch.setenv("TL_LOWER_TRACE", "loud")
    with pytest.raises(ValueError, match=re.escape("TL_LOWER_TRACE='loud': expected one of terminal, html, both, "
                                                   "or 1/on/true/yes (html), 0/off/false/no")):
        lt.active_mode()


def test_upstreams_older_pass_diff_spelling(monkeypatch, tmp_path):
    from tilelang.transform import Simplify
    from tilelang.utils.pass_diff import pass_diff

    @T.prim_func
    def func(A: T.Tensor((8,), "float32")):
        for i in T.serial(8):
            A[i] = A[(i + 1) * 2 - i - i - 2]

    (step,) = pass_diff(func, [("Simplify", Simplify())], mode="html", html_path=tmp_path / "diff.html")
    assert step["changed"] and (tmp_path / "diff.html").is_file()
    monkeypatch.delenv("TL_LOWER_TRACE", raising=False)
    for value, mode in (("1", "terminal"), ("html", "html"), ("loud", "terminal"), ("off", None)):
        monkeypatch.setenv("TILELANG_PASS_DIFF", value)
        assert lt.active_mode() == mode
    monkeypatch.setenv("TL_LOWER_TRACE", "0")  # the newer variable, when set, decides
    monkeypatch.setenv("TILELANG_PASS_DIFF", "both")
    assert lt.active_mode() is None


def test_asking_for_layout_visualization_says_it_shows_nothing_once(monkeypatch):
    from tilelang.backend import pass_configs

    monkeypatch.setattr(pass_configs, "_WARNED", set())
    configs = {tilelang.PassConfigKey.TL_LAYOUT_VISUALIZATION_ENABLE: True,
               tilelang.PassConfigKey.TL_LAYOUT_VISUALIZATION_FORMATS: "svg"}
    with pytest.warns(UserWarning, match=re.escape(
            "pass config 'tl.layout_visualization_enable' is accepted and not applied by target backend 'cpu': "
            "the fragment layouts a kernel gets are its backend's choice")):
        tilelang.compile(_fresh_kernel(7.0), target="cpu", pass_configs=configs)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tilelang.compile(_fresh_kernel(9.0), target="cpu", pass_configs=configs)  # once per process
        tilelang.compile(_fresh_kernel(11.0), target="cpu",
                         pass_configs={tilelang.PassConfigKey.TL_LAYOUT_VISUALIZATION_ENABLE: False})

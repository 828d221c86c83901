"""TILELANG_JIT_DIAGNOSTICS=1: each phase of a compile logged with its time and the kernel,
target and execution backend (upstream's switch and ``tilelang.jit.diagnostics.jit_phase``)."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.jit.diagnostics import jit_phase

LOGGER = "tilelang.jit.diagnostics"


def plus_one():
    @T.prim_func
    def bump(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8):
            for i in T.Parallel(8):
                A[i] = A[i] + 1.0

    return bump


def phases(caplog) -> list[tuple[str, str]]:
    found = []
    for record in caplog.records:
        match = re.match(r"TileLang JIT phase (start|done|failed): ([a-z ]+?)(,| in | after )", record.getMessage())
        if record.name == LOGGER and match:
            found.append((match.group(1), match.group(2)))
    return found


def test_a_compile_logs_its_phases_in_order_then_a_hit_only_the_lookup(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILELANG_JIT_DIAGNOSTICS", "1")
    caplog.set_level(logging.INFO, logger=LOGGER)
    kernel = tilelang.compile(plus_one(), target="cpu")
    names = ["cache lookup", "lower", "build", "cache store", "load"]
    assert phases(caplog) == [(kind, name) for name in names for kind in ("start", "done")]
    done = next(r.getMessage() for r in caplog.records if "phase done: lower" in r.getMessage())
    assert re.search(r"in \d+\.\d{3}s, backend='tvm_ffi', kernel='bump', target='llvm'$", done), done
    a = np.zeros(8, np.float32)
    kernel(a)
    np.testing.assert_array_equal(a, np.ones(8, np.float32))
    caplog.clear()
    tilelang.compile(plus_one(), target="cpu")  # the disk cache: found, loaded
    assert phases(caplog) == [("start", "cache lookup"), ("done", "cache lookup")]


def test_off_by_default_and_a_failing_phase_is_logged_and_raised(monkeypatch, caplog):
    monkeypatch.delenv("TILELANG_JIT_DIAGNOSTICS", raising=False)
    caplog.set_level(logging.INFO, logger=LOGGER)
    with jit_phase("quiet", kernel="k"):
        pass
    assert not caplog.records
    with pytest.raises(ValueError, match="boom"), jit_phase("probe", enabled=True, kernel="k"):
        raise ValueError("boom")
    assert [r.getMessage() for r in caplog.records][-1].startswith(
        "TileLang JIT phase failed: probe after ")
    assert "(ValueError: boom), kernel='k'" in caplog.records[-1].getMessage()


def test_a_program_without_logging_set_up_sees_the_phases_on_stderr(tmp_path):
    import os
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "kernel.py"
    script.write_text(textwrap.dedent("""
        import tilelang
        import tilelang.language as T

        @T.prim_func
        def bump(A: T.Tensor((8,), T.float32)):
            with T.Kernel(1, threads=8):
                for i in T.Parallel(8):
                    A[i] = A[i] + 1.0

        tilelang.compile(bump, target="cpu")
    """))
    env = {**os.environ, "TILELANG_JIT_DIAGNOSTICS": "1", "TILELANG_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^TileLang JIT phase done: build in \d+\.\d{3}s, backend='tvm_ffi', kernel='bump'",
                     proc.stderr, re.MULTILINE), proc.stderr

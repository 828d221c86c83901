"""tilelang.autodd: delta debugging of a failing program. The reduction is checked in-process
on small Python programs (what is kept, what is frozen), the two backends on real
interpreters, and the command on a TileLang kernel whose T.gemm shapes disagree."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tilelang.autodd import __freeze__
from tilelang.autodd.reduce import prepare, reduce, size
from tilelang.autodd.run import Runner


def in_process(message: str):
    """A ``reproduces`` that execs candidates here (fast, for the reduction's own tests)."""

    def output(source: str) -> str:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            try:
                exec(compile(source, "<candidate>", "exec"), {"__name__": "__main__"})  # noqa: S102 - the test runs candidates
            except Exception as exc:  # noqa: BLE001 - a candidate's failure is its output
                print(f"{type(exc).__name__}: {exc}")
        return buffer.getvalue()

    return lambda sources: [message in output(s) for s in sources]


NOISY = textwrap.dedent('''
    """A program with one bug among unrelated code."""
    import math


    def unused(a, b=3):
        total = 0
        for i in range(a):
            total += i * b
        return total


    class Config:
        def __init__(self, n, scale=2):
            self.n = n
            self.scale = scale
            self.name = "config"


    def compute(config, offset=10):
        values = [config.scale * i for i in range(config.n)]
        if config.n > 100:
            print("large")
        else:
            values.append(math.sqrt(16))
        return values[config.n + offset]  # the bug: past the end


    def main():
        cfg = Config(8, scale=4)
        print("starting", unused(3))
        try:
            compute(cfg)
        except IndexError as exc:
            print("BUG:", exc)


    main()
''')


def test_the_reduction_keeps_only_what_reproduces():
    state = reduce(prepare(NOISY), in_process("BUG: list index out of range"))
    assert in_process("BUG: list index out of range")([state.source]) == [True]
    assert size(state.source)[0] < size(NOISY)[0] // 2
    assert "unused" not in state.source and "import math" not in state.source and '"""' not in state.source
    assert state.kept > 0 and state.tried >= state.kept


def test_frozen_code_survives_the_reduction():
    source = NOISY.replace('print("starting", unused(3))', 'print("starting", unused(3))  # autodd: freeze')
    source = source.replace("        self.name = \"config\"\n", "        # autodd: freeze-start\n"
                            "        self.name = \"config\"\n        # autodd: end-freeze\n")
    prepared = prepare(source)
    assert "from tilelang.autodd import __freeze__" in prepared
    state = reduce(prepared, in_process("BUG: list index out of range"))
    assert "print('starting', unused(3))" in state.source and "self.name = 'config'" in state.source
    assert "def unused(" in state.source  # the frozen call needs it (its body is free to shrink)
    assert in_process("BUG")([state.source]) == [True]


def test_prepare_places_the_freeze_import_after_future_imports_and_checks_pairs():
    prepared = prepare('"""doc"""\nfrom __future__ import annotations\nx = 1  # autodd: freeze\n')
    lines = prepared.splitlines()
    assert lines[:4] == ['"""doc"""', "from __future__ import annotations", "from tilelang.autodd import __freeze__",
                         "with __freeze__:"]
    with pytest.raises(ValueError, match="line 1: '# autodd: freeze-start' without a matching '# autodd: end-freeze'"):
        prepare("# autodd: freeze-start\nx = 1\n")


def test_freeze_is_an_identity_at_run_time():
    with __freeze__:
        value = __freeze__(41) + 1
    assert value == 42


@pytest.mark.parametrize("backend", ["runner", "subproc"])
def test_backends_capture_output_and_time_out(backend):
    with Runner("needle", backend=backend, timeout=5, jobs=2) as runner:
        assert runner.reproduces(["print('hay needle')", "import sys; sys.stderr.write('needle')"]) == [True, True]
        assert runner.reproduces(["raise RuntimeError('needle in a traceback')", "print('hay')"]) == [True, False]
        runner.timeout = 1
        assert runner.output("while True: pass").startswith("autodd: candidate timed out after 1")
        assert runner.reproduces(["print('needle after a timeout')"]) == [True]  # a fresh worker


def test_the_runner_sees_native_output_and_keeps_its_protocol_from_candidates():
    with Runner("from C", timeout=10) as runner:
        assert runner.reproduces(["import os; os.write(1, b'from C')"]) == [True]
        assert "EOFError" in runner.output("input()")  # a candidate reading stdin reads nothing
        assert runner.reproduces(["print('from C again')"]) == [True]


GEMM_BUG = textwrap.dedent('''
    import numpy as np
    import tilelang
    import tilelang.language as T


    def helper_that_does_nothing(n):
        return [i * 2 for i in range(n)]


    def build(M, N, K, block_M=32, block_N=32, block_K=16):
        @T.prim_func
        def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
            with T.Kernel(N // block_N, M // block_M, threads=128) as (bx, by):
                A_shared = T.alloc_shared((block_M, block_K), "float32")
                B_shared = T.alloc_shared((block_M, block_N), "float32")  # the bug: (block_K, block_N)
                C_local = T.alloc_fragment((block_M, block_N), "float32")
                T.clear(C_local)
                for k in T.Pipelined(K // block_K, num_stages=2):
                    T.copy(A[by * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, bx * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[by * block_M, bx * block_N])

        return main


    print(helper_that_does_nothing(4))
    kernel = tilelang.compile(build(64, 64, 64), target="cpu")
    a = np.ones((64, 64), "float32")
    print("never reached", kernel)
''')


def test_the_command_reduces_a_tilelang_kernel(tmp_path):
    source = tmp_path / "buggy.py"
    source.write_text(GEMM_BUG)
    output = tmp_path / "minimized.py"
    done = subprocess.run([sys.executable, "-m", "tilelang.autodd", str(source), "--err-msg", "shapes do not agree",
                           "-o", str(output), "--timeout", "60"], capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr
    reduced = output.read_text()
    assert size(reduced)[0] < size(GEMM_BUG)[0] // 2
    assert "helper_that_does_nothing" not in reduced and "never reached" not in reduced
    assert "T.gemm(A_shared, B_shared, C_local)" in reduced
    rerun = subprocess.run([sys.executable, str(output)], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path, check=False)
    assert "shapes do not agree" in rerun.stdout + rerun.stderr
    assert f"autodd: wrote {output}" in done.stderr


def test_a_source_that_does_not_show_the_message_is_reported(tmp_path: Path):
    source = tmp_path / "fine.py"
    source.write_text("print('all good')\n")
    done = subprocess.run([sys.executable, "-m", "tilelang.autodd", str(source), "--err-msg", "BUG", "-o",
                           str(tmp_path / "out.py"), "--backend", "subproc"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1
    assert f"autodd: {source} does not print 'BUG', so there is nothing to keep it reproducing; its output ended " \
           "with:\nall good" in done.stderr
    assert not (tmp_path / "out.py").exists()


def test_help_runs():
    done = subprocess.run([sys.executable, "-m", "tilelang.autodd", "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and "--err-msg" in done.stdout and "Delta debugging" in done.stdout

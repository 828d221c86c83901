"""par_compile (upstream's): several argument sets of a @tilelang.jit kernel at once, in
worker processes through the kernel cache, or here where they cannot go to workers."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang import ArgumentError, CompileError


@tilelang.jit(out_idx=-1, target="c")
def scaled(n, scale, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = A[i] * scale

    return main


CONFIGS = [(16, 2.0), {"n": 32, "scale": 3.0}, (8, 0.5, "float64")]
EXPECTED = [(16, 2.0, "float32"), (32, 3.0, "float32"), (8, 0.5, "float64")]


def _check(kernels):
    for kernel, (n, scale, dtype) in zip(kernels, EXPECTED):
        a = np.arange(n, dtype=dtype)
        np.testing.assert_array_equal(kernel(a), a * scale)


@pytest.mark.parametrize("num_workers", [None, 1], ids=["workers", "here"])
def test_par_compile_gives_each_configurations_kernel_in_order(num_workers, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    kernels = scaled.par_compile(CONFIGS, num_workers=num_workers)
    _check(kernels)
    assert scaled(16, 2.0) is kernels[0] and scaled.compile(n=8, scale=0.5, dtype="float64") is kernels[2]


def test_a_failing_configuration_is_named_or_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    configs = [(4, 2.0), (4, 2.0, "float99")]
    with pytest.raises(CompileError, match=r"@tilelang.jit function 'scaled': par_compile: configuration 1 failed: "):
        scaled.par_compile(configs, num_workers=2)
    kernels = scaled.par_compile(configs, num_workers=2, ignore_error=True)
    assert kernels[1] is None
    np.testing.assert_array_equal(kernels[0](np.ones(4, "float32")), np.full(4, 2.0, "float32"))


def test_par_compile_checks_its_arguments():
    with pytest.raises(ArgumentError, match=r"par_compile: configuration 0 is a int; pass a tuple of positional "
                                            r"arguments or a dict of keyword arguments"):
        scaled.par_compile([4])
    with pytest.raises(ArgumentError, match=r"par_compile: num_workers must be an int >= 1"):
        scaled.par_compile([(4, 1.0)], num_workers=0)


def test_tilelang_par_compile_compiles_prim_funcs():
    funcs = [scaled.get_tir(*c) if isinstance(c, tuple) else scaled.get_tir(**c) for c in CONFIGS]
    _check(tilelang.par_compile(funcs, out_idx=-1, target="c"))


@tilelang.jit(out_idx=-1)
def scaled_auto(n, scale):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = A[i] * scale

    return main


def test_the_auto_target_is_resolved_once_for_the_workers(tmp_path, monkeypatch):
    # (a worker handed target="auto" failed: "Target kind auto is not defined"); "auto" is
    # the CPU here on every machine, for the numpy arrays below
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILELANG_DEFAULT_TARGET", "c")
    kernels = scaled_auto.par_compile([(8, 2.0), (4, 3.0)], num_workers=2)
    np.testing.assert_array_equal(kernels[0](np.ones(8, "float32")), np.full(8, 2.0, "float32"))
    np.testing.assert_array_equal(kernels[1](np.ones(4, "float32")), np.full(4, 3.0, "float32"))


SCRIPT = """
import numpy as np
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=-1, target="c")
def scaled(n, scale):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                B[i] = A[i] * scale

    return main


{call}
"""
CALL = """kernels = scaled.par_compile([(8, 2.0), (4, 3.0)], num_workers=2)
print([float(k(np.ones(n, "float32"))[0]) for k, n in zip(kernels, (8, 4))])"""


@pytest.mark.parametrize("guarded", [False, True], ids=["top level", "under a main guard"])
def test_a_script_may_call_par_compile_at_its_top_level(guarded, tmp_path):
    """Spawned workers re-run a script's top level: there the configurations compile in this
    process (upstream's scripts call par_compile unguarded); under a main guard, in workers."""
    import subprocess
    import sys
    import textwrap

    call = f'if __name__ == "__main__":\n{textwrap.indent(CALL, "    ")}' if guarded else CALL
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(call=call))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "TILELANG_CACHE_DIR": str(tmp_path / "cache")},
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[2.0, 3.0]"
    in_process = "compiling 2 configuration(s) in this process, one after another: the script calls this at its top level"
    assert (in_process in done.stderr) is not guarded

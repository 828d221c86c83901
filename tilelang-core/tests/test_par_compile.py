"""par_compile (upstream's): several argument sets of a @tilelang.jit kernel at once, in
worker processes through the kernel cache, or here where they cannot go to workers."""

from __future__ import annotations

import importlib

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


def _prim_funcs():
    return [scaled.get_tir(*c) if isinstance(c, tuple) else scaled.get_tir(**c) for c in CONFIGS]


@pytest.fixture
def pool_starts_at_once(monkeypatch):
    """A pool that costs nothing to start pays for the tests' small kernels too."""
    from tilelang.jit import par_compile

    monkeypatch.setattr(par_compile, "POOL_START_S", 0.0)


@pytest.mark.parametrize("num_workers", [2, 1], ids=["workers", "here"])
def test_tilelang_par_compile_compiles_prim_funcs(num_workers, tmp_path, monkeypatch, pool_starts_at_once):
    """The first kernel compiles here; the PrimFuncs after it go to the workers as their
    TVMScript text, and this process then loads each from the cache (before, they all
    compiled here one after another)."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    kernels = tilelang.par_compile(_prim_funcs(), num_workers=num_workers, out_idx=-1, target="c")
    _check(kernels)
    assert [k.from_cache for k in kernels] == [False] + [num_workers > 1] * (len(CONFIGS) - 1)


def test_kernels_quicker_than_a_pools_start_compile_here(tmp_path, monkeypatch):
    from tilelang.jit.par_compile import _pool_pays

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    kernels = tilelang.par_compile(_prim_funcs(), num_workers=2, out_idx=-1, target="c")
    _check(kernels)
    assert not any(k.from_cache for k in kernels)
    # 41 kernels of 3 s on 16 workers: 3 s to start and 8 s of compiles, against 123 s
    assert _pool_pays(3.0, 41, 16) and not _pool_pays(0.05, 41, 16) and not _pool_pays(3.0, 1, 16)



def test_the_pool_is_weighed_again_after_each_kernel_compiled_here(tmp_path, monkeypatch):
    """Only the first kernel's time was weighed: a quick first kernel (an add before GEMMs)
    kept the slow ones after it from the pool. Each kernel compiled here is now weighed, at
    their mean time, until the pool pays; here it pays once two kernels are left."""
    from tilelang.jit import par_compile

    weighed = []

    def pays(seconds, count, workers):
        weighed.append(count)
        return count == 2

    monkeypatch.setattr(par_compile, "_pool_pays", pays)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    kernels = tilelang.par_compile([*_prim_funcs(), scaled.get_tir(24, 4.0)], num_workers=2, out_idx=-1, target="c")
    _check(kernels)
    np.testing.assert_array_equal(kernels[3](np.ones(24, "float32")), np.full(24, 4.0, "float32"))
    assert weighed == [3, 2]  # after kernel 0 (three left), after kernel 1 (two left): the pool
    assert [k.from_cache for k in kernels] == [False, False, True, True]

def test_a_prim_func_whose_text_does_not_read_back_compiles_here(tmp_path, monkeypatch, pool_starts_at_once):
    """upstream's one-row rms_norm reads its one-element fragment at a T.Parallel(1)'s
    variable, which TVMScript prints as the bare scalar (read back: at 0). That function is
    not sent: its worker would compile another function."""
    from tilelang.jit.func_text import encode
    from tilelang.testing.kernels import rms_norm_rows

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    func = rms_norm_rows(4, 64)
    assert encode(func) is None
    kernels = tilelang.par_compile([*_prim_funcs(), func], num_workers=2, out_idx=-1, target="c")
    assert [k.from_cache for k in kernels] == [False, True, True, False]
    a = np.random.default_rng(0).standard_normal((4, 64)).astype("float32")
    np.testing.assert_allclose(kernels[3](a), a / np.sqrt((a * a).mean(axis=1, keepdims=True) + 1e-12), rtol=1e-5)
    _check(kernels[:3])
    # one kernel left for the workers is not worth a pool: it compiles here too
    kernels = tilelang.par_compile([*_prim_funcs()[:2], func], num_workers=2, out_idx=-1, target="c",
                                   pass_configs={"tl.disable_vectorize": True})  # (new cache keys)
    assert [k.from_cache for k in kernels] == [False, False, False]



def test_texts_are_made_while_the_workers_start_and_kernels_load_as_they_finish(tmp_path, monkeypatch,
                                                                                pool_starts_at_once):
    """The pool takes its tasks as they are made (a worker starts with the first), and this
    process loads each kernel a worker finished while the others compile. Before, every
    text was made before the pool started and every kernel loaded after it ended. The pool
    here is a stand-in that compiles in this process and records the order of events."""
    from tilelang.autotuner import compile_pool
    from tilelang.jit import compile as compile_one
    from tilelang.jit import func_text, par_compile

    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    events: list[str] = []
    encode = func_text.encode

    def encoding(func):
        events.append("text")
        return encode(func)

    def pool_in_turn(builder, args, tasks, cache_dir, workers, group_size=1):
        sent = []
        for task in tasks:
            if not sent:
                events.append("pool started")
            events.append("sent")
            sent.append(task)
        for task in sent:
            outcome = compile_pool.compile_one(builder, args, task)
            events.append("worker done")
            yield outcome

    def loading(func, **options):
        kernel = compile_one(func, **options)
        events.append("loaded" if kernel.from_cache else "compiled here")
        return kernel

    monkeypatch.setattr(func_text, "encode", encoding)
    monkeypatch.setattr(compile_pool, "compile_in_pool", pool_in_turn)
    monkeypatch.setattr(importlib.import_module("tilelang.jit"), "compile", loading)
    kernels = par_compile.par_compile([*_prim_funcs(), scaled.get_tir(24, 4.0)], num_workers=2, out_idx=-1,
                                      target="c")
    _check(kernels)
    assert events == ["compiled here",  # the first kernel, timed
                      "text", "text",  # two texts (one kernel is not worth a pool)
                      "pool started", "sent", "sent", "text", "sent",  # the third text after the start
                      "worker done", "loaded", "worker done", "loaded", "worker done", "loaded"]  # each
    # loaded before the next is done

def out_of_range_parallel(n):
    @T.prim_func
    def main(data: T.Tensor((4, n), "float32")):
        with T.Kernel(4, threads=128) as bx:
            frag = T.alloc_fragment((128,), "float32")
            for i in T.Parallel(n):
                frag[i] = 0
            for i in T.Parallel(128):
                data[bx, i] = frag[i] + 1

    return main


def test_a_prim_func_failing_in_a_worker_fails_here_at_the_users_line(tmp_path, monkeypatch, pool_starts_at_once):
    """The worker's function is read from text, whose lines are not the user's: the
    failing kernel compiles again here and raises the error a compile gives."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    funcs = [*_prim_funcs(), out_of_range_parallel(T.dynamic("n"))]
    with pytest.raises(tilelang.LanguageError, match=r"fragment 'frag' is indexed by i, the variable of "
                                                     r"T.Parallel\(n\)") as err:
        tilelang.par_compile(funcs, num_workers=2, out_idx=-1, target="c")
    assert f"{__file__}:" in str(err.value) and "frag[i] = 0" in str(err.value)
    kernels = tilelang.par_compile(funcs, num_workers=2, ignore_error=True, out_idx=-1, target="c")
    assert kernels[-1] is None and all(k.from_cache for k in kernels[1:-1])
    _check(kernels[:-1])


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

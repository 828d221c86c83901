"""The kernel cache: hits across processes, keys, corruption, the disable switch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tilelang
from tilelang.cache import KernelCache
from tilelang.testing.kernels import elementwise_add

HERE = Path(__file__).parent

SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, tilelang
    sys.path.insert(0, {here!r})
    from tilelang.testing.kernels import elementwise_add
    k = tilelang.compile(elementwise_add(24, 8), out_idx=[-1], target="cpu")
    a = np.ones((24, 8), "float32")
    assert (k(a, a) == 2).all()
    print("FROM_CACHE" if k.from_cache else "COMPILED", k.cache_key)
    """
)


def run_fresh(cache_dir: Path, **extra_env: str) -> str:
    env = {**os.environ, "TILELANG_CACHE_DIR": str(cache_dir), **extra_env}
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(here=str(HERE))],
                          capture_output=True, text=True, env=env, check=True)
    return proc.stdout.strip()


def test_cache_hit_from_a_fresh_process(tmp_path):
    first = run_fresh(tmp_path)
    second = run_fresh(tmp_path)
    assert first.startswith("COMPILED")
    assert second.startswith("FROM_CACHE")
    assert first.split()[1] == second.split()[1]


def test_disable_switch_never_reads_or_writes(tmp_path):
    assert run_fresh(tmp_path, TILELANG_DISABLE_CACHE="1").startswith("COMPILED")
    assert run_fresh(tmp_path, TILELANG_DISABLE_CACHE="1").startswith("COMPILED")
    assert not any(p.name == "artifact.json" for p in tmp_path.rglob("*"))


def test_key_covers_target_and_pass_configs():
    func = elementwise_add(8, 8)
    keys = {
        tilelang.compile(func, target="llvm").cache_key,
        tilelang.compile(func, target="c").cache_key,
        tilelang.compile(func, target="llvm", pass_configs={"tl.disable_vectorize": True}).cache_key,
        tilelang.compile(func, target="llvm", out_idx=[-1]).cache_key,
    }
    assert len(keys) == 4


def test_corrupt_entry_is_rebuilt_with_a_warning():
    func = elementwise_add(8, 4)
    first = tilelang.compile(func, out_idx=[-1], target="cpu")
    entry = KernelCache().entry(first.cache_key)
    # replace (never rewrite in place: this process has the library mapped)
    (entry / "kernel.so").unlink()
    (entry / "kernel.so").write_bytes(b"not a library")
    with pytest.warns(RuntimeWarning, match="is corrupt .*kernel.so does not match its recorded hash"):
        again = tilelang.compile(func, out_idx=[-1], target="cpu")
    assert not again.from_cache
    a = np.ones((8, 4), "float32")
    np.testing.assert_array_equal(again(a, a), 2 * a)


def test_compiler_fingerprint_covers_python_and_headers(tmp_path, monkeypatch):
    """A changed device header (pasted into kernels by codegen) must miss the cache too."""
    import tilelang
    from tilelang.jit.kernel import compiler_fingerprint

    fingerprint = getattr(compiler_fingerprint, "__wrapped__", compiler_fingerprint)
    (tmp_path / "pass.py").write_text("X = 1\n")
    (tmp_path / "helpers.h").write_text("// v1\n")
    monkeypatch.setattr(tilelang, "__path__", [str(tmp_path)])
    first = fingerprint()
    (tmp_path / "helpers.h").write_text("// v2\n")
    second = fingerprint()
    (tmp_path / "pass.py").write_text("X = 2\n")
    assert len({first, second, fingerprint()}) == 3

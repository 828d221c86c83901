"""The request index: a disk-cache hit in a new process without building the IR or
importing TVM (tilelang.jit.request_key, tilelang.cache.RequestIndex), and the stat-keyed
compiler fingerprint. Behaviour, not timing: what a hit imports, what changes a key, what
a stale or corrupt record does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import tilelang
from tilelang.cache import KernelCache, RequestIndex
from tilelang.jit import fingerprint
from tilelang.jit.request_key import REQUEST_CACHE_ENV, request_key

KERNELS = textwrap.dedent(
    """
    import tilelang

    SCALE = {scale}


    @tilelang.jit(out_idx=[-1], target="cpu", execution_backend={backend!r})
    def scaled_add(M, N, block_M=8, dtype="float32"):
        import tilelang.language as T  # inside the builder: the hit never runs it (test_lazy_language_import covers the top-level import)

        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=8) as bx:
                for i, j in T.Parallel(block_M, N):
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] * SCALE + B[bx * block_M + i, j]

        return main
    """
)

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {folder!r})
    from kernels import scaled_add
    kernel = scaled_add(16, 8)
    loaded = sorted(m for m in ("tvm", "torch", "numpy") if m in sys.modules)
    import numpy as np
    a = np.ones((16, 8), "float32")
    numpy_ok = bool((kernel(a, a) == {scale} + 1).all())
    torch_ok = None
    try:
        import torch
    except ImportError:
        pass
    else:  # a launcher made before torch was imported takes torch tensors once it is
        t = torch.ones(16, 8)
        out = kernel(t, t)
        torch_ok = isinstance(out, torch.Tensor) and bool((out == {scale} + 1).all())
    print(json.dumps({{"from_cache": kernel.from_cache, "loaded_at_hit": loaded, "numpy_ok": numpy_ok,
                      "torch_ok": torch_ok, "describe": kernel.describe()}}))
    """
)


def write_kernels(folder: Path, backend: str, scale: float = 2.0) -> None:
    (folder / "kernels.py").write_text(KERNELS.format(backend=backend, scale=scale))


def run_child(folder: Path, cache: Path, scale: float = 2.0) -> dict:
    # no bytecode: an edit within the second that keeps the size would reuse a stale .pyc
    env = {**os.environ, "TILELANG_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop(REQUEST_CACHE_ENV, None)
    proc = subprocess.run([sys.executable, "-c", CHILD.format(folder=str(folder), scale=scale)],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["tvm_ffi", "cython"])
def test_a_hit_in_a_new_process_imports_no_tvm(tmp_path, backend):
    if backend == "cython":
        pytest.importorskip("Cython")
    write_kernels(tmp_path, backend)
    cache = tmp_path / "cache"
    cold = run_child(tmp_path, cache)
    hit = run_child(tmp_path, cache)
    assert not cold["from_cache"] and "tvm" in cold["loaded_at_hit"]
    assert hit["from_cache"]
    assert "tvm" not in hit["loaded_at_hit"], hit
    if backend == "cython":  # its launcher waits for numpy/torch; tvm_ffi's import loads torch
        assert hit["loaded_at_hit"] == [], hit
    assert hit["numpy_ok"] and hit["torch_ok"] in (True, None), hit
    assert hit["describe"] == cold["describe"]


def test_an_edited_global_compiles_again_in_a_new_process(tmp_path):
    write_kernels(tmp_path, "tvm_ffi", scale=2.0)
    cache = tmp_path / "cache"
    assert not run_child(tmp_path, cache, scale=2.0)["from_cache"]
    write_kernels(tmp_path, "tvm_ffi", scale=3.0)
    edited = run_child(tmp_path, cache, scale=3.0)
    assert not edited["from_cache"] and edited["numpy_ok"], edited


# -- the key, in this process ------------------------------------------------------------
OFFSET = 1


def builder(M, N, dtype="float32"):
    return (M, N, dtype, OFFSET)


def key(*args, options=None, **kwargs):
    return request_key(builder, args, kwargs, options or {"target": "cpu", "out_idx": [-1]})


def test_the_key_covers_arguments_defaults_globals_and_options(monkeypatch):
    first = key(16, 8)
    assert first == key(16, 8)
    assert first != key(16, 9)
    assert first != key(16, 8, dtype="float16")
    assert first != key(16, 8.0)  # 8 and 8.0 build different IR
    assert first != key(16, 8, options={"target": "cpu", "out_idx": [0]})
    assert first != key(16, 8, options={"target": "c", "out_idx": [-1]})
    monkeypatch.setattr(builder, "__defaults__", ("float16",))
    assert first != key(16, 8)
    monkeypatch.undo()
    monkeypatch.setitem(globals(), "OFFSET", 2)
    assert first != key(16, 8)
    monkeypatch.undo()
    monkeypatch.setenv("TILELANG_SOMETHING", "1")
    assert first != key(16, 8)


def test_a_closure_value_enters_the_key():
    def make(scale):
        def closure_builder(M):
            return M * scale
        return closure_builder

    assert request_key(make(2), (4,), {}, {"target": "cpu"}) != request_key(make(3), (4,), {}, {"target": "cpu"})


def test_what_cannot_be_keyed_takes_the_ordinary_path(monkeypatch):
    assert key(16, object()) is None  # an arbitrary object has no sound encoding
    assert request_key(eval("lambda M: M"), (4,), {}, {"target": "cpu"}) is None  # no source file
    monkeypatch.setenv(REQUEST_CACHE_ENV, "0")
    assert key(16, 8) is None


# -- records: stale and corrupt ----------------------------------------------------------
def elementwise(M, N):
    import tilelang.language as T

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=8) as _:
            for i, j in T.Parallel(M, N):
                C[i, j] = A[i, j] + 1.0

    return main


def test_a_record_of_an_evicted_kernel_compiles_again():
    jitted = tilelang.jit(out_idx=[-1], target="cpu")(elementwise)
    first = jitted(8, 4)
    shutil.rmtree(KernelCache().entry(first.cache_key))  # as the size limit evicts it
    again = tilelang.jit(out_idx=[-1], target="cpu")(elementwise)(8, 4)
    assert not again.from_cache
    a = np.zeros((8, 4), "float32")
    np.testing.assert_array_equal(again(a), a + 1)


def test_a_corrupt_record_is_removed_with_a_warning():
    jitted = tilelang.jit(out_idx=[-1], target="cpu")(elementwise)
    jitted(8, 2)
    request = request_key(elementwise, (8, 2), {}, jitted.options)
    entries = KernelCache(subdir="requests")
    path = entries.entry(request)
    (path / "artifact.json").unlink()  # replaced, never rewritten in place
    (path / "artifact.json").write_text("[1, 2]")
    with pytest.warns(RuntimeWarning, match="is corrupt .*artifact.json does not match its recorded hash"):
        again = tilelang.jit(out_idx=[-1], target="cpu")(elementwise)(8, 2)
    assert again.from_cache  # found through the IR's key instead, and remembered again
    assert RequestIndex(KernelCache()).lookup(request)["kernel"] == again.cache_key


def test_a_hit_through_the_index_resolves_its_context_on_demand():
    jitted = tilelang.jit(out_idx=[-1], target="cpu")(elementwise)
    jitted(4, 4)
    loaded = tilelang.jit(out_idx=[-1], target="cpu")(elementwise)(4, 4)
    assert loaded.from_cache and loaded.execution_backend == "tvm_ffi"
    assert str(loaded.target.kind.name) == "llvm"  # the full context, built when asked
    assert loaded.prim_func.attrs["global_symbol"] == "main"
    assert "tl.device_compile_flags" not in loaded.pass_configs


# -- the compiler fingerprint's stat memo ------------------------------------------------
def test_the_fingerprint_memo_follows_content_not_timestamps(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(fingerprint, "RACY_SECONDS", 0.5)
    source = tmp_path / "tree" / "pass.py"
    source.parent.mkdir()
    source.write_text("X = 1\n")
    assert fingerprint.tree_fingerprint([source.parent]) == fingerprint._hash_files(
        fingerprint._source_files([source.parent]))
    assert not (tmp_path / "cache" / "fingerprints").exists()  # racy: just written, not remembered
    old = time.time() - 3600
    os.utime(source, (old, old))
    time.sleep(fingerprint.RACY_SECONDS + 0.1)  # the ctime must age too
    first = fingerprint.tree_fingerprint([source.parent])
    assert len(list((tmp_path / "cache" / "fingerprints").glob("*.sha256"))) == 1
    assert fingerprint.tree_fingerprint([source.parent]) == first  # from the memo
    source.write_text("X = 2\n")  # same size, and the mtime set back: only ctime tells
    os.utime(source, (old, old))
    assert fingerprint.tree_fingerprint([source.parent]) != first

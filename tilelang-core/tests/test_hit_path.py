"""What a disk-cache hit in a new process spends on the request key: the compiler and
plugin fingerprints walk their source folders once (scandir, one listing per folder shared
by every tree that holds it) and name the same files, in the same order, as ``os.walk`` did,
so their hashes (and every remembered fingerprint) stay what they were; an eager kernel's
hit (tilelang.jit.eager_index) imports no TVM, as a classic builder's does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tilelang.jit import fingerprint
from tilelang.jit.request_key import request_key


def walked(roots: list[Path]) -> list[tuple[Path, str]]:
    """The fingerprint's file list as ``os.walk`` made it before (the reference)."""
    found = []
    for root in sorted(set(roots)):
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in names:
                if name.endswith(fingerprint.COMPILER_SOURCE_SUFFIXES):
                    found.append((root, os.path.relpath(os.path.join(folder, name), root)))
    return sorted(found, key=lambda item: (str(item[0]), item[1]))


def tree(base: Path) -> Path:
    """Sources nested three deep, bytecode, a data file, and a link to a folder (listed by
    os.walk but not entered) and to a file (hashed through the link)."""
    for relative, text in {"pass.py": "X = 1\n", "op/gemm.py": "Y = 2\n", "op/inc/tl.h": "#pragma once\n",
                           "op/inc/deep/t.cuh": "//\n", "op/__pycache__/gemm.pyc": "", "data.json": "{}",
                           "outside/x.py": "Z = 3\n", "a_b.py": "", "a/b.py": ""}.items():
        path = base / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (base / "op" / "linked").symlink_to(base / "outside", target_is_directory=True)
    (base / "op" / "alias.py").symlink_to(base / "pass.py")
    return base


def test_the_walk_names_what_os_walk_named(tmp_path: Path) -> None:
    root = tree(tmp_path / "src")
    roots = [root, root / "op", tmp_path / "missing"]  # nested roots and one that does not exist
    files = fingerprint._source_files(roots)
    assert [(r, rel) for r, rel, _ in files] == walked(roots)
    assert (root, os.path.join("op", "linked", "x.py")) not in [(r, rel) for r, rel, _ in files]
    assert all(info.st_size == (r / rel).stat().st_size for r, rel, info in files)


def test_one_listing_per_folder_within_a_block_and_edits_seen_after_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = tree(tmp_path / "src")
    listed: list[str] = []
    scandir = os.scandir

    def counting(path: str) -> object:
        listed.append(path)
        return scandir(path)

    monkeypatch.setattr(fingerprint.os, "scandir", counting)
    with fingerprint.shared_scans():
        outer = fingerprint._source_files([root])
        inner = fingerprint._source_files([root / "op"])  # a folder the first walk listed
        (root / "op" / "new.py").write_text("W = 4\n")
        assert fingerprint._source_files([root]) == outer  # the listing of this block
    assert len(listed) == len(set(listed)), listed
    prefix = "op" + os.sep
    assert [rel for _, rel, _ in inner] == [rel[len(prefix):] for _, rel, _ in outer if rel.startswith(prefix)]
    after = [rel for _, rel, _ in fingerprint._source_files([root])]
    assert os.path.join("op", "new.py") in after


def test_a_request_key_lists_each_source_folder_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Core's ``tilelang`` folders and every editable plugin's source folder around one of
    them: a folder listed twice is a walk a hit pays twice. The fingerprints are computed
    afresh (their per-process caches emptied) and equal the separately computed ones."""
    listed: list[str] = []
    scandir = os.scandir

    def counting(path: str) -> object:
        listed.append(path)
        return scandir(path)

    def builder(M: int) -> int:
        return M

    expected = (fingerprint.compiler_fingerprint.__wrapped__(),
                {name: fingerprint.distribution_fingerprint.__wrapped__(name)
                 for name in ("tilelang-cuda", "tilelang-exec-cython", "tilelang-exec-nvrtc")})
    key = request_key(builder, (4,), {}, {"target": "cpu"})
    for cached in (fingerprint.compiler_fingerprint, fingerprint.distribution_fingerprint,
                   fingerprint.distributions_fingerprint):
        cached.cache_clear()
    monkeypatch.setattr(fingerprint.os, "scandir", counting)
    assert request_key(builder, (4,), {}, {"target": "cpu"}) == key
    assert listed and len(listed) == len(set(listed)), sorted(p for p in listed if listed.count(p) > 1)
    assert fingerprint.compiler_fingerprint() == expected[0]
    assert {name: fingerprint.distribution_fingerprint(name) for name in expected[1]} == expected[1]


# -- eager kernels (tilelang.jit.eager_index) ----------------------------------------------
EAGER = textwrap.dedent(
    """
    import tilelang
    import tilelang.language as T


    @tilelang.jit(target="cpu", execution_backend="tvm_ffi")
    def scale_both(A, scale, block_M=8, dtype="float32"):  # T.float32 as a default would load TVM
        M, N = T.const("M, N")
        A: T.Tensor((M, N), dtype)
        C = T.empty((M, N), dtype)
        D = T.empty((M, N), dtype)
        with T.Kernel(T.ceildiv(M, block_M), threads=8) as bx:
            for i, j in T.Parallel(block_M, N):
                C[bx * block_M + i, j] = A[bx * block_M + i, j] * scale
                D[bx * block_M + i, j] = A[bx * block_M + i, j] + scale
        return D, C


    @tilelang.jit(target="cpu", execution_backend="tvm_ffi")
    def shift(A, n):
        M = T.const("M")
        A: T.Tensor((M,), "float32")
        n: T.int32  # a run-time scalar: its position among the arguments comes from the source
        B = T.empty((M,), "float32")
        with T.Kernel(1, threads=8):
            for i in T.Parallel(M):
                B[i] = A[i] + n
        return B
    """
)

EAGER_CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {folder!r})
    import numpy as np
    import eager_kernels

    a = np.arange(16 * 8, dtype="float32").reshape(16, 8)
    d, c = eager_kernels.scale_both(a, 2.0)
    v = np.arange(8, dtype="float32")
    shifted = [eager_kernels.shift(v, n) for n in (3, -5)]
    tvm_at_hit = "tvm" in sys.modules
    ok = bool(np.array_equal(d, a + 2.0) and np.array_equal(c, a * 2.0)
              and np.array_equal(shifted[0], v + 3) and np.array_equal(shifted[1], v - 5))
    other = np.ones((24, 8), "float32")  # a shape no process compiled: the compile path
    d2, c2 = eager_kernels.scale_both(other, 3.0)
    ok_other = bool(np.array_equal(d2, other + 3.0) and np.array_equal(c2, other * 3.0))
    kernel = eager_kernels.scale_both.compile(a, 2.0)
    print(json.dumps({{"tvm_at_hit": tvm_at_hit, "ok": ok, "ok_other": ok_other, "from_cache": kernel.from_cache}}))
    """
)


def test_an_eager_kernel_hits_the_cache_in_a_new_process_without_tvm(tmp_path: Path) -> None:
    (tmp_path / "eager_kernels.py").write_text(EAGER)
    env = {**os.environ, "TILELANG_CACHE_DIR": str(tmp_path / "cache"), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("TILELANG_JIT_REQUEST_CACHE", None)

    def run() -> dict:
        proc = subprocess.run([sys.executable, "-c", EAGER_CHILD.format(folder=str(tmp_path))],
                              capture_output=True, text=True, env=env, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    cold = run()
    assert cold["tvm_at_hit"] and cold["ok"] and cold["ok_other"], cold
    for _ in range(3):  # others editing this checkout change the request key: compiled again
        hit = run()
        if not hit["tvm_at_hit"]:
            break
    assert hit == {"tvm_at_hit": False, "ok": True, "ok_other": True, "from_cache": True}, hit

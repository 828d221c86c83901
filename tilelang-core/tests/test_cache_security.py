"""The caches on a shared machine, probed as another local user or a careless one would.

A second local user is simulated, since tests do not run as root and cannot chown: a
folder "owned by another user" is one whose owner the check sees as foreign because the
uid it compares against (``tilelang.cache.folders.current_uid``) is patched; "planted"
files are written by this user into places only a second user with write access to the
folder could write. Both CPU execution backends run where loading code is involved.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import tilelang
from tilelang.cache import ARTIFACT, RECORD, KernelCache, cache_subdir
from tilelang.cache import folders as cache_folders
from tilelang.cache.integrity import record_text
from tilelang.cache.limits import STALE_AFTER, max_bytes
from tilelang.errors import CacheError, CompileError
from tilelang.testing.kernels import elementwise_add

BACKENDS = [pytest.param("cpu", "tvm_ffi", id="tvm_ffi"), pytest.param("c", "cython", id="cython")]
ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(path))
    monkeypatch.delenv("TILELANG_CACHE_MAX_BYTES", raising=False)
    return path


def build(target: str, backend: str, rows: int = 8) -> tilelang.JITKernel:
    return tilelang.compile(elementwise_add(rows, 4), out_idx=[-1], target=target, execution_backend=backend)


def check_result(kernel: tilelang.JITKernel, rows: int = 8) -> None:
    a = np.arange(rows * 4, dtype="float32").reshape(rows, 4)
    b = np.full((rows, 4), 0.5, dtype="float32")
    np.testing.assert_array_equal(kernel(a, b), a + b)


def build_warned(target: str, backend: str, rows: int = 8) -> tuple[tilelang.JITKernel, list[str]]:
    """Compile, returning tilelang's warnings (messages) raised meanwhile."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = build(target, backend, rows)
    return kernel, [str(w.message) for w in caught if str(w.message).startswith("tilelang:")]


def library(entry: Path) -> Path:
    (found,) = [p for p in entry.iterdir() if p.name.endswith(".so")]
    return found


def rewrite_record(entry: Path, key: str) -> None:
    """What a careful editor would do: recompute files.txt after changing the entry."""
    files = {p.name: p.read_bytes() for p in entry.iterdir() if p.name != RECORD}
    (entry / RECORD).unlink()
    (entry / RECORD).write_text(record_text(key, files))


def replace(path: Path, data: bytes) -> None:
    # replaced, not rewritten in place: this process may have the old library mapped
    path.unlink()
    path.write_bytes(data)


# -- who may write the cache ------------------------------------------------------------


def test_every_cache_lives_under_the_chosen_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TILELANG_CACHE_DIR=<shared>/mine used to put extensions in <shared>/cython, a folder
    any user of <shared> could create first."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "mine"))
    check_result(build("c", "cython"))
    assert sorted(os.listdir(tmp_path)) == ["mine"]
    assert {"kernels", "cython"} <= set(os.listdir(tmp_path / "mine"))
    assert cache_subdir("cubin") == tmp_path / "mine" / "cubin"


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_folders_are_0700_and_files_0600_whatever_the_umask(root: Path, target: str, backend: str) -> None:
    old = os.umask(0)
    try:
        check_result(build(target, backend))
    finally:
        os.umask(old)
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}
    assert {oct(m) for p, m in modes.items() if p.is_dir()} == {"0o700"}
    assert {oct(m) for p, m in modes.items() if p.is_file()} == {"0o600"}


def test_a_group_writable_root_is_refused(root: Path) -> None:
    root.mkdir(mode=0o700)
    os.chmod(root, 0o770)  # e.g. created by hand under umask 002, or by a group member
    message = (rf"tilelang refuses the cache folder {re.escape(str(root))} \(owner uid {os.getuid()}.*, mode 0770\): it is "
               r"writable by group, so another local user could plant code in it that would run as you\. "
               rf"Fix: if the folder is yours, `chmod 700 {re.escape(str(root))}`; otherwise set TILELANG_CACHE_DIR")
    with pytest.raises(CacheError, match=message):
        build("cpu", "tvm_ffi")
    os.chmod(root, 0o700)
    check_result(build("cpu", "tvm_ffi"))


def test_a_world_writable_extension_folder_is_refused(root: Path) -> None:
    """Another user who can write <root>/cython could plant an extension that cython loads."""
    (root / "cython").mkdir(parents=True)
    os.chmod(root, 0o700)
    os.chmod(root / "cython", 0o777)
    with pytest.raises(CacheError, match=rf"refuses the cache folder {re.escape(str(root / 'cython'))} .*mode 0777\): it is "
                                         r"writable by group and others"):
        build("c", "cython")


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_a_root_owned_by_another_user_is_refused(root: Path, monkeypatch: pytest.MonkeyPatch,
                                                 target: str, backend: str) -> None:
    check_result(build(target, backend))  # a cache of "the other user", with a hit waiting in it
    me = os.getuid()
    monkeypatch.setattr(cache_folders, "current_uid", lambda: me + 1)  # now we are someone else
    with pytest.raises(CacheError, match=rf"refuses the cache folder {re.escape(str(root))} \(owner uid {me}.*\): "
                                         rf"it is owned by uid {me}.*, not by you \(uid {me + 1}"):
        build(target, backend)


# -- what a cache entry may contain ------------------------------------------------------


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_a_swapped_library_is_rebuilt_not_loaded(root: Path, target: str, backend: str) -> None:
    first = build(target, backend)
    other = build(target, backend, rows=16)  # a valid library of another kernel: planted code
    entry = KernelCache().entry(first.cache_key)
    replace(library(entry), library(KernelCache().entry(other.cache_key)).read_bytes())
    again, warned = build_warned(target, backend)
    assert len(warned) == 1 and "does not match its recorded hash" in warned[0], warned
    assert not again.from_cache
    check_result(again)
    assert build(target, backend).from_cache  # the rebuilt entry is good


@pytest.mark.parametrize("target,backend", BACKENDS)
def test_a_truncated_library_is_caught_before_it_is_loaded(root: Path, target: str, backend: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    first = build(target, backend)
    so = library(KernelCache().entry(first.cache_key))
    replace(so, so.read_bytes()[:4096])
    loaded: list[Path] = []
    execution = first.context.execution_backend
    original = type(execution).load
    monkeypatch.setattr(type(execution), "load",
                        lambda self, artifact, directory, context: loaded.append(directory)
                        or original(self, artifact, directory, context))
    again, warned = build_warned(target, backend)
    assert len(warned) == 1 and f"{so.name} does not match its recorded hash" in warned[0], warned
    assert len(loaded) == 1 and not again.from_cache  # loaded once: the rebuilt entry
    check_result(again)


@pytest.mark.parametrize("edit", ["dtype", "truncate"])
def test_an_edited_artifact_json_is_rebuilt(root: Path, edit: str) -> None:
    first = build("cpu", "tvm_ffi")
    path = KernelCache().entry(first.cache_key) / ARTIFACT
    text = path.read_text()
    path.write_text(text.replace('"float32"', '"float64"') if edit == "dtype" else text[: len(text) // 2])
    again, warned = build_warned("cpu", "tvm_ffi")
    assert len(warned) == 1 and "artifact.json does not match its recorded hash" in warned[0], warned
    check_result(again)


@pytest.mark.parametrize("value", ["0 or __import__('os').system('touch PWNED') or 8", 4.0, True, -8])
def test_metadata_is_type_checked_before_it_reaches_generated_code(root: Path, value: object,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Even an entry whose record was recomputed: min_alignment is pasted into the source
    the torch fast path compiles, so anything but a non-negative int is a corrupt entry."""
    monkeypatch.chdir(root.parent)
    first = build("cpu", "tvm_ffi")
    entry = KernelCache().entry(first.cache_key)
    data = json.loads((entry / ARTIFACT).read_text())
    data["min_alignment"] = value
    replace(entry / ARTIFACT, json.dumps(data).encode())
    rewrite_record(entry, first.cache_key)
    again, warned = build_warned("cpu", "tvm_ffi")
    assert len(warned) == 1 and f"min_alignment = {value!r} is not what the compiler writes" in warned[0], warned
    check_result(again)
    assert not (root.parent / "PWNED").exists()


def test_the_fast_binder_refuses_metadata_that_is_not_an_int(root: Path) -> None:
    import dataclasses

    pytest.importorskip("torch")
    from tilelang.jit.fastbind import build_fast_binder

    artifact = dataclasses.replace(build("cpu", "tvm_ffi").artifact, min_alignment="16 or 1")
    with pytest.raises(CompileError, match=r"kernel 'main': its metadata is corrupt \(min_alignment = "
                                           r"'16 or 1': not what the compiler writes\)"):
        build_fast_binder(artifact, 1)


def test_a_truncated_record_is_corrupt(root: Path) -> None:
    """A shorter files.txt would otherwise check fewer files."""
    first = build("cpu", "tvm_ffi")
    record = KernelCache().entry(first.cache_key) / RECORD
    lines = record.read_text().splitlines(keepends=True)
    record.write_text("".join(line for line in lines if not line.startswith("kernel.so")))
    again, warned = build_warned("cpu", "tvm_ffi")
    assert len(warned) == 1 and "files.txt does not match its own digest" in warned[0], warned
    check_result(again)


def test_an_unrecorded_file_in_an_entry_is_corrupt(root: Path) -> None:
    first = build("c", "cython")
    entry = KernelCache().entry(first.cache_key)
    (entry / "_tl_cython_planted.so").write_bytes(b"\x7fELF")
    again, warned = build_warned("c", "cython")
    assert len(warned) == 1 and "unrecorded: ['_tl_cython_planted.so']" in warned[0], warned
    check_result(again)


def test_an_entry_replaced_by_a_file_is_rebuilt(root: Path) -> None:
    first = build("cpu", "tvm_ffi")
    entry = KernelCache().entry(first.cache_key)
    for path in entry.iterdir():
        path.unlink()
    entry.rmdir()
    entry.write_text("not a folder")
    again, warned = build_warned("cpu", "tvm_ffi")
    assert len(warned) == 1 and "is not a directory" in warned[0], warned
    check_result(again)
    assert entry.is_dir()


def test_a_truncated_cached_extension_is_rebuilt(root: Path) -> None:
    build("c", "cython")
    (extension,) = [p for p in (root / "cython").iterdir() if p.name.endswith(".so")]
    good = extension.read_bytes()
    replace(extension, good[:1000])  # a writer killed mid-copy, a full disk
    shutil.rmtree(root / "kernels")  # the next compile asks the extension cache
    again, warned = build_warned("c", "cython")
    assert len(warned) == 1 and f"cached file {extension} does not match its recorded digest" in warned[0], warned
    check_result(again)
    assert library(KernelCache().entry(again.cache_key)).read_bytes() == extension.read_bytes()
    assert len(extension.read_bytes()) > 1000


def test_an_extension_without_a_digest_is_rebuilt_quietly(root: Path) -> None:
    """Left by a tilelang that wrote no digests: not damage, so no warning."""
    build("c", "cython")
    (digest,) = (root / "cython").glob("*.sha256")
    digest.unlink()
    shutil.rmtree(root / "kernels")
    again, warned = build_warned("c", "cython")
    assert warned == [] and digest.is_file()
    check_result(again)


# -- when the cache cannot be used -------------------------------------------------------


@pytest.mark.parametrize("how", ["read-only HOME", "a file in the way"])
@pytest.mark.parametrize("target,backend", BACKENDS)
def test_an_unwritable_cache_compiles_with_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       target: str, backend: str, how: str) -> None:
    home = tmp_path / "home"
    if how == "read-only HOME":
        if ROOT_USER:
            pytest.skip("root writes into read-only folders")
        home.mkdir(mode=0o500)  # the default root cannot be created
        cache_home = home / ".cache"
    else:
        home.mkdir()
        (home / "cache").write_text("")  # works as root too: mkdir under a file fails
        cache_home = home / "cache" / "sub"
    monkeypatch.delenv("TILELANG_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    monkeypatch.setenv("HOME", str(home))
    try:
        kernel, warned = build_warned(target, backend)
        check_result(kernel)
    finally:
        os.chmod(home, 0o700)
    assert warned and all(re.search(r"cannot be used \((PermissionError|NotADirectoryError)", w) for w in warned), warned
    assert len(warned) == len(set(warned))  # once per folder
    assert not kernel.from_cache and sorted(os.listdir(home)) == ([] if how == "read-only HOME" else ["cache"])


@pytest.mark.skipif(not ROOT_USER, reason="chown needs root")
def test_a_root_really_owned_by_another_user_is_refused(root: Path) -> None:
    """As root the second user is real: a folder of uid 65534 (nobody)."""
    root.mkdir(mode=0o755)
    os.chown(root, 65534, 65534)
    with pytest.raises(CacheError, match=r"it is owned by uid 65534.*, not by you \(uid 0"):
        build("cpu", "tvm_ffi")


@pytest.mark.parametrize("switch", ["env", "function"])
def test_cython_with_the_cache_disabled_writes_nothing_there(root: Path, monkeypatch: pytest.MonkeyPatch,
                                                             switch: str) -> None:
    if switch == "env":
        monkeypatch.setenv("TILELANG_DISABLE_CACHE", "1")
    else:
        monkeypatch.setattr(tilelang.env, "_cache_enabled", True)  # restored to this after the test
        tilelang.disable_cache()
    check_result(build("c", "cython"))
    assert not root.exists()


# -- housekeeping ------------------------------------------------------------------------


def test_temporaries_of_dead_writers_are_removed_on_store(root: Path) -> None:
    first = build("cpu", "tvm_ffi")
    shard = KernelCache().entry(first.cache_key).parent
    dead, live = shard / ".0123abcd-dead", shard / ".4567cdef-live"
    for path in (dead, live):
        path.mkdir()
        (path / "kernel.so").write_bytes(b"half")
    old = time.time() - STALE_AFTER - 60
    os.utime(dead, (old, old))
    KernelCache().store(first.cache_key[:2] + "f" * 62, "{}", {})
    assert not dead.exists() and live.exists()


def test_the_size_limit_evicts_the_least_recently_used(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = {rows: build("cpu", "tvm_ffi", rows) for rows in (8, 16)}
    entries = {rows: KernelCache().entry(k.cache_key) for rows, k in kernels.items()}
    size = max(sum(p.stat().st_size for p in e.iterdir()) for e in entries.values())
    past = time.time() - 100
    for entry in entries.values():
        os.utime(entry, (past, past))
    assert build("cpu", "tvm_ffi", 8).from_cache  # a hit: 8 is now the most recently used
    monkeypatch.setenv("TILELANG_CACHE_MAX_BYTES", str(int(2.5 * size)))
    check_result(build("cpu", "tvm_ffi", 24), rows=24)
    assert entries[8].is_dir() and not entries[16].exists()
    assert sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) <= 2.5 * size + 4096


def test_cache_max_bytes_takes_suffixes(monkeypatch: pytest.MonkeyPatch) -> None:
    for text, value in [("1234", 1234), ("500M", 500 << 20), ("2G", 2 << 30), ("1.5k", 1536), ("", None)]:
        monkeypatch.setenv("TILELANG_CACHE_MAX_BYTES", text)
        assert max_bytes() == value
    monkeypatch.setenv("TILELANG_CACHE_MAX_BYTES", "lots")
    with pytest.raises(CacheError, match=r"TILELANG_CACHE_MAX_BYTES='lots' is not a size; give bytes or a "
                                         r"number with a K, M, G or T suffix"):
        max_bytes()


def test_a_fresh_artifact_with_a_symbolic_dimension_passes_the_pasted_value_check():
    # a fresh compile's symbol names are tvm_ffi.String (a str subclass); upstream's
    # dynamic-grid kernels failed on the GPU with "its metadata is corrupt" before any launch
    import tilelang.language as T
    from tilelang.jit.fastbind import _check_pasted

    n = T.dynamic("num_tokens")

    @T.prim_func
    def ones(out: T.Tensor[(n,), T.float32]):
        with T.Kernel(1, threads=1):
            for i in T.serial(n):
                out[i] = T.float32(1.0)

    artifact = tilelang.lower(ones, target="cpu")
    assert artifact.params[0].shape == ("num_tokens",) and type(artifact.params[0].shape[0]) is not str
    _check_pasted(artifact)

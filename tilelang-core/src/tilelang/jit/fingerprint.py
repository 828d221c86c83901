"""What the kernel cache key knows about the code that compiled a kernel.

A pass or a device header edited without a version bump must not hit kernels compiled by
the old code, in core and in every plugin distribution that took part in the compile (its
target backend's, its execution backend's), wherever that distribution's code lives —
a vendor's package is usually not under ``tilelang``. Each fingerprint is computed once per
process (plugins do not change under a running process; a test calls ``__wrapped__``).

Hashing core's sources (a few hundred files) costs ~10 ms, which a disk-cache hit in a new
process cannot afford; their stat signature (path, size, mtime, ctime, inode: one walk,
~1 ms) names a remembered hash instead, under ``<cache root>/fingerprints``. That is as
sound as Python's own bytecode cache, which trusts mtime and size, and more: ctime cannot be
set back by hand, and a tree with a file modified in the last few seconds is hashed and not
remembered (git's "racy clean" rule: an edit within the same clock tick keeps the mtime).
"""

from __future__ import annotations

import contextlib
import csv
import functools
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..backend.registry import origin

if TYPE_CHECKING:
    from ..backend.context import BackendContext

#: files whose contents shape generated code: Python passes, headers and templates that
#: codegen or a launcher pastes into what it compiles
COMPILER_SOURCE_SUFFIXES = (".py", ".h", ".cuh", ".hpp", ".c", ".pyx", ".pxd")
#: the distribution whose code every compile runs, hashed by ``compiler_fingerprint`` already
_CORE = "tilelang-core"


#: a tree with a file modified less than this many seconds ago is hashed, never remembered
RACY_SECONDS = 3.0
FINGERPRINTS = "fingerprints"


def _source_files(roots: Iterable[Path]) -> list[tuple[Path, str, os.stat_result]]:
    """(root, path relative to it, stat) of every compiler source file, in hashing order:
    one listing per folder (``__pycache__`` skipped; symbolic links to folders listed but
    not entered, as ``os.walk`` does), relative paths built while descending."""
    found = []
    for root in sorted(set(roots)):
        found += [(root, relative, info) for relative, info in _scan(str(root))]
    found.sort(key=lambda item: (str(item[0]), item[1]))
    return found


class _Scans(threading.local):
    #: folder -> its _scan, while a ``shared_scans()`` block is open in this thread
    memo: dict[str, list[tuple[str, os.stat_result]]] | None = None


_SCANS = _Scans()


def _scan(folder: str) -> list[tuple[str, os.stat_result]]:
    """(path relative to ``folder``, stat) of the compiler sources under ``folder``; a
    folder that cannot be listed holds none (as ``os.walk`` skips it)."""
    memo = _SCANS.memo
    if memo is not None and folder in memo:
        return memo[folder]
    found = []
    try:
        with os.scandir(folder) as entries:
            listed = list(entries)
    except OSError:
        listed = []
    for entry in listed:
        if entry.is_dir():  # a link to a folder is listed in os.walk's dirs, not entered
            if entry.name != "__pycache__" and not entry.is_symlink():
                found += [(f"{entry.name}{os.sep}{relative}", info) for relative, info in _scan(entry.path)]
        elif entry.name.endswith(COMPILER_SOURCE_SUFFIXES):
            found.append((entry.name, os.stat(entry.path)))
    if memo is not None:
        memo[folder] = found
    return found


@contextlib.contextmanager
def shared_scans() -> Iterator[None]:
    """Within the block a folder is listed and its files stat'ed once, however many trees
    hold it: core's fingerprint walks every ``tilelang`` package folder, an editable
    plugin's walks its source folder around one of them again. Only for fingerprints taken
    together (a request key): a file edited inside the block goes unseen until it ends."""
    outer = _SCANS.memo
    _SCANS.memo = {} if outer is None else outer
    try:
        yield
    finally:
        _SCANS.memo = outer


def _hash_files(files: list[tuple[Path, str, os.stat_result]]) -> str:
    digest = hashlib.sha256()
    for root, relative, _ in files:
        digest.update(relative.encode())
        digest.update((root / relative).read_bytes())
    return digest.hexdigest()


def _stat_signature(files: list[tuple[Path, str, os.stat_result]]) -> str:
    digest = hashlib.sha256(b"stat-v1")
    for root, relative, info in files:
        digest.update(f"{root}/{relative}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}"
                      f"\0{info.st_ino}\n".encode())
    return digest.hexdigest()


def tree_fingerprint(roots: Iterable[Path]) -> str:
    """The content hash of the compiler sources under ``roots``, remembered on disk under
    their stat signature (see the module's docstring for why that is sound)."""
    from ..cache.folders import cache_subdir
    from ..cache.integrity import read_file, write_file

    files = _source_files(roots)
    newest = max((max(info.st_mtime, info.st_ctime) for _, _, info in files), default=0.0)
    folder = cache_subdir(FINGERPRINTS) if time.time() - newest > RACY_SECONDS else None
    if folder is None:  # racy, or no cache: hash the contents
        return _hash_files(files)
    path = folder / _stat_signature(files)
    remembered = read_file(path, repair=True)
    if remembered is not None:
        return remembered.decode()
    fingerprint = _hash_files(files)
    try:
        write_file(path, fingerprint.encode())
    except OSError:
        pass  # a read-only cache: hashed again next time
    return fingerprint


@functools.cache
def compiler_fingerprint() -> str:
    """A hash of the sources under the ``tilelang`` package (core, and every plugin that
    installs a subpackage there), Python and the headers codegen pastes into kernels."""
    import tilelang

    return tree_fingerprint(Path(p) for p in tilelang.__path__)


def editable_source_roots(dist: object, pth_files: Iterable[Path] | None = None) -> list[Path] | None:
    """The source folders of an editable install (None for an ordinary one): the folders its
    ``.pth`` files put on sys.path, else the project folder of ``direct_url.json``.
    ``pth_files``: those files where the caller found them already (else ``dist.files``)."""
    text = dist.read_text("direct_url.json")  # type: ignore[attr-defined]
    try:
        info = json.loads(text) if text else {}
    except ValueError:
        info = {}
    if not info.get("dir_info", {}).get("editable"):
        return None
    if pth_files is None:
        pth_files = [Path(f.locate()) for f in dist.files or () if f.suffix == ".pth"]  # type: ignore[attr-defined]
    roots = []
    for file in pth_files:
        for line in file.read_text().splitlines():
            if line and not line.startswith(("#", "import ")) and Path(line).is_dir():
                roots.append(Path(line))
    if not roots and str(info.get("url", "")).startswith("file://"):
        project = Path(info["url"][len("file://"):])
        roots.append(project / "src" if (project / "src").is_dir() else project)
    return roots


@functools.cache
def distribution_fingerprint(name: str) -> str:
    """A hash of one installed distribution's code: for a wheel install, the file hashes its
    RECORD holds; for an editable install, the sources themselves. '' when not installed."""
    import importlib_metadata

    try:
        dist = importlib_metadata.distribution(name)
    except importlib_metadata.PackageNotFoundError:
        return ""
    digest = hashlib.sha256(f"{name}=={dist.version}".encode())
    roots = editable_source_roots(dist)
    if roots is not None:
        digest.update(tree_fingerprint(roots).encode())
        return digest.hexdigest()
    for file in sorted(dist.files or (), key=str):
        if file.suffix in COMPILER_SOURCE_SUFFIXES:
            recorded = file.hash.value if file.hash is not None else Path(file.locate()).read_bytes().hex()
            digest.update(f"{file}={recorded}\n".encode())
    return digest.hexdigest()


@functools.cache
def distributions_fingerprint(names: frozenset[str]) -> str:
    """One hash of the code of several distributions, as a request key needs it: what
    ``distribution_fingerprint`` covers for each, for less (a hit in a new process pays it).
    A distribution is hashed by its whole RECORD (every installed file's hash, METADATA and
    so its version included; a reinstall that changes any file's hash changes it, which
    costs a miss at worst) and, when editable, by its sources, all distributions' sources
    in one tree fingerprint (one stat walk, one remembered hash), instead of a RECORD parse,
    a METADATA parse and a remembered hash per distribution. Once per process, as the others."""
    import importlib_metadata

    digest = hashlib.sha256(b"distributions-v1")
    roots: list[Path] = []
    for name in sorted(names):
        try:
            dist = importlib_metadata.distribution(name)
        except importlib_metadata.PackageNotFoundError:
            digest.update(f"{name}: not installed\n".encode())
            continue
        record = dist.read_text("RECORD")
        if record is None:  # an installer that writes no RECORD: the distribution's own hash
            digest.update(f"{name}: {distribution_fingerprint(name)}\n".encode())
            continue
        digest.update(f"{name}: {hashlib.sha256(record.encode()).hexdigest()}\n".encode())
        pth_files = [Path(dist.locate_file(row[0])) for row in csv.reader(record.splitlines())
                     if row and row[0].endswith(".pth")]
        editable = editable_source_roots(dist, pth_files)
        if editable is not None:
            digest.update(f"{name} sources: {[str(root) for root in editable]}\n".encode())
            roots += editable
    if roots:
        digest.update(tree_fingerprint(roots).encode())
    return digest.hexdigest()


def plugins_fingerprint(context: BackendContext) -> str:
    """The distributions of the context's target and execution backends, each with the hash
    of its code (core's sources are in ``compiler_fingerprint``; a backend registered by a
    call rather than a plugin has no distribution, and hashes as '')."""
    names = {origin("backend", context.module.name)[0], origin("execution", context.execution_spec.name)[0]}
    names.discard(_CORE)
    return ",".join(f"{name}:{distribution_fingerprint(name)[:32]}" for name in sorted(names))

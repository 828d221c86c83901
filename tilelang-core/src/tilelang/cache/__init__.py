"""Content-addressed caches of compiled code, all under one root.

The root is TILELANG_CACHE_DIR (default: the per-user cache directory). Each cache is a
subfolder that ``cache_subdir(name)`` creates and checks: ``kernels`` (this module's
KernelCache), ``requests`` (RequestIndex: which kernel key a builder call compiled to),
``fingerprints`` (compiler source hashes by stat signature, tilelang.jit.fingerprint), and
those of plugins (``cython`` extensions and ``cython-translations``, CUDA ``cubin``s); the
autotuner keeps its results in ``autotuner``. Nothing is ever written next to the root.

A kernel entry is ``kernels/<key[:2]>/<key>/``: ``artifact.json`` (the serializable
CompiledArtifact), the files the execution backend built, and ``files.txt``, the integrity
record of all of them (see ``integrity.py``). The cache stores bytes under keys and knows
nothing of any backend. Writes are atomic (a complete temporary folder renamed into
place), concurrent processes compiling one kernel take a per-key file lock, and an entry
that fails its record is rebuilt with one warning, before anything of it is loaded.
Safety on a shared machine (folders 0700, owner and mode checked) is ``folders.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .. import env
from .folders import (
    cache_path,
    cache_subdir,
    check_folder,
    default_cache_dir,
    ensure_subdir,
    make_folder,
    warn_unavailable,
)
from .integrity import (
    RECORD,
    CorruptEntry,
    read_file,
    touch,
    verify_entry,
    write_entry,
    write_file,
)
from .limits import enforce_limit, max_bytes, remove_stale

ARTIFACT = "artifact.json"
KERNELS = "kernels"
REQUESTS = "requests"


def clear_cache() -> None:
    """Remove every cached kernel, extension and cubin (upstream's
    ``tilelang.cache.clear_cache``). Kernels already loaded in this process stay usable."""
    KernelCache().clear()


def cache_key(parts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class KernelCache:
    """Kernel entries under ``<root>/<subdir>`` (``kernels``; the request index uses
    ``requests``)."""

    def __init__(self, root: Path | None = None, enabled: bool | None = None, subdir: str = KERNELS) -> None:
        self.root = root or default_cache_dir()
        self.subdir = subdir
        # tilelang.disable_cache() and TILELANG_DISABLE_CACHE=1 both switch it off
        self.enabled = env.is_cache_enabled() if enabled is None else enabled
        self.max_bytes = max_bytes() if self.enabled else None  # a bad value fails before compiling

    @property
    def directory(self) -> Path:
        return self.root / self.subdir

    def entry(self, key: str) -> Path:
        return self.directory / key[:2] / key

    def _folder(self, *parts: str) -> Path | None:
        """``kernels/<parts>`` created and checked (the root too), or None with one
        warning when it cannot be created. CacheError for a folder others may write."""
        if not self.enabled:
            return None
        folder = ensure_subdir(self.root, self.subdir)
        try:
            for part in parts:
                folder = make_folder(folder / part) if folder is not None else None
        except OSError as err:
            warn_unavailable(self.directory, err)
            return None
        return folder

    def lock(self, key: str) -> Any:
        """The per-key lock of concurrent builders; a no-op when the cache is unusable."""
        lock_dir = self._folder("locks")
        if lock_dir is None:
            return contextlib.nullcontext()
        from filelock import FileLock

        return FileLock(str(lock_dir / f"{key}.lock"), timeout=600, mode=0o600)

    def _checked_path(self, key: str) -> Path | None:
        """The entry's path after checking every existing folder from the root down; None
        when the root or the shard does not exist yet (a miss)."""
        path = self.entry(key)
        for folder in (self.root, self.directory, path.parent):
            try:
                check_folder(folder)
            except (FileNotFoundError, NotADirectoryError):
                return None
        return path

    def lookup(self, key: str) -> tuple[str, Path] | None:
        """(artifact json, entry directory), or None on a miss. An entry that fails its
        integrity record (or is not a folder) is removed with one warning. Raises
        CacheError for a cache folder that another user may write."""
        if not self.enabled:
            return None
        try:
            path = self._checked_path(key)
        except OSError:  # e.g. an unreadable root: compile without the cache
            return None
        if path is None or not os.path.lexists(path):
            return None
        try:
            check_folder(path)
            text = verify_entry(path, key, ARTIFACT).decode()
        except (OSError, ValueError) as err:  # CorruptEntry and UnicodeDecodeError are ValueErrors
            self.discard(key, f"{type(err).__name__}: {err}" if not isinstance(err, CorruptEntry) else str(err))
            return None
        touch(path)
        return text, path

    def discard(self, key: str, why: str) -> None:
        """Remove a corrupt entry with one warning saying why; the caller rebuilds it."""
        path = self.entry(key)
        warnings.warn(f"tilelang: kernel cache entry {path} is corrupt ({why}); rebuilding it",
                      RuntimeWarning, stacklevel=3)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                hidden = path.with_name(f".{key[:8]}-corrupt-{os.getpid()}")
                os.rename(path, hidden)  # a concurrent reader sees a miss, never half an entry
                shutil.rmtree(hidden, ignore_errors=True)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as err:
            warn_unavailable(path, err)

    def store(self, key: str, artifact_json: str, files: Mapping[str, bytes]) -> Path | None:
        """Write an entry atomically; returns its directory, or None when the cache is off
        or cannot be written (one warning; the caller loads from a private folder)."""
        # through upstream's name for the save, which its compile-speed benchmark wraps
        # (benchmark/compile_speed: a global lock around it, for a before/after)
        return self._save_kernel_to_disk(key, artifact_json, files)

    def _save_kernel_to_disk(self, key: str, artifact_json: str, files: Mapping[str, bytes]) -> Path | None:
        shard = self._folder(key[:2])
        if shard is None:
            return None
        final = self.entry(key)
        remove_stale(shard)
        tmp = None
        try:
            tmp = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=shard))
            os.chmod(tmp, 0o700)
            write_entry(tmp, key, {**files, ARTIFACT: artifact_json.encode()})
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():  # a concurrent writer won the race: use theirs
                    raise
        except OSError as err:
            warn_unavailable(shard, err)
            return None
        finally:
            if tmp is not None and tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        if self.max_bytes is not None:
            enforce_limit(self.root, self.max_bytes, keep=final)
        return final

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class RequestIndex:
    """Which kernel key a request key (``tilelang.jit.request_key``) compiled to, with
    what loading that kernel needs before its context exists (a small JSON record per
    request, stored like a kernel entry: atomic, integrity-checked, under ``requests``)."""

    def __init__(self, cache: KernelCache) -> None:
        self._entries = KernelCache(cache.root, cache.enabled, REQUESTS)

    @property
    def enabled(self) -> bool:
        return self._entries.enabled

    def lookup(self, request: str) -> dict[str, Any] | None:
        """The record stored for ``request``, or None (a miss, or a record that is not a
        JSON object of strings: removed with one warning)."""
        hit = self._entries.lookup(request)
        if hit is None:
            return None
        try:
            record = json.loads(hit[0])
            if type(record) is not dict or not all(type(v) is str for v in record.values()):
                raise ValueError("not a JSON object of strings")
        except ValueError as err:
            self._entries.discard(request, f"request record: {err}")
            return None
        return record

    def store(self, request: str, record: Mapping[str, str]) -> None:
        self._entries.store(request, json.dumps(dict(record), sort_keys=True), {})


__all__ = ["ARTIFACT", "RECORD", "KernelCache", "RequestIndex", "cache_key", "cache_path", "cache_subdir", "clear_cache",
           "default_cache_dir", "read_file", "write_file"]

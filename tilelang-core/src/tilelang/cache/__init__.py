"""Content-addressed kernel cache.

It stores bytes under keys and knows nothing of any backend: an entry is a directory with
``artifact.json`` (the serializable CompiledArtifact) and the files the execution backend
built. Writes are atomic (a complete temporary directory renamed into place), concurrent
processes compiling one kernel take a per-key file lock, and an entry that cannot be read
is rebuilt with a warning.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

from .. import env

ARTIFACT = "artifact.json"


def default_cache_dir() -> Path:
    """TILELANG_CACHE_DIR (or tilelang.env.TILELANG_CACHE_DIR = path), else the per-user
    cache directory."""
    return Path(str(env.TILELANG_CACHE_DIR)).expanduser()


def clear_cache() -> None:
    """Remove every kernel in the cache directory (upstream's ``tilelang.cache.clear_cache``).
    Kernels already loaded in this process stay usable."""
    KernelCache().clear()


def cache_key(parts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


class KernelCache:
    def __init__(self, root: Path | None = None, enabled: bool | None = None) -> None:
        self.root = root or default_cache_dir()
        # tilelang.disable_cache() and TILELANG_DISABLE_CACHE=1 both switch it off
        self.enabled = env.is_cache_enabled() if enabled is None else enabled

    def entry(self, key: str) -> Path:
        return self.root / key[:2] / key

    def lock(self, key: str):
        from filelock import FileLock

        lock_dir = self.root / "locks"
        lock_dir.mkdir(parents=True, exist_ok=True)
        return FileLock(str(lock_dir / f"{key}.lock"), timeout=600)

    def lookup(self, key: str) -> tuple[str, Path] | None:
        """(artifact json, entry directory), or None on a miss. A corrupt entry is removed."""
        if not self.enabled:
            return None
        path = self.entry(key)
        if not path.is_dir():
            return None
        try:
            text = (path / ARTIFACT).read_text()
            manifest = (path / "files.txt").read_text().split()
            for line in manifest:
                name, _, digest = line.partition("=")
                if hashlib.sha256((path / name).read_bytes()).hexdigest() != digest:
                    raise ValueError(f"{name} does not match its recorded hash")
        except (OSError, ValueError) as err:
            warnings.warn(f"tilelang: kernel cache entry {path} is corrupt ({err}); rebuilding it",
                          RuntimeWarning, stacklevel=3)
            shutil.rmtree(path, ignore_errors=True)
            return None
        return text, path

    def store(self, key: str, artifact_json: str, files: Mapping[str, bytes]) -> Path | None:
        """Write an entry atomically; returns its directory (None when the cache is off)."""
        if not self.enabled:
            return None
        final = self.entry(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=final.parent))
        try:
            lines = []
            for name, data in sorted(files.items()):
                (tmp / name).write_bytes(data)
                lines.append(f"{name}={hashlib.sha256(data).hexdigest()}")
            (tmp / "files.txt").write_text("\n".join(lines) + "\n")
            (tmp / ARTIFACT).write_text(artifact_json)
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():  # a concurrent writer won the race: use theirs
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        return final

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


__all__ = ["KernelCache", "cache_key", "clear_cache", "default_cache_dir"]

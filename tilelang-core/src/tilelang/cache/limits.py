"""Housekeeping: leftovers of killed writers, and the optional size limit.

Writers build under names starting with a dot (``.<key8>-*`` folders of the kernel cache,
``.<name>-*.tmp`` files of the single-file caches) and rename into place; a writer killed
meanwhile leaves its temporary behind. A temporary lives for the seconds a write takes, so
one older than STALE_AFTER seconds belongs to a dead writer and is removed the next time
something is stored in that folder (one directory listing: cheap next to a compile).

TILELANG_CACHE_MAX_BYTES bounds everything under the cache root that holds compiled code
(kernel entries, cython extensions, cubins) and the small records beside them (request
index, source fingerprints): after a store, the least recently used
(oldest mtime; a hit touches it) go first, never the entry just stored.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from .. import env
from ..errors import CacheError

STALE_AFTER = 3600.0
#: the subfolders of the root that the size limit covers: sharded entries, then single files
SHARDED = ("kernels", "requests")
LIMITED = ("cython", "cubin", "fingerprints", "cython-translations")
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


def max_bytes() -> int | None:
    """TILELANG_CACHE_MAX_BYTES as a byte count (``500M``, ``2G``: powers of 1024), or
    None when unset or empty."""
    raw = env.TILELANG_CACHE_MAX_BYTES
    if raw is None or str(raw).strip() == "":
        return None
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    match = _SIZE.fullmatch(str(raw))
    if match is None:
        raise CacheError(f"TILELANG_CACHE_MAX_BYTES={raw!r} is not a size; give bytes or a number "
                         "with a K, M, G or T suffix (powers of 1024), e.g. 500M or 2G")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def remove_stale(folder: Path, now: float | None = None) -> None:
    """Remove dot-named temporaries older than STALE_AFTER from ``folder``."""
    deadline = (time.time() if now is None else now) - STALE_AFTER
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(".") or entry.name.endswith(".lock"):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_mtime > deadline:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
        except OSError:
            pass  # another process cleaned it first


def _tree_size(path: str) -> int:
    total = 0
    for top, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total


def _units(root: Path) -> Iterator[tuple[float, int, str, list[str]]]:
    """(last use, bytes, path, every path to remove) of each evictable unit."""
    for sharded in SHARDED:
        for shard in _scan(root / sharded):
            if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
                continue
            for entry in _scan(Path(shard.path)):
                if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                    yield entry.stat().st_mtime, _tree_size(entry.path), entry.path, [entry.path]
    for name in LIMITED:
        for entry in _scan(root / name):
            if entry.name.startswith(".") or entry.name.endswith((".lock", ".sha256")):
                continue
            info = entry.stat(follow_symlinks=False)
            yield info.st_mtime, info.st_size, entry.path, [entry.path, entry.path + ".sha256"]


def _scan(folder: Path) -> list[os.DirEntry]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def _remove(path: str) -> None:
    if os.path.isdir(path):
        # renamed first: a concurrent lookup sees a miss, never half an entry; a removal
        # cut short leaves a dot-name that remove_stale collects later
        parent, name = os.path.split(path)
        hidden = os.path.join(parent, f".{name[:8]}-evicted-{os.getpid()}")
        try:
            os.rename(path, hidden)
        except OSError:
            return
        shutil.rmtree(hidden, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def enforce_limit(root: Path, limit: int, keep: Path | None = None) -> int:
    """Evict least recently used units under ``root`` until they total at most ``limit``
    bytes; returns the bytes removed. ``keep`` (the entry just stored) is never evicted."""
    units = sorted(_units(root))
    total = sum(size for _, size, _, _ in units)
    removed = 0
    for _, size, path, paths in units:
        if total - removed <= limit:
            break
        if keep is not None and path == str(keep):
            continue
        for each in paths:
            _remove(each)
        removed += size
    return removed


__all__ = ["LIMITED", "SHARDED", "STALE_AFTER", "enforce_limit", "max_bytes", "remove_stale"]

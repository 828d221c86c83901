"""Integrity records: a truncated or corrupted file is found before anything loads it.

The threat they answer is corruption (a killed writer, a full disk, a bit flip, an edit by
hand), not another user: cache folders only their owner can write (``folders.py``) keep
other users out, and a record next to the data could not stop someone able to rewrite
both. So a record is a SHA-256 of every file an entry loads, metadata included, plus the
digest of the record itself (a truncated record would otherwise check fewer files) and
the key the entry was stored under (an entry copied under another key's name is refused).

Kernel entries: ``files.txt`` in the entry. Single files (cython extensions, cubins): a
``<name>.sha256`` file next to them, written before the file itself is published.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Mapping
from pathlib import Path

from .folders import replace_private, write_private

RECORD = "files.txt"
DIGEST_SUFFIX = ".sha256"


class CorruptEntry(ValueError):
    """An entry or file fails its integrity record (internal: the caller rebuilds it)."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _plain_name(name: str) -> bool:
    return bool(name) and name != RECORD and not name.startswith(".") \
        and not any(c in name for c in "/\\=\n\r\0")


def record_text(key: str, files: Mapping[str, bytes]) -> str:
    body = f"key={key}\n" + "".join(f"{name}={sha256(data)}\n" for name, data in sorted(files.items()))
    return body + f"record={sha256(body.encode())}\n"


def write_entry(directory: Path, key: str, files: Mapping[str, bytes]) -> None:
    """Write ``files`` (every one the entry will load) and their record into ``directory``."""
    for name, data in files.items():
        if not _plain_name(name):
            raise ValueError(f"cache entry file name {name!r} is not a plain file name")
        write_private(directory / name, data)
    write_private(directory / RECORD, record_text(key, files).encode())


def verify_entry(directory: Path, key: str, must_hold: str) -> bytes:
    """Check every file of the entry against its record; return ``must_hold``'s bytes (the
    ones that were hashed: no second read). Raises CorruptEntry or OSError."""
    text = (directory / RECORD).read_bytes().decode("utf-8", "replace")
    body, sep, last = text.rstrip("\n").rpartition("\n")
    body += sep
    if not last.startswith("record=") or last.removeprefix("record=") != sha256(body.encode()):
        raise CorruptEntry(f"{RECORD} does not match its own digest (truncated or edited)")
    lines = body.splitlines()
    if not lines or lines[0] != f"key={key}":
        raise CorruptEntry(f"{RECORD} belongs to another key")
    recorded: dict[str, str] = {}
    for line in lines[1:]:
        name, _, digest = line.partition("=")
        if not _plain_name(name) or name in recorded:
            raise CorruptEntry(f"{RECORD} names {name!r}")
        recorded[name] = digest
    present = {entry.name for entry in os.scandir(directory)} - {RECORD}
    if present != set(recorded) or must_hold not in recorded:
        extra, missing = sorted(present - set(recorded)), sorted(set(recorded) - present)
        raise CorruptEntry(f"its files differ from {RECORD} (unrecorded: {extra}, missing: {missing})")
    wanted = b""
    for name, digest in recorded.items():
        data = (directory / name).read_bytes()
        if sha256(data) != digest:
            raise CorruptEntry(f"{name} does not match its recorded hash")
        if name == must_hold:
            wanted = data
    return wanted


def write_file(path: Path, data: bytes) -> None:
    """Publish ``path`` atomically, its digest first: a reader that sees the file also
    sees a digest (of these bytes, or of the ones a concurrent writer of the same key
    produced, which the reader then refuses and the next locked builder rewrites)."""
    replace_private(path.with_name(path.name + DIGEST_SUFFIX), f"{sha256(data)}\n".encode())
    replace_private(path, data)


def read_file(path: Path, *, repair: bool) -> bytes | None:
    """The bytes of ``path`` if they match their digest; None when missing or not
    matching. With ``repair`` (call it holding the key's lock), a file that does not
    match is removed with one warning, so that it is built again."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    digest = path.with_name(path.name + DIGEST_SUFFIX)
    try:
        recorded = digest.read_text().strip()
    except FileNotFoundError:
        # written by a tilelang before digests (a writer publishes the digest first, and
        # only this user can write here): not damage, so rebuilt without a warning
        recorded = None
    except (OSError, UnicodeDecodeError):
        recorded = ""
    if recorded == sha256(data):
        touch(path)
        return data
    if repair and recorded is not None:
        warnings.warn(f"tilelang: cached file {path} does not match its recorded digest (truncated or "
                      "corrupted); rebuilding it", RuntimeWarning, stacklevel=3)
    if repair:
        for stale in (path, digest):
            try:
                os.unlink(stale)
            except FileNotFoundError:
                pass
    return None


def touch(path: Path) -> None:
    """Mark ``path`` used now (least-recently-used eviction reads its mtime)."""
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only cache still serves hits


__all__ = ["DIGEST_SUFFIX", "RECORD", "CorruptEntry", "read_file", "record_text", "sha256", "touch",
           "verify_entry", "write_entry", "write_file"]

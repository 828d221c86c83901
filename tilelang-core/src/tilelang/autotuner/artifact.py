"""A kernel-cache entry as bytes, so that a kernel compiled on another machine can travel
back to the tuning process and be stored in its kernel cache (and to a measuring worker on
a third machine). The entry is the unit: the execution backend's artifact.json and the
files it built, which is everything a cache hit loads (``tilelang.cache``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..cache import ARTIFACT, RECORD, KernelCache


@dataclass(frozen=True)
class KernelArtifact:
    """The entry stored under ``key``: its artifact.json text and its other files."""

    key: str
    artifact_json: str
    files: Mapping[str, bytes]

    @property
    def size(self) -> int:
        return len(self.artifact_json) + sum(len(data) for data in self.files.values())


def read_artifact(cache: KernelCache, key: str) -> KernelArtifact | None:
    """The entry's bytes, checked against its integrity record; None when it is not there."""
    found = cache.lookup(key)
    if found is None:
        return None
    text, path = found
    files = {}
    for name in sorted(os.listdir(path)):
        if name in (ARTIFACT, RECORD) or name.startswith("."):
            continue
        with open(path / name, "rb") as f:
            files[name] = f.read()
    return KernelArtifact(key, text, files)


def store_artifact(cache: KernelCache, artifact: KernelArtifact) -> bool:
    """Put the entry in ``cache`` unless it holds it already; False when the cache is off
    or cannot be written (the cache warns once)."""
    if not cache.enabled:
        return False
    if cache.lookup(artifact.key) is not None:
        return True
    return cache.store(artifact.key, artifact.artifact_json, artifact.files) is not None


__all__ = ["KernelArtifact", "read_artifact", "store_artifact"]

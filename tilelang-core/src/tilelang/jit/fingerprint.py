"""What the kernel cache key knows about the code that compiled a kernel.

A pass or a device header edited without a version bump must not hit kernels compiled by
the old code, in core and in every plugin distribution that took part in the compile (its
target backend's, its execution backend's), wherever that distribution's code lives —
a vendor's package is usually not under ``tilelang``. Each fingerprint is computed once per
process (plugins do not change under a running process; a test calls ``__wrapped__``).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..backend.registry import origin

if TYPE_CHECKING:
    from ..backend.context import BackendContext

#: files whose contents shape generated code: Python passes, headers and templates that
#: codegen or a launcher pastes into what it compiles
COMPILER_SOURCE_SUFFIXES = (".py", ".h", ".cuh", ".hpp", ".c", ".pyx", ".pxd")
#: the distribution whose code every compile runs, hashed by ``compiler_fingerprint`` already
_CORE = "tilelang-core"


def _hash_tree(digest: Any, roots: Iterable[Path]) -> None:
    for root in sorted(set(roots)):
        for path in sorted(p for suffix in COMPILER_SOURCE_SUFFIXES for p in root.rglob(f"*{suffix}")):
            if "__pycache__" in path.parts:
                continue
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())


@functools.cache
def compiler_fingerprint() -> str:
    """A hash of the sources under the ``tilelang`` package (core, and every plugin that
    installs a subpackage there), Python and the headers codegen pastes into kernels."""
    import tilelang

    digest = hashlib.sha256()
    _hash_tree(digest, (Path(p) for p in tilelang.__path__))
    return digest.hexdigest()


def editable_source_roots(dist: object) -> list[Path] | None:
    """The source folders of an editable install (None for an ordinary one): the folders its
    ``.pth`` files put on sys.path, else the project folder of ``direct_url.json``."""
    text = dist.read_text("direct_url.json")  # type: ignore[attr-defined]
    try:
        info = json.loads(text) if text else {}
    except ValueError:
        info = {}
    if not info.get("dir_info", {}).get("editable"):
        return None
    roots = []
    for file in dist.files or ():  # type: ignore[attr-defined]
        if file.suffix == ".pth":
            for line in Path(file.locate()).read_text().splitlines():
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
        _hash_tree(digest, roots)
        return digest.hexdigest()
    for file in sorted(dist.files or (), key=str):
        if file.suffix in COMPILER_SOURCE_SUFFIXES:
            recorded = file.hash.value if file.hash is not None else Path(file.locate()).read_bytes().hex()
            digest.update(f"{file}={recorded}\n".encode())
    return digest.hexdigest()


def plugins_fingerprint(context: BackendContext) -> str:
    """The distributions of the context's target and execution backends, each with the hash
    of its code (core's sources are in ``compiler_fingerprint``; a backend registered by a
    call rather than a plugin has no distribution, and hashes as '')."""
    names = {origin("backend", context.module.name)[0], origin("execution", context.execution_spec.name)[0]}
    names.discard(_CORE)
    return ",".join(f"{name}:{distribution_fingerprint(name)[:32]}" for name in sorted(names))

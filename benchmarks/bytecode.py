"""Child processes that read and write Python bytecode in a private folder.

Where PYTHONDONTWRITEBYTECODE is set (this project's machines and the lent GPU host set it,
and the GPU bundle installs with --no-compile), every new process compiles each module it
imports from source: seconds for torch and TVM, tens of milliseconds for tilelang. An
installed package never pays that (pip compiles a wheel's modules), so a benchmark that
starts processes (imports, disk hits, compile workers, a Ray cluster) points them at a
folder of their own instead, and warms it with one throwaway process before its clock.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import MutableMapping


def use_private_bytecode(env: MutableMapping[str, str], folder: str) -> None:
    """Make the processes started with ``env`` cache bytecode in ``folder``."""
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder)


def bytecode_environment(private: bool) -> tuple[dict[str, str], tempfile.TemporaryDirectory | None]:
    """A copy of this process's environment for child processes and, when ``private``, the
    new bytecode folder it names (kept alive by the caller; removed when it is collected)."""
    env = dict(os.environ)
    if not private:
        return env, None
    pycache = tempfile.TemporaryDirectory(prefix="tilelang-bench-pycache-")
    use_private_bytecode(env, pycache.name)
    return env, pycache

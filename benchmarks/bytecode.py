"""Child processes that read and write Python bytecode in a private folder.

Where PYTHONDONTWRITEBYTECODE is set (this project's machines and the lent GPU host set it,
and the GPU bundle installs with --no-compile), every new process compiles each module it
imports from source: seconds for torch and TVM, tens of milliseconds for tilelang. An
installed package never pays that (pip compiles a wheel's modules), so a benchmark that
starts processes (imports, disk hits, compile workers, a Ray cluster) points them at a
folder of their own instead, and warms it with one throwaway process before its clock.
"""

from __future__ import annotations

from collections.abc import MutableMapping


def use_private_bytecode(env: MutableMapping[str, str], folder: str) -> None:
    """Make the processes started with ``env`` cache bytecode in ``folder``."""
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder)

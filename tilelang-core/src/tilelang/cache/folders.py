"""Cache folders a local user other than the owner cannot write.

Everything the caches hold is code this process will load (shared libraries, cubins, the
metadata a fast binder is generated from), so a folder another user can write is a way to
run code under the owner's account. Folders are therefore created 0700 (an explicit
chmod: the umask may be 000), and every cache folder on the path from the root down is
checked before use: owned by this process's uid and neither group- nor world-writable,
else a CacheError naming the folder, its owner and mode. The root's ancestors are the
user's choice (``/tmp`` is world-writable, but sticky, and not ours to judge).

A folder that cannot be created (a read-only HOME, a full disk) is not an attack: the
caller compiles without the cache and one warning per folder and process says so.
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
import warnings
from pathlib import Path

from .. import env
from ..errors import CacheError

FOLDER_MODE = 0o700
FILE_MODE = 0o600

_warned: set[str] = set()
_warned_lock = threading.Lock()


def current_uid() -> int | None:
    """The uid cache folders must belong to; None where the OS has no uids (Windows).
    A function so that tests can play a second local user without root."""
    return os.getuid() if hasattr(os, "getuid") else None


def default_cache_dir() -> Path:
    """The root every cache lives under: TILELANG_CACHE_DIR (or
    ``tilelang.env.TILELANG_CACHE_DIR = path``), else the per-user cache directory."""
    return Path(str(env.TILELANG_CACHE_DIR)).expanduser()


def cache_path(name: str) -> Path:
    """``<root>/<name>``, where the cache called ``name`` lives (no I/O)."""
    return default_cache_dir() / name


def _owner_name(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def check_folder(path: Path) -> None:
    """Raise CacheError unless ``path`` (an existing folder) is safe to load code from."""
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise NotADirectoryError(f"{path} is not a directory")
    me = current_uid()
    problems = []
    if me is not None and info.st_uid != me:
        problems.append(f"it is owned by {_owner_name(info.st_uid)}, not by you ({_owner_name(me)})")
    if me is not None and info.st_mode & 0o022:
        who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if info.st_mode & bit)
        problems.append(f"it is writable by {who}")
    if problems:
        mode = stat.S_IMODE(info.st_mode)
        raise CacheError(
            f"tilelang refuses the cache folder {path} (owner {_owner_name(info.st_uid)}, mode "
            f"{mode:04o}): {'; '.join(problems)}, so another local user could plant code in it that "
            f"would run as you. Fix: if the folder is yours, `chmod 700 {path}`; otherwise set "
            "TILELANG_CACHE_DIR to a folder of your own (e.g. under your home directory)."
        )


def make_folder(path: Path) -> Path:
    """Create ``path`` (its parent must exist) 0700 if missing, then check it."""
    try:
        os.mkdir(path, FOLDER_MODE)
    except FileExistsError:
        pass
    else:
        os.chmod(path, FOLDER_MODE)  # the umask may have taken bits away (0277: unwritable)
    check_folder(path)
    return path


def make_root(root: Path) -> Path:
    """Create the cache root (and, with the umask's modes, its missing ancestors)."""
    if not root.is_dir():
        root.parent.mkdir(parents=True, exist_ok=True)
    return make_folder(root)


def warn_unavailable(path: Path, err: BaseException) -> None:
    """One warning per folder and process: the cache is skipped, compiling still works."""
    with _warned_lock:
        if str(path) in _warned:
            return
        _warned.add(str(path))
    warnings.warn(
        f"tilelang: the cache folder {path} cannot be used ({type(err).__name__}: {err}); kernels "
        "compile without it in this process. Set TILELANG_CACHE_DIR to a writable folder of your "
        "own to cache them.", RuntimeWarning, stacklevel=3)


def ensure_subdir(root: Path, name: str) -> Path | None:
    """``<root>/<name>`` created 0700 and checked, root included; None, with one warning,
    when it cannot be created. CacheError when another user may write either."""
    path = root / name
    try:
        make_root(root)
        return make_folder(path)
    except OSError as err:
        warn_unavailable(path, err)
        return None


def cache_subdir(name: str) -> Path | None:
    """``<root>/<name>`` under the cache root, created 0700 and checked: the folder a cache
    of compiled code (``"cython"``, ``"cubin"``) lives in. None, with one warning, when it
    cannot be created; None, silently, when the cache is disabled (TILELANG_DISABLE_CACHE,
    ``tilelang.disable_cache()``): build somewhere private then. Raises CacheError when
    the root or the folder may be written by another user."""
    if not env.is_cache_enabled():
        return None
    return ensure_subdir(default_cache_dir(), name)


def _write_fd(fd: int, data: bytes) -> None:
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, FILE_MODE)  # explicit: the umask must not decide
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> None:
    """Write a new file readable and writable by its owner alone (0600, umask or not);
    ``path`` must not exist (O_EXCL: never follow a planted link)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    _write_fd(os.open(path, flags, FILE_MODE), data)


def replace_private(path: Path, data: bytes) -> None:
    """Write ``path`` atomically (0600): a reader sees the old file or the whole new one.
    The temporary name starts with a dot, which stale-file cleaning recognizes."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", suffix=".tmp", dir=path.parent)
    try:
        _write_fd(fd, data)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


__all__ = ["FILE_MODE", "FOLDER_MODE", "cache_path", "cache_subdir", "check_folder", "current_uid",
           "default_cache_dir", "ensure_subdir", "make_folder", "make_root", "replace_private", "warn_unavailable",
           "write_private"]

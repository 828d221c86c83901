"""The HIP toolchain: HIP source -> AMD GPU code object with ``hipcc --genco``, cached on
disk; code-object inspection (unbundling, disassembly) for tests and users.

Owned by the target backend and declared in its manifest (``TOOLCHAIN``), so that execution
backends compile through it without importing this package. ``HIP_PLATFORM=amd`` is always set:
hipcc otherwise picks NVIDIA's platform whenever nvcc is on the PATH.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tilelang.errors import BackendUnavailableError, CompileError
from tilelang.plugin import DeviceToolchain

OPTIONS = ("-O3", "-std=c++17")
_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_INSTALL_HINT = ("install the HIP compiler (Debian/Ubuntu: `apt-get install hipcc`; or ROCm's "
                 "/opt/rocm/bin/hipcc)")


def hipcc_path() -> str | None:
    found = shutil.which("hipcc")
    if found:
        return found
    default = "/opt/rocm/bin/hipcc"
    return default if os.access(default, os.X_OK) else None


def _env(tmp: str | None = None) -> dict[str, str]:
    """hipcc's environment; ``tmp`` becomes its TMPDIR: clang leaves an empty folder per
    compile (``<kernel>-XXXXXX``) in TMPDIR, which then goes with the compile's own folder."""
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    if tmp is not None:
        env["TMPDIR"] = tmp
    return env


@functools.cache
def hipcc_version() -> str:
    """hipcc's version banner (part of the code-object cache key)."""
    hipcc = hipcc_path()
    if hipcc is None:
        raise BackendUnavailableError(f"hipcc is not installed: {_INSTALL_HINT}")
    proc = subprocess.run([hipcc, "--version"], capture_output=True, text=True, env=_env(), check=False)
    return (proc.stdout + proc.stderr).strip()


def unavailable_reason() -> str | None:
    """None when HIP source can be compiled here, else why not and the fix."""
    return None if hipcc_path() else f"hipcc is not installed: {_INSTALL_HINT}"


def _compile_hipcc(source: str, arch: str, name: str) -> bytes:
    hipcc = hipcc_path()
    if hipcc is None:
        raise BackendUnavailableError(f"cannot compile kernel {name!r} for {arch}: hipcc is not installed; "
                                      f"{_INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="tilelang-hipcc-") as tmp:
        src, out = Path(tmp) / f"{name}.hip", Path(tmp) / f"{name}.hsaco"
        src.write_text(source)
        cmd = [hipcc, "--genco", f"--offload-arch={arch}", *OPTIONS, "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(tmp), check=False)
        if proc.returncode != 0:
            raise CompileError(f"hipcc failed for kernel {name!r} ({arch}):\n$ HIP_PLATFORM=amd "
                               f"{' '.join(cmd)}\n{proc.stderr}{proc.stdout}")
        return out.read_bytes()


def compile_code_object(source: str, arch: str, name: str = "kernel") -> bytes:
    """HIP source -> code object for ``arch`` (e.g. "gfx90a"), through the disk cache
    (``<cache root>/hsaco``, keyed by hipcc's version, the arch, the options and the source)."""
    key = hashlib.sha256("\0".join([hipcc_version(), arch, *OPTIONS, source]).encode()).hexdigest()
    # tilelang.cache: a folder only its owner may write (None: cache disabled or unusable),
    # and a digest checked before the bytes are used (a truncated object is rebuilt)
    from tilelang.plugin import cache_subdir, read_file, write_file

    directory = cache_subdir("hsaco")
    path = None if directory is None else directory / f"{key}.hsaco"
    cached = None if path is None else read_file(path, repair=True)
    if cached is not None:
        return cached
    code_object = _compile_hipcc(source, arch, name)
    if path is not None:
        try:
            write_file(path, code_object)  # atomic: concurrent compilers of one kernel agree
        except OSError as err:
            import warnings

            warnings.warn(f"tilelang: code object not cached in {directory}: {err}", stacklevel=2)
    return code_object


def compile_for_target(source: str, target: Any, name: str = "kernel") -> bytes:
    """The toolchain's compile step: source + normalized target -> code object."""
    from .target import arch_of

    return compile_code_object(source, arch_of(target), name)


def device_elf(code_object: bytes, arch: str) -> bytes:
    """The ELF of ``arch`` inside a clang offload bundle (what hipcc --genco writes), or
    the object itself when it is an ELF already. Bundle layout (clang's
    OffloadBundler.cpp): magic, u64 entry count, then per entry u64 offset, u64 size, u64
    id length and the id (``hipv4-amdgcn-amd-amdhsa--gfx90a``)."""
    if not code_object.startswith(_BUNDLE_MAGIC):
        return code_object
    pos = len(_BUNDLE_MAGIC)
    (count,) = struct.unpack_from("<Q", code_object, pos)
    pos += 8
    ids = []
    for _ in range(count):
        offset, size, id_len = struct.unpack_from("<QQQ", code_object, pos)
        pos += 24
        entry_id = code_object[pos:pos + id_len].decode()
        pos += id_len
        ids.append(entry_id)
        if entry_id.startswith("hip") and entry_id.split("--")[-1].split(":")[0] == arch.split(":")[0]:
            return code_object[offset:offset + size]
    raise CompileError(f"the code object holds no {arch} entry (entries: {', '.join(ids)})")


def objdump_path() -> str | None:
    """ROCm's LLVM, then the newest Debian/Ubuntu LLVM (hipcc's packages bring one), then PATH."""
    versioned = sorted(Path("/usr/lib").glob("llvm-*/bin/llvm-objdump"),
                       key=lambda p: int(p.parts[-3].split("-")[1]) if p.parts[-3].split("-")[1].isdigit() else 0,
                       reverse=True)
    for candidate in ("/opt/rocm/llvm/bin/llvm-objdump", *map(str, versioned)):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("llvm-objdump")


def disassemble(code_object: bytes, arch: str) -> str:
    """The GCN/CDNA assembly of a code object (``llvm-objdump -d``)."""
    objdump = objdump_path()
    if objdump is None:
        raise BackendUnavailableError("llvm-objdump is not installed (Debian/Ubuntu: `apt-get install llvm`, "
                                      "which hipcc's packages bring)")
    with tempfile.TemporaryDirectory(prefix="tilelang-objdump-") as tmp:
        elf = Path(tmp) / "kernel.co"
        elf.write_bytes(device_elf(code_object, arch))
        proc = subprocess.run([objdump, "-d", f"--mcpu={arch.split(':')[0]}", str(elf)], capture_output=True,
                              text=True, check=False)
        if proc.returncode != 0:
            raise CompileError(f"llvm-objdump failed on a {arch} code object:\n{proc.stderr}")
        return proc.stdout


TOOLCHAIN = DeviceToolchain("hipcc", compile=compile_for_target, unavailable_reason=unavailable_reason)

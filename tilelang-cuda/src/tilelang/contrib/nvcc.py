"""``tilelang.contrib.nvcc``: upstream TileLang's module of CUDA toolchain queries, for
scripts that import it (``nvcc.get_target_compute_version()`` to gate an example on the
GPU's compute capability, ``nvcc.compile_cuda`` to build source by hand).

The answers come from this backend's own probes: the compute capability from the CUDA
driver (``tilelang.cuda.target``, the same ctypes probe that picks ``target="auto"``),
the toolkit from ``nvcc`` on PATH or under ``CUDA_HOME``. ``tilelang.contrib`` is a
namespace that target backends fill with their toolchains' modules.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tilelang.cuda.target import DEFAULT_ARCH, device_arch, driver_unavailable_reason
from tilelang.cuda.toolchain import include_dirs, nvcc_path
from tilelang.errors import BackendUnavailableError, CompileError

__all__ = ["compile_cuda", "find_cuda_path", "get_cuda_version", "get_target_arch",
           "get_target_compute_version", "have_fp16", "have_int8", "have_tensorcore",
           "parse_compute_version"]

_ARCH = re.compile(r"sm_(\d+)(\d)a?$")
_FORMATS = ("ptx", "cubin", "fatbin")


def _arch_of_target(target: Any) -> str | None:
    """``sm_XY`` named by a target (a dict, a Target, or a string like "cuda -arch=sm_90"),
    or None when it names none."""
    if target is None:
        return None
    if isinstance(target, str):
        found = re.search(r"sm_\d+a?", target)
        return found.group(0) if found else None
    config = target if isinstance(target, dict) else dict(target.export())
    arch = config.get("arch")
    return str(arch) if arch else None


def get_target_compute_version(target: Any = None) -> str:
    """The compute capability ``"major.minor"`` of ``target``'s arch, else of the first GPU.

    Raises BackendUnavailableError when neither names one (no GPU visible, no arch)."""
    arch = _arch_of_target(target) or device_arch()
    if arch is None:
        raise BackendUnavailableError(
            f"tilelang.contrib.nvcc.get_target_compute_version: no GPU to ask ({driver_unavailable_reason()}) "
            f"and no arch in the target; pass one, e.g. get_target_compute_version({{'kind': 'cuda', "
            f"'arch': '{DEFAULT_ARCH}'}})")
    major, minor = parse_compute_version(arch)
    return f"{major}.{minor}"


def parse_compute_version(compute_version: Any) -> tuple[int, int]:
    """``"9.0"``, ``"sm_90"``, ``"sm_90a"`` or ``(9, 0)`` -> ``(9, 0)``."""
    if isinstance(compute_version, tuple) and len(compute_version) == 2:
        return int(compute_version[0]), int(compute_version[1])
    text = str(compute_version)
    arch = _ARCH.match(text)
    if arch:
        return int(arch.group(1)), int(arch.group(2))
    parts = text.split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return int(parts[0]), int(parts[1])
    raise ValueError(f"compute version {compute_version!r} is neither 'major.minor' nor 'sm_XY'")


def get_target_arch(compute_version: Any) -> str:
    """``"9.0"`` -> ``"sm_90a"`` (the architecture-specific variant from sm_90 on, as
    upstream compiles), ``"8.0"`` -> ``"sm_80"``."""
    major, minor = parse_compute_version(compute_version)
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


def have_fp16(compute_version: Any) -> bool:
    major, minor = parse_compute_version(compute_version)
    return (major, minor) == (5, 3) or major >= 6


def have_int8(compute_version: Any) -> bool:
    return parse_compute_version(compute_version)[0] >= 6


def have_tensorcore(compute_version: Any = None, target: Any = None) -> bool:
    version = compute_version if compute_version is not None else get_target_compute_version(target)
    return parse_compute_version(version)[0] >= 7


def find_cuda_path() -> str:
    """The CUDA toolkit's root: ``CUDA_HOME`` / ``CUDA_PATH``, else the folder above the
    ``bin/`` that holds nvcc."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(name):
            return os.environ[name]
    nvcc = nvcc_path()
    if nvcc is None:
        raise BackendUnavailableError("no CUDA toolkit: nvcc is not on PATH and CUDA_HOME is not set")
    return str(Path(nvcc).resolve().parent.parent)


def get_cuda_version(cuda_path: str | None = None) -> tuple[int, int]:
    """The toolkit's ``(major, minor)``, from ``nvcc --version``."""
    nvcc = str(Path(cuda_path) / "bin" / "nvcc") if cuda_path else nvcc_path()
    if nvcc is None or not (shutil.which(nvcc) or Path(nvcc).exists()):
        raise BackendUnavailableError("no CUDA toolkit: nvcc is not on PATH and CUDA_HOME is not set")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout
    found = re.search(r"release (\d+)\.(\d+)", out)
    if not found:
        raise BackendUnavailableError(f"{nvcc} --version printed no release: {out.strip()[:200]}")
    return int(found.group(1)), int(found.group(2))


def compile_cuda(code: str, target_format: str = "ptx", arch: Any = None, options: Any = None,
                 path_target: str | None = None, verbose: bool = False) -> bytes:
    """Compile CUDA source with nvcc to ``ptx``, ``cubin`` or ``fatbin`` bytes (written to
    ``path_target`` as well when given). ``arch``: ``"sm_90"`` or a list of them; default:
    the first GPU's (``sm_90a`` from sm_90 on)."""
    if target_format not in _FORMATS:
        raise ValueError(f"compile_cuda: target_format must be one of {', '.join(_FORMATS)}, got {target_format!r}")
    nvcc = nvcc_path()
    if nvcc is None:
        raise BackendUnavailableError("compile_cuda needs nvcc: it is not on PATH and CUDA_HOME is not set")
    arches = [arch] if isinstance(arch, str) else list(arch or [get_target_arch(get_target_compute_version())])
    flags = [f"-arch={arches[0]}"] if len(arches) == 1 else [
        f"-gencode=arch=compute_{a[3:].rstrip('a') + ('a' if a.endswith('a') else '')},code={a}" for a in arches]
    extra = [options] if isinstance(options, str) else list(options or [])
    with tempfile.TemporaryDirectory(prefix="tilelang-nvcc-") as tmp:
        src, out = Path(tmp) / "source.cu", Path(tmp) / f"source.{target_format}"
        src.write_text(code)
        cmd = [nvcc, f"--{target_format}", "-O3", *flags, *[f"-I{d}" for d in include_dirs()], *extra,
               "-o", str(out), str(src)]
        if verbose:
            print(" ".join(cmd))
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CompileError(f"nvcc failed:\n$ {' '.join(cmd)}\n{proc.stderr}{proc.stdout}")
        data = out.read_bytes()
    if path_target:
        Path(path_target).write_bytes(data)
    return data

"""CUDA targets: driver probing (ctypes on libcuda, no SDK import), arch detection, the
target detector that makes ``target="auto"`` pick the GPU, and canonicalization."""

from __future__ import annotations

import ast
import ctypes
import functools
import re
from typing import Any

DEFAULT_ARCH = "sm_90"
_CC_MAJOR, _CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{MAJOR,MINOR}


@functools.cache
def _driver() -> tuple[Any, str | None]:
    """(libcuda handle, None) or (None, why not). Probed once per process."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, "no CUDA driver on this machine (libcuda.so.1 cannot be loaded)"
    if lib.cuInit(0) != 0:
        return None, "the CUDA driver failed to initialize (cuInit): is a GPU visible to this process?"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return None, "the CUDA driver sees no GPU"
    return lib, None


def driver_unavailable_reason() -> str | None:
    """None when a CUDA GPU can run kernels here, else why not."""
    return _driver()[1]


def device_arch(ordinal: int = 0) -> str | None:
    """``sm_XY`` of GPU ``ordinal``, or None without a usable driver."""
    lib, _ = _driver()
    if lib is None:
        return None
    device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if lib.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
        return None
    lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, device)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, device)
    return f"sm_{major.value}{minor.value}"


def detect() -> dict[str, Any] | None:
    """Target detector: the first GPU's target, or None when there is none."""
    arch = device_arch()
    return {"kind": "cuda", "arch": arch} if arch else None


def default_cuda_target() -> dict[str, Any]:
    """``target="cuda"``: this machine's GPU, or DEFAULT_ARCH for code generation only."""
    return detect() or {"kind": "cuda", "arch": DEFAULT_ARCH}


def canonicalize(target: Any) -> Any:
    """Give a cuda target without an explicit arch the detected (or default) arch."""
    from tvm.target import Target

    config = dict(target.export())
    if "arch" in config and str(config["arch"]).startswith("sm_"):
        return target
    config["arch"] = device_arch() or DEFAULT_ARCH
    host = config.pop("host", None)
    return Target(config, host=host) if host else Target(config)


def is_plain_cuda_target(target: Any) -> bool:
    """The predicate that leaves room for CUDA variants (CuTeDSL marks its targets with the
    key "cutedsl" and registers its own manifest for the same kind)."""
    return "cutedsl" not in [str(k) for k in target.keys]


def arch_of(target: Any) -> str:
    return str(target.export().get("arch", DEFAULT_ARCH))


def kernel_arch(func: Any) -> str:
    """The arch of a PrimFunc's target attribute ("" where it has none, as before binding)."""
    target = func.attrs.get("target") if func.attrs else None
    return str(target.export().get("arch", "")) if target is not None else ""


def runs_on(arch: str, device: str) -> bool:
    """Whether a cubin for ``arch`` runs on a GPU that is ``device`` (both ``sm_XY``): code
    of one major version runs on its minor versions from its own up (sm_80 on sm_86, the
    family form sm_100f on sm_103 too); the arch-specific form (sm_90a) on its own only."""
    code, gpu = re.fullmatch(r"sm_(\d+?)(\d)([af]?)", arch), re.fullmatch(r"sm_(\d+?)(\d)", device)
    if code is None or gpu is None:
        return True  # nothing to judge by: the driver answers at load
    if code.group(1) != gpu.group(1):
        return False
    return code.group(2) == gpu.group(2) if code.group(3) == "a" else int(code.group(2)) <= int(gpu.group(2))


def runs_here(arch: str, device: str | None = None) -> bool:
    """Whether a cubin for ``arch`` runs on this process's GPU (``device``: its ``sm_XY``,
    read from the driver when not given); True without a GPU (nothing loads it here)."""
    device = device or device_arch()
    return device is None or runs_on(arch, device)


def cannot_run_here(target: str) -> str | None:
    """The toolchain's device check (DeviceToolchain.cannot_run_here): why a kernel compiled
    for ``target`` (``CompiledArtifact.target``, the text of the target's dict) cannot run
    on this process's GPU, or None. Without it, TVM's runtime stopped the process (a
    segfault) on loading such a cubin."""
    device = device_arch()
    if device is None:
        return None
    try:
        arch = str(ast.literal_eval(target).get("arch", DEFAULT_ARCH))
    except (ValueError, SyntaxError, AttributeError):
        return None  # not a target's text: the driver answers at load
    if runs_here(arch, device):
        return None
    return (f"it was compiled for {arch} and this GPU is {device}; compile it with "
            f"target={{'kind': 'cuda', 'arch': '{device}'}} or target='auto' to run it here "
            "(a kernel compiled for another GPU still shows its source)")


def arch_number(arch: str) -> int:
    """89 for "sm_89", 90 for "sm_90a"; 0 where ``arch`` names no sm_ architecture."""
    match = re.fullmatch(r"sm_(\d+)[af]?", arch)
    return int(match.group(1)) if match else 0

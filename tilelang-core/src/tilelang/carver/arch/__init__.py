"""Device descriptions for tiling decisions: ``CUDA(target)``, ``CDNA(target)``,
``CPU(target)``; ``get_arch(target)`` and ``auto_infer_current_arch()`` pick one for a
target, and upstream's predicates (``is_hopper_arch(arch)``, ...). ``driver`` queries the
current GPU.

Which description a target gets is its target backend's choice (the manifest's
``device_model``, plugin API 1.10): core names no target kind here."""

from __future__ import annotations

from typing import Any

from ...errors import BackendNotFoundError
from . import driver
from .arch_base import TileDevice, is_tensorcore_supported_precision
from .cdna import CDNA, is_cdna_arch
from .cpu import CPU, is_cpu_arch
from .cuda import (
    CUDA,
    check_sm_version,
    has_mma_support,
    is_ada_arch,
    is_ampere_arch,
    is_cuda_arch,
    is_hopper_arch,
    is_volta_arch,
)


def get_arch(target: Any = "cuda") -> TileDevice:
    """The description of ``target`` (a name such as ``"cuda"`` / ``"llvm"`` / an alias, a
    target dict or a ``tvm.target.Target``), from the target backend that owns it."""
    from ...backend.resolution import owned_target

    device, _, module = owned_target(target)
    arch = module.device(device)
    if arch is None:
        raise BackendNotFoundError(f"tilelang.carver.arch.get_arch: target backend {module.name!r} (target "
                                   f"{device}) describes no device for the carver (its manifest has no "
                                   "device_model)")
    return arch


def auto_infer_current_arch() -> TileDevice:
    """The description of the target ``target="auto"`` compiles for on this machine (the
    GPU when one is present, else the CPU)."""
    return get_arch("auto")


__all__ = ["CDNA", "CPU", "CUDA", "TileDevice", "auto_infer_current_arch", "check_sm_version", "driver",
           "get_arch", "has_mma_support", "is_ada_arch", "is_ampere_arch", "is_cdna_arch", "is_cpu_arch",
           "is_cuda_arch", "is_hopper_arch", "is_tensorcore_supported_precision", "is_volta_arch"]

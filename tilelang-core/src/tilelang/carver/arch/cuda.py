"""NVIDIA GPUs: the current device's limits, or — without a device — the limits of the
compute capability a target names (CUDA C++ Programming Guide, "Technical Specifications per
Compute Capability"); the SM count of an absent device is unknown (None)."""

from __future__ import annotations

import re
from typing import Any

from ...errors import BackendUnavailableError
from .arch_base import TileDevice
from .driver import cuda_driver

# compute capability -> (shared memory per block with opt-in, bytes; max threads per SM)
_LIMITS = {
    70: (96 * 1024, 2048), 72: (96 * 1024, 2048), 75: (64 * 1024, 1024),
    80: (163 * 1024, 2048), 86: (99 * 1024, 1536), 87: (163 * 1024, 2048), 89: (99 * 1024, 1536),
    90: (227 * 1024, 2048), 100: (227 * 1024, 2048), 120: (99 * 1024, 1536),
}
_ARCH = re.compile(r"^(?:sm_)?(\d+)[a-z]*$")


def _clocks(device_id: int) -> tuple[int | None, float | None]:
    """(SM clock in kHz, memory bandwidth in GB/s: two transfers per memory clock over
    the bus) from the driver, each None where it does not answer."""
    from .driver.cuda_driver import get_device_attribute

    def attribute(number: int) -> int | None:
        try:
            return int(get_device_attribute(number, device_id)) or None
        except Exception:  # noqa: BLE001 -- a driver without the attribute: unknown
            return None

    clock, memory_clock, bus_bits = attribute(13), attribute(36), attribute(37)  # CU_DEVICE_ATTRIBUTE_*
    bandwidth = 2 * memory_clock * 1e3 * bus_bits / 8 / 1e9 if memory_clock and bus_bits else None
    return clock, bandwidth


def check_sm_version(arch: str) -> int:
    """``"sm_90a"`` -> 90; anything that is not an SM arch -> -1 (upstream's helper)."""
    match = _ARCH.match(str(arch))
    return int(match.group(1)) if match else -1


def _explicit_arch(target: Any) -> str | None:
    """The arch a target spells out, or None ("cuda" alone names no device)."""
    if isinstance(target, str):
        match = re.search(r"-arch[= ](\S+)", target)
        return match.group(1) if match else None
    if isinstance(target, dict):
        return target.get("arch")
    attrs = getattr(target, "attrs", None)
    return str(attrs["arch"]) if attrs is not None and "arch" in attrs else None


class CUDA(TileDevice):
    """``CUDA("cuda")`` describes GPU 0; ``CUDA({"kind": "cuda", "arch": "sm_90"})`` (or a
    ``tvm.target.Target``) describes that compute capability, from the device when one is
    present, else from the published per-capability limits."""

    platform = "CUDA"
    warp_size = 32

    def __init__(self, target: Any = "cuda", device_id: int = 0) -> None:
        import torch

        self.target = target
        arch = _explicit_arch(target)
        present = torch.cuda.is_available() and torch.version.hip is None
        if arch is None:
            if not present:
                raise BackendUnavailableError(
                    f"tilelang.carver.arch.CUDA({target!r}): no CUDA GPU to describe; name the "
                    "compute capability instead, e.g. CUDA({'kind': 'cuda', 'arch': 'sm_90'})")
            major, minor = torch.cuda.get_device_capability(device_id)
            arch = f"sm_{major}{minor}"
        self.sm_version = check_sm_version(arch)
        if self.sm_version < 0:
            raise BackendUnavailableError(f"tilelang.carver.arch.CUDA: {arch!r} is not an SM arch (sm_80, sm_90a, ...)")
        self.compute_capability = str(self.sm_version)
        if present:
            props = cuda_driver.get_cuda_device_properties(device_id)
            self.name = str(props.name)
            self.smem_cap = int(props.shared_memory_per_block_optin)
            self.compute_max_core = int(props.multi_processor_count)
            self.reg_cap = int(getattr(props, "regs_per_multiprocessor", 65536))
            self.max_threads_per_sm = int(getattr(props, "max_threads_per_multi_processor", 2048))
            self.clock_rate_khz, self.memory_bandwidth_gbps = _clocks(device_id)
        else:
            known = _LIMITS.get(self.sm_version) or _LIMITS[max(k for k in _LIMITS if k <= max(self.sm_version, 70))]
            self.name = f"sm_{self.sm_version} (no device present)"
            self.smem_cap, self.max_threads_per_sm = known
            self.compute_max_core = None

    def tensorcore_precisions(self) -> frozenset[tuple[str, str]]:
        """mma.sync / wgmma operand and accumulator pairs of this compute capability."""
        if self.sm_version < 70:
            return frozenset()
        pairs = {("float16", "float16"), ("float16", "float32")}
        if self.sm_version >= 80:
            pairs |= {("bfloat16", "float32"), ("int8", "int32"), ("float32", "float32")}  # tf32
        if self.sm_version >= 89:
            pairs |= {("float8_e4m3fn", "float32"), ("float8_e5m2", "float32")}
        return frozenset(pairs)

    def get_avaliable_tensorintrin_shapes(self) -> list[list[int]]:
        """(M, N) of the tensor-core instruction tiles T.gemm uses (upstream's spelling)."""
        return [[16, 16]] if has_mma_support(self) or is_volta_arch(self) else []


def is_cuda_arch(arch: TileDevice) -> bool:
    return isinstance(arch, CUDA)


def is_volta_arch(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and 70 <= arch.sm_version < 80


def is_ampere_arch(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and 80 <= arch.sm_version < 89


def is_ada_arch(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 89


def is_hopper_arch(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 90


def has_mma_support(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and arch.sm_version >= 80

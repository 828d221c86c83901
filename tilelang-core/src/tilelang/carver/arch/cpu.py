"""The host CPU as a tile device: a block is a task on the thread pool, its tiles should
stay in the per-core L2 cache, and its vector width is the widest SIMD register the CPU
reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .arch_base import TileDevice

_SYS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


def _l2_bytes() -> int:
    """cpu0's level-2 cache (Linux sysfs), else 1 MiB."""
    try:
        for index in sorted(_SYS_CACHE.glob("index*")):
            if (index / "level").read_text().strip() == "2":
                size = (index / "size").read_text().strip().upper()
                scale = {"K": 1024, "M": 1024 * 1024}.get(size[-1], 1)
                return int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return 1024 * 1024


def _vector_bytes() -> int:
    """64 with AVX-512, 32 with AVX2, else 16 (SSE / NEON)."""
    try:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    words = set(flags.split())
    return 64 if "avx512f" in words else 32 if "avx2" in words else 16


def _cores() -> int:
    """The threads the CPU backend runs a kernel's blocks on."""
    from ...cpu.threads import available_cpus, requested_threads

    return requested_threads() or available_cpus()


class CPU(TileDevice):
    """This machine's CPU (``CPU("llvm")``; any target of the CPU backend)."""

    platform = "CPU"
    warp_size = 1
    max_threads_per_sm = 1
    sm_partition = 1
    bytes_per_clock = 16
    block_overhead_clocks = 5000  # a thread-pool task: a few microseconds

    def __init__(self, target: Any = "llvm") -> None:
        self.target = target
        self.device = "cpu"
        self.name = f"cpu ({_cores()} cores)"
        self.compute_max_core = _cores()
        self.smem_cap = _l2_bytes()
        self.vector_bytes = _vector_bytes()
        # two vector FMA pipes of fp32 lanes
        self.fma_per_clock = 2 * self.vector_bytes // 4


def is_cpu_arch(arch: TileDevice) -> bool:
    return isinstance(arch, CPU)

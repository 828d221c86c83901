"""The limits a tile-configuration search reads from a device."""

from __future__ import annotations

from typing import Any


class TileDevice:
    """A device's limits: ``smem_cap`` (bytes of shared memory one block may use),
    ``reg_cap`` (32-bit registers per SM), ``compute_max_core`` (SMs / CUs, or None when
    unknown: no device to ask), ``warp_size``, ``max_threads_per_sm``, ``platform``."""

    platform: str = "unknown"
    target: Any = None
    name: str = ""
    smem_cap: int = 0
    reg_cap: int = 65536
    compute_max_core: int | None = None
    warp_size: int = 32
    max_threads_per_sm: int = 2048
    sm_partition: int = 4  # warp schedulers per SM
    transaction_size: list[int] = [32, 128]  # bytes: sector, cache line
    sm_version: int = -1  # compute capability as major * 10 + minor (CUDA), -1 elsewhere
    clock_rate_khz: int | None = None  # SM clock: None when no device answers
    memory_bandwidth_gbps: float | None = None  # likewise
    # per-SM (per-core) rates per clock the tile searches rank with: bytes drawn from the
    # cache shared by all SMs (L2), and scalar multiply-adds (fp32 FMA lanes)
    bytes_per_clock: int = 32
    fma_per_clock: int = 128
    # widest vector access, bytes (16: a 128-bit load)
    vector_bytes: int = 16
    # clocks a block costs beyond its work: scheduling it, its prologue and epilogue
    block_overhead_clocks: int = 200

    def tensorcore_precisions(self) -> frozenset[tuple[str, str]]:
        """(operand dtype, accumulator dtype) pairs the device's matrix units multiply; none
        by default."""
        return frozenset()

    @property
    def max_smem_usage(self) -> int:
        return self.smem_cap

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


def is_tensorcore_supported_precision(in_dtype: str, accum_dtype: str, arch: TileDevice) -> bool:
    """Whether ``arch`` multiplies ``in_dtype`` operands into ``accum_dtype`` on its matrix
    units (upstream's helper; each device lists its pairs)."""
    return (str(in_dtype), str(accum_dtype)) in arch.tensorcore_precisions()

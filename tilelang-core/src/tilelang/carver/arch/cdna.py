"""AMD CDNA GPUs (MI200/MI300), described from the ROCm device torch sees."""

from __future__ import annotations

from typing import Any

from ...errors import BackendUnavailableError
from .arch_base import TileDevice
from .driver import get_cuda_device_properties


class CDNA(TileDevice):
    """The current ROCm GPU: 64-lane wavefronts, LDS as shared memory."""

    platform = "CDNA"
    warp_size = 64

    def __init__(self, target: Any = "hip", device_id: int = 0) -> None:
        import torch

        if getattr(torch.version, "hip", None) is None:
            raise BackendUnavailableError("tilelang.carver.arch.CDNA describes a ROCm GPU, but this torch "
                                          "is not a ROCm build; use CUDA(...) for NVIDIA GPUs")
        props = get_cuda_device_properties(device_id)
        self.target = target
        self.name = str(getattr(props, "gcnArchName", props.name))
        self.smem_cap = int(props.shared_memory_per_block)
        self.compute_max_core = int(props.multi_processor_count)
        self.reg_cap = int(getattr(props, "regs_per_multiprocessor", 65536))

    def tensorcore_precisions(self) -> frozenset[tuple[str, str]]:
        """MFMA operand and accumulator pairs."""
        return frozenset({("float16", "float32"), ("bfloat16", "float32"), ("int8", "int32")})


def is_cdna_arch(arch: TileDevice) -> bool:
    return isinstance(arch, CDNA)

"""Acme's (simulated) device: present when ``ACME_DEVICE=1``. A real vendor would ask its
driver here; the answer is what ``target="auto"`` compiles for when the device is present.
The device runs LLVM code, so its target is TVM's ``llvm`` kind."""

from __future__ import annotations

import os
from typing import Any

DEVICE_ENV = "ACME_DEVICE"
#: bytes of the on-chip scratchpad that T.alloc_shared buffers live in
SCRATCHPAD_BYTES = 48 * 1024


def device_present() -> bool:
    return os.environ.get(DEVICE_ENV) == "1"


def detect() -> dict[str, str] | None:
    return {"kind": "llvm"} if device_present() else None


def default_target() -> dict[str, str]:
    return {"kind": "llvm"}


def describe(target: Any) -> Any:
    """Acme's device for ``tilelang.carver`` (``get_arch("acme")``, the manifest's
    ``device_model``): blocks run on four cores, one thread each, their tiles in the
    scratchpad, with 32-byte vectors. The carver's templates rank tiles with these numbers."""
    from tilelang.plugin import TileDevice

    acme = TileDevice()
    acme.platform, acme.name, acme.target = "Acme", "acme (simulated)", target
    acme.smem_cap, acme.compute_max_core = SCRATCHPAD_BYTES, 4
    acme.warp_size, acme.max_threads_per_sm, acme.sm_partition = 1, 1, 1
    acme.vector_bytes, acme.fma_per_clock, acme.bytes_per_clock = 32, 16, 32
    acme.block_overhead_clocks = 500
    return acme

"""Acme's (simulated) device: present when ``ACME_DEVICE=1``. A real vendor would ask its
driver here; the answer is what ``target="auto"`` compiles for when the device is present.
The device runs LLVM code, so its target is TVM's ``llvm`` kind."""

from __future__ import annotations

import os

DEVICE_ENV = "ACME_DEVICE"
#: bytes of the on-chip scratchpad that T.alloc_shared buffers live in
SCRATCHPAD_BYTES = 48 * 1024


def device_present() -> bool:
    return os.environ.get(DEVICE_ENV) == "1"


def detect() -> dict[str, str] | None:
    return {"kind": "llvm"} if device_present() else None


def default_target() -> dict[str, str]:
    return {"kind": "llvm"}

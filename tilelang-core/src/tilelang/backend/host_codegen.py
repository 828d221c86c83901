"""Host codegen: the component type lives beside DeviceCodegen; re-exported here."""

from __future__ import annotations

from .device_codegen import HostCodegen, tvm_build_function

__all__ = ["HostCodegen", "tvm_build_function"]

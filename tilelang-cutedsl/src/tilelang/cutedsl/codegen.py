"""The cutedsl device codegen: source only (CuTe DSL Python; ``cute.compile`` runs in the
execution backend, where the caller's tensors give the argument types)."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import DeviceCodegen


def cutedsl_source(mod: Any, target: Any) -> str:
    from .printer import generate

    return generate(mod)


CUTEDSL_DEVICE_CODEGEN = DeviceCodegen(source_only=cutedsl_source)

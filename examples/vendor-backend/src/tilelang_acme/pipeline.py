"""Acme's pipeline: TVM's LLVM code generation as core's CPU backend drives it, with Acme's
scratchpad check in front. Everything reused comes from the plugin API (tilelang.plugin)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tilelang.plugin import (
    PassPipeline,
    cpu_finalize_device_passes,
    cpu_finalize_host_passes,
    cpu_lowering_passes,
)


def lowering_passes(context: Any) -> Sequence[Any]:
    from .passes import CheckScratchpad

    # before the CPU's passes: they flatten the shared tiles this check measures
    return [CheckScratchpad(), *cpu_lowering_passes(context)]


ACME_PIPELINE = PassPipeline("acme", lowering_passes, cpu_finalize_host_passes, cpu_finalize_device_passes)

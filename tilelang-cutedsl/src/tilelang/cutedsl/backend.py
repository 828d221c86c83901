"""The one place the cutedsl backend's manifest is assembled, and its plugin hooks.

A second manifest on the ``cuda`` kind, unambiguous with tilelang-cuda's by predicate
(targets with the key ``cutedsl`` are this backend's, the others ``cuda``'s): reached by
``target="cutedsl"``, by the router when opted in, or by a kernel using ``T.ext`` names
that only this backend provides. It never answers ``target="auto"`` (no detector).
"""

from __future__ import annotations

from tilelang.plugin import (
    BackendModule,
    ExecutionBackend,
    ExecutionBackendSpec,
    KernelRouter,
    hookimpl,
)

from . import target

TILELANG_PLUGIN_API = "1.10"  # 1.10: device_model

BACKEND = BackendModule(
    name="cutedsl",
    target_kinds=("cuda",),
    supports_target=target.is_cutedsl_target,
    pipelines={"cuda": "tilelang.cutedsl.pipeline:CUTEDSL_PIPELINE"},
    device_codegens={"cuda": "tilelang.cutedsl.codegen:CUTEDSL_DEVICE_CODEGEN"},
    # CuTe DSL source runs on the cutedsl execution backend alone (it compiles it)
    execution_backends=(
        ExecutionBackendSpec("cutedsl", is_available=target.unavailable_reason,
                             requires_host_codegen=False, requires_device_compile=False),
    ),
    aliases=("cutedsl",),
    default_target=target.default_target,
    device_model="tilelang.plugin:CUDADevice",
    canonicalize_target=target.canonicalize,
    description="NVIDIA GPUs through NVIDIA CuTe DSL (cute.kernel Python, cute.compile); "
                "opt-in per kernel with TILELANG_ROUTE=cutedsl or TILELANG_USE_CUTEDSL=1",
    language_extensions={"swizzled_shared": "tilelang.cutedsl.extensions:swizzled_shared"},
    pass_configs={"tl.disable_wgmma": "sm_90: keep CuTe GEMMs on warp-level mma.sync instead of warpgroup MMA",
                  "tl.disable_tma_lower": "sm_90: keep the warpgroup-MMA stage rings on cp.async instead of TMA "
                                          "boxes and mbarriers"},
)


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [BACKEND]


@hookimpl
def tilelang_execution_backends() -> list[ExecutionBackend]:
    from .execution_backend import CuTeDSLExecutionBackend

    return [CuTeDSLExecutionBackend()]


@hookimpl
def tilelang_kernel_routers() -> list[KernelRouter]:
    from .router import ROUTER

    return [ROUTER]

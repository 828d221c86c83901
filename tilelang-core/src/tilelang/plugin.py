"""The plugin API: every core name a backend distribution may use, in one module.

A plugin distribution (target backend, execution backend, language dialect; first-party or
a vendor's) imports core names from three modules only:

- ``tilelang.plugin`` (this module): manifests and specs, registration hooks, pass helpers
  and the shared passes a pipeline composes, the CPU pipeline a backend may reuse, IR
  helpers, argument binding, artifact and launch-metadata types, the device toolchain
  interface, cache helpers, the error hierarchy;
- ``tilelang.language``: the kernel language (``T``), as kernels use it; a dialect
  extends it with ``from tilelang.language import *``;
- ``tilelang.errors``: the error hierarchy (also re-exported here).

Anything else under ``tilelang`` is core's private structure and may move between
releases; ``tests/test_plugin_api.py`` fails when a plugin distribution reaches into it.
What is here follows the plugin API version (``PLUGIN_API_VERSION``, "major.minor"): a
name is added with a minor, removed or changed with a major.

Names resolve on first access (PEP 562): importing this module imports neither TVM nor
the modules behind the names, so a plugin's ``backend.py`` can import its manifest types
from here while ``import tilelang`` stays light. ``docs/writing-a-backend.md`` shows them
in use.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> "module:attribute" (attribute defaults to the name). Grouped as the docs are.
_EXPORTS: dict[str, str] = {
    # -- registration: hooks, the API version, what is registered --------------------------
    "hookimpl": "tilelang.plugins.hookspecs",
    "PLUGIN_API_VERSION": "tilelang.plugins.api",
    "TILELANG_VERSION": "tilelang._version:__version__",
    "registered_backends": "tilelang.backend.registry",
    "registered_execution_backends": "tilelang.backend.registry",
    # -- per-kernel routing and language extensions (tilelang.backend.routing) ------------
    "KernelRouter": "tilelang.backend.routing",
    "RouteDecision": "tilelang.backend.routing",
    "RouteRequest": "tilelang.backend.routing",
    "extension_call": "tilelang.language.ext",
    "extension_name": "tilelang.backend.routing",
    # -- manifest and spec types -----------------------------------------------------------
    "BackendModule": "tilelang.backend.manifest",
    # -- device descriptions a manifest's device_model returns (1.10; tilelang.carver) ------
    "TileDevice": "tilelang.carver.arch.arch_base",
    "CUDADevice": "tilelang.carver.arch.cuda:CUDA",
    "CDNADevice": "tilelang.carver.arch.cdna:CDNA",
    "CPUDevice": "tilelang.carver.arch.cpu:CPU",
    "BackendContext": "tilelang.backend.context",
    "ExecutionBackend": "tilelang.backend.execution_backend",
    "ExecutionBackendSpec": "tilelang.backend.execution_backend",
    "KernelLauncher": "tilelang.backend.execution_backend",
    "UnrunnableLauncher": "tilelang.backend.execution_backend",  # 1.5
    "TargetDetector": "tilelang.backend.target",
    "DeviceCodegen": "tilelang.backend.device_codegen",
    "DeviceOutput": "tilelang.backend.device_codegen",
    "HostCodegen": "tilelang.backend.device_codegen",
    "tvm_build_function": "tilelang.backend.device_codegen",
    "tvm_source_only_build": "tilelang.backend.device_codegen",
    # -- the device toolchain (source -> binary) and the code that calls it -------------------
    "DeviceToolchain": "tilelang.backend.toolchain",
    "compile_device_source": "tilelang.backend.toolchain",
    "prepare_device_runtime": "tilelang.backend.toolchain",
    "device_mismatch": "tilelang.backend.toolchain",  # 1.5: a kernel built for another GPU
    # -- streams (launchers that launch kernels themselves) --------------------------------
    "stream_handle": "tilelang.backend.streams",
    "current_stream_accessor": "tilelang.backend.streams",
    "as_current_stream": "tilelang.backend.streams",
    "toolchain_unavailable_reason": "tilelang.backend.toolchain",
    # -- pass helpers ----------------------------------------------------------------------
    "PassPipeline": "tilelang.backend.pass_pipeline",
    "prim_func_pass": "tilelang.backend.pass_pipeline",
    "keeps_span": "tilelang.transform.source_lines",  # 1.14: a lowered statement's line (#line)
    "stamp_span": "tilelang.transform.source_lines",  # 1.14
    "pass_config": "tilelang.backend.pass_pipeline",
    "flatten_and_vectorize": "tilelang.backend.pass_pipeline",
    "CaptureLaunchMetadata": "tilelang.backend.pass_pipeline",
    "captured_launches": "tilelang.backend.pass_pipeline",
    "GuardEmptyLaunches": "tilelang.backend.pass_pipeline",
    "KernelLaunchBounds": "tilelang.backend.pass_pipeline.launch_hints",
    "PadTinySharedAllocations": "tilelang.backend.pass_pipeline",
    "DropDeadBindings": "tilelang.backend.pass_pipeline",  # 1.12: after a device-side simplify
    "python_expr": "tilelang.backend.pass_pipeline",
    "apply_source_postproc": "tilelang.engine.callback",
    # -- shared passes: tile ops, global layouts -------------------------------------------
    "LowerTileOps": "tilelang.transform",
    "ApplyGlobalLayouts": "tilelang.transform",
    "LowerSubByteAccess": "tilelang.transform",
    "LowerClusterOps": "tilelang.transform.clusters",  # 1.9: store= (T.copy_cluster)
    "KernelClusterDims": "tilelang.transform.clusters",
    "uses_clusters": "tilelang.language.clusters",
    "LowerGridDependencies": "tilelang.transform.grid_dependencies",
    "WaitingKernelsMayAlias": "tilelang.transform.grid_dependencies",
    "LowerGridSync": "tilelang.transform.grid_dependencies",  # 1.3: T.sync_grid, cooperative launches
    "LowerSourceKernels": "tilelang.transform.source_kernels",  # 1.4: T.CUDASourceCodeKernel
    "TileOpLowering": "tilelang.transform.lower_tile_ops",
    "reduce_combine": "tilelang.transform.reduce_kinds",
    "reduce_identity": "tilelang.transform.reduce_kinds",
    "reduce_operand": "tilelang.transform.reduce_kinds",
    # -- shared GPU-neutral passes (tilelang.transform.gpu) --------------------------------
    "PartitionParallelLoops": "tilelang.transform.gpu",
    "PlaceFragments": "tilelang.transform.gpu",
    "SyncSharedWritesOfSeveralThreads": "tilelang.transform.gpu",
    "HoistSharedReads": "tilelang.transform.gpu",
    "RasterizeBlocks": "tilelang.transform.gpu",
    "AtomicFunctions": "tilelang.transform.gpu",
    "LowerAtomics": "tilelang.transform.gpu",
    "WarpFunctions": "tilelang.transform.gpu",
    "LowerWarpOps": "tilelang.transform.gpu",
    "FindFirstSet": "tilelang.transform.gpu",  # 1.7: T.__ffs as a dialect's functions
    # 1.7: T.gemm_sp's 2:4 metadata: (nonzeros, group) of an A dtype, A elements per E element
    "sparse_group": "tilelang.language.gemm_sp",
    "sparse_e_factor": "tilelang.language.gemm_sp:e_factor",
    "NAMED_BARRIER_ARRIVE": "tilelang.language.ops",  # 1.11: T.named_barrier_arrive
    "RNG_INIT": "tilelang.language.random",  # 1.2: T.rng_* as neutral ops a backend lowers
    "RNG_RAND": "tilelang.language.random",
    "RNG_RAND_FLOAT": "tilelang.language.random",
    "RNG_GENERATORS": "tilelang.language.random:GENERATORS",
    "gpu_block_passes": "tilelang.transform.gpu",
    "FRAGMENT_SCOPE": "tilelang.transform.gpu",
    "ALIGNMENT_ATTR": "tilelang.transform.gpu",
    "accessed_by_own_nests": "tilelang.transform.gpu.fragments",
    "is_identity": "tilelang.transform.gpu.fragments",
    "parallel_nest": "tilelang.transform.gpu.fragments",
    # a branch that part of the block takes (``if tx >= 128``): its threads, and an else's
    "thread_range": "tilelang.transform.gpu.partition_parallel:_thread_range",
    "complement_range": "tilelang.transform.gpu.partition_parallel:_complement",
    "walk_thread_ranges": "tilelang.transform.gpu.partition_parallel",
    # -- IR helpers for a backend's own passes ---------------------------------------------
    "block_barrier": "tilelang.transform.gpu.ir_util",
    "buffer_accesses": "tilelang.transform.gpu.ir_util",
    "dtype_bytes": "tilelang.transform.gpu.ir_util",
    "extern_call": "tilelang.transform.gpu.ir_util",
    "each_kernel": "tilelang.transform.gpu.ir_util",
    "kernels_of": "tilelang.transform.gpu.ir_util",
    "is_full_region": "tilelang.transform.gpu.ir_util",
    "seq": "tilelang.transform.gpu.ir_util",
    "static_ints": "tilelang.transform.gpu.ir_util",
    "gemm_mnk": "tilelang.transform.gpu.ir_util",
    "matrix_extents": "tilelang.transform.gpu.ir_util",
    "substitute": "tilelang.transform.gpu.ir_util",
    "uses_var": "tilelang.transform.gpu.ir_util",
    "tile_op_name": "tilelang.transform.gpu.ir_util",
    "unrolled": "tilelang.transform.gpu.ir_util",
    "TILE_OPS": "tilelang.language.ops",
    # 1.8: tile atomics as core lowers them (a backend may serve use_tma=True with bulk reductions)
    "ATOMIC_RMW_ELEMENT": "tilelang.language.ops",
    "ATOMIC_RMW_KINDS": "tilelang.language.ops",
    "ATOMIC_USE_TMA_ATTR": "tilelang.transform.lower_tile_ops",
    "tl_op_names_in": "tilelang.language.ops",
    "REDUCE_KINDS": "tilelang.language.tile",
    # approximate / rounding-explicit math (T.__exp, T.ieee_add): a backend lowers these names
    "FAST_FUNCTIONS": "tilelang.language.fastmath",
    "IEEE_OPERATIONS": "tilelang.language.fastmath",
    "Layout": "tilelang.layout",
    "make_swizzled_layout": "tilelang.layout",
    # -- the CPU backend's pieces, for a backend that reuses TVM's LLVM/C codegen ----------
    "CPUExecutionBackendSpec": "tilelang.cpu.pipeline",
    "cpu_lowering_passes": "tilelang.cpu.pipeline:lowering_passes",
    "cpu_finalize_host_passes": "tilelang.cpu.pipeline:finalize_host_passes",
    "cpu_finalize_device_passes": "tilelang.cpu.pipeline:finalize_device_passes",
    "CPU_DEVICE_CODEGEN": "tilelang.cpu.codegen",
    "LLVM_HOST_CODEGEN": "tilelang.cpu.codegen",
    "C_HOST_CODEGEN": "tilelang.cpu.codegen",
    "cpu_target_is_c": "tilelang.cpu.target:is_c_target",
    "LowerKernelLaunchToLoops": "tilelang.cpu.transform",
    # -- compiled artifacts, launch metadata, argument binding -----------------------------
    "CompiledArtifact": "tilelang.engine.artifact",
    "KernelLaunch": "tilelang.engine.artifact",
    "ParamInfo": "tilelang.engine.artifact",
    "dim_symbols": "tilelang.engine.artifact",
    "dim_value": "tilelang.engine.artifact",
    "ArgumentBinder": "tilelang.jit.arguments",
    "DEVICE_NAMES": "tilelang.jit.arguments",
    "output_torch_dtype": "tilelang.jit.arguments",
    # -- caches (everything under TILELANG_CACHE_DIR) --------------------------------------
    "cache_subdir": "tilelang.cache",
    "cache_path": "tilelang.cache",
    "read_file": "tilelang.cache",
    "write_file": "tilelang.cache",
    "warn_unavailable": "tilelang.cache.folders",
    "remove_stale": "tilelang.cache.limits",
    # -- errors (tilelang.errors) ----------------------------------------------------------
    "TileLangError": "tilelang.errors",
    "ManifestError": "tilelang.errors",
    "PluginError": "tilelang.errors",
    "BackendNotFoundError": "tilelang.errors",
    "BackendUnavailableError": "tilelang.errors",
    "LanguageError": "tilelang.errors",
    "CompileError": "tilelang.errors",
    "ArgumentError": "tilelang.errors",
    "LaunchError": "tilelang.errors",
    "CacheError": "tilelang.errors",
}

#: core modules a plugin distribution may import besides this one (see the module doc)
PUBLIC_MODULES: tuple[str, ...] = ("tilelang.plugin", "tilelang.language", "tilelang.errors")

__all__ = [name for name in sorted([*_EXPORTS, "PUBLIC_MODULES"])]  # a list display, as linters want


def __getattr__(name: str) -> Any:
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(
            f"module 'tilelang.plugin' has no attribute {name!r}: it is not part of the plugin "
            "API (tilelang.plugin.__all__ lists what is; docs/writing-a-backend.md describes it)"
        )
    module, _, attribute = where.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return __all__

"""The one place the CUDA backend's manifest is assembled, and its plugin hooks."""

from __future__ import annotations

from tilelang.plugin import (
    BackendModule,
    ExecutionBackendSpec,
    TargetDetector,
    hookimpl,
)

from . import target

TILELANG_PLUGIN_API = "1.14"  # 1.2: the random-number ops, AtomicFunctions.helpers; 1.3: LowerGridSync; 1.4: LowerSourceKernels; 1.5: DeviceToolchain.cannot_run_here; 1.6: gpu_block_passes(vector_fp8=); 1.7: FindFirstSet; 1.8: ATOMIC_USE_TMA_ATTR; 1.9: LowerClusterOps(store=); 1.10: device_model; 1.11: NAMED_BARRIER_ARRIVE; 1.12: DropDeadBindings; 1.13: launch_wrapper; 1.14: source_lines, keeps_span

BACKEND = BackendModule(
    name="cuda",
    target_kinds=("cuda",),
    supports_target=target.is_plain_cuda_target,
    pipelines={"cuda": "tilelang.cuda.pipeline:CUDA_PIPELINE"},
    device_codegens={"cuda": "tilelang.cuda.codegen:CUDA_DEVICE_CODEGEN"},
    # auto preference: tvm_ffi (host code + TVM's CUDA module), then nvrtc (source +
    # launch metadata, launched through the driver API), then cython (the same, launched
    # from a compiled C wrapper)
    execution_backends=(
        ExecutionBackendSpec("tvm_ffi", is_available=target.driver_unavailable_reason),
        # nvrtc encodes TMA tensor maps itself from the launch metadata's recipes (H200,
        # 2026-12-01: the 8192^3 GEMM correct at 0.997x torch.mm, tvm_ffi 1.001x)
        ExecutionBackendSpec("nvrtc", is_available=target.driver_unavailable_reason,
                             requires_host_codegen=False, requires_device_compile=False,
                             operand_kinds=("tensormap",)),
        ExecutionBackendSpec("cython", is_available=target.driver_unavailable_reason,
                             requires_host_codegen=False, requires_device_compile=False),
    ),
    toolchain="tilelang.cuda.toolchain:TOOLCHAIN",
    # T.alloc_barrier, T.mbarrier_*, T.tma_copy, T.ws (transform/explicit_sync.py); T.ClusterKernel
    # (__cluster_dims__, sm_90: codegen.py)
    language_features=("explicit_warp_specialization", "thread_block_clusters"),
    aliases=("gpu",),
    default_target=target.default_cuda_target,
    device_model="tilelang.plugin:CUDADevice",
    launch_wrapper="tilelang.cuda.l2_window:wrap_launcher",
    canonicalize_target=target.canonicalize,
    description="NVIDIA GPUs through TVM's CUDA codegen; cubins from NVRTC or nvcc",
    pass_configs={
        "tl.disable_vectorize": "do not vectorize T.Parallel / T.vectorized loops",
        "tl.device_compile_flags": "extra flags for nvcc or NVRTC (upstream's compile_flags=, "
                                  "T.annotate_compile_flags); NVRTC leaves out nvcc's own (-O3, -W..., --expt-...)",
        "tl.emit_line_directives": "#line directives in the CUDA source: nvcc's and NVRTC's messages, and "
                                   "tools reading line tables, name the kernel's .py lines",
        "tl.disable_thread_storage_sync": "add no block barriers for shared memory: the kernel places its "
                                          "own (T.sync_threads, named barriers among them)",
        "tl.min_blocks_per_sm": "blocks per SM to budget registers for (launch bounds); "
                                "default: the tensor-core pass's occupancy plan",
        "tl.disable_wgmma": "sm_90: keep tensor-core GEMMs on mma.sync instead of wgmma",
        "tl.disable_wgmma_swizzle": "sm_90: wgmma operand tiles in the unswizzled core-matrix layout",
        "tl.disable_tf32": "float32 T.gemm operands: compute in float32 on the SIMT path instead of on TF32 "
                           "tensor cores (sm_80 and newer, as upstream's T.gemm)",
        "tl.disable_tma_lower": "sm_90: keep pipelined copies on cp.async instead of TMA boxes and mbarriers",
        "tl.bounds_check": "check every tensor access at run time: an out-of-bounds index prints the "
                           "access (indices, block, thread, source line) and traps the kernel, which "
                           "the launch reports; tirx.instrument_bound_checkers does the same",
        "tl.disable_warp_specialized": "sm_90: TMA boxes issued by thread 0 between GEMMs, not by a producer warp",
        "tl.disable_k_step_merge": "sm_90 wgmma pipelines: keep a GEMM's K steps of under 128 bytes as written "
                                   "instead of loading several into one stage",
        "tl.mask_after_gemm": "sm_90 wgmma GEMMs: a mask written into the accumulator before the GEMM (causal "
                              "attention's) becomes a cleared tile, the GEMM, and the mask after it only where an "
                              "element is masked; unset, where shared memory holds one block per SM or the launch "
                              "bounds promise a block count",
        "tl.disable_shared_epilogue": "sm_90 wgmma GEMMs: copy the accumulator straight to global memory instead "
                                      "of through a shared tile (16-byte stores of whole rows)",
        "tl.intra_warpgroup_overlap": "sm_90: issue a warp-specialized consumer loop's second GEMM (flash "
                                      "attention's P V) under the next iteration's register work; unset, "
                                      "where it pays (K and V on barriers of their own, or 3 stages)",
        "tl.warpgroup_pingpong": "sm_90: whether a warp-specialized block's two consumer warpgroups take turns "
                                 "issuing GEMMs (flash attention's pingpong): 'first' (each iteration's first GEMM), "
                                 "'every', 'pair' (both GEMM issues of an overlapped iteration), or 'off'; "
                                 "unset, 'pair' for a persistent kernel's overlapped loop, else 'off'",
    },
)


@hookimpl
def tilelang_backend_modules() -> list[BackendModule]:
    return [BACKEND]


@hookimpl
def tilelang_target_detectors() -> list[TargetDetector]:
    # above the CPU's 0: a machine with a GPU compiles for it by default
    return [TargetDetector("cuda", priority=100, detect=target.detect)]

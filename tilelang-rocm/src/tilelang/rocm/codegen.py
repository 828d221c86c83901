"""HIP device codegen: HIP C++ source from TVM's CUDA-C printer, made HIP by a prelude.

Why not TVM's own ``target.build.rocm``: it goes through the LLVM AMDGPU backend inside
libtvm and links ROCm's device bitcode (ocml/ockl) found through
``tvm_callback_rocm_bitcode_path``; it yields a code object, never source, so the
source-consuming paths (a cache keyed by source, hipcc/hiprtc launchers, a reviewer reading
``kernel.get_kernel_source()``) would have nothing, and MFMA would have to be spelled as
LLVM intrinsics. HIP is CUDA C++ with other headers and 64-lane wavefronts, so the CUDA-C
printer writes HIP once the function is presented to it as a CUDA function
(``ForHipSource``, after the wavefront-dependent passes ran for the rocm target) and its
CUDA-specific spellings are mapped: includes by ``_HIP_INCLUDES``, the rest by
``hip_device.h`` (warp intrinsics with a 64-bit mask, MFMA GEMM and atomic helpers).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from tilelang.plugin import (
    DeviceCodegen,
    apply_source_postproc,
    prim_func_pass,
    tvm_build_function,
    tvm_source_only_build,
)

DEVICE_HEADER = Path(__file__).with_name("hip_device.h")
MFMA_HEADER = Path(__file__).with_name("hip_mfma.h")
# the CUDA-C printer's includes and what HIP names them
_HIP_INCLUDES = {
    "#include <cuda_fp16.h>": "#include <hip/hip_fp16.h>",
    "#include <cuda_bf16.h>": "",  # hip_device.h includes hip_bfloat16.h and names its types
    "#include <math_constants.h>": "",  # hip_device.h defines the CUDART_* constants used
    "#include <cuda.h>": "",
    "#include <cuda_runtime.h>": "",
}
_build_c = tvm_build_function("cuda", source_lines=True)


@functools.cache
def printer_target() -> Any:
    """The target the CUDA-C printer is given: no arch-specific CUDA feature (sm_70 has
    every type the printer needs), and the wavefront's 64 lanes."""
    from tvm.target import Target

    return Target({"kind": "cuda", "arch": "sm_70", "thread_warp_size": 64})


def ForHipSource() -> Any:
    """Bind device functions to the printer's target, so LowerIntrin writes C++ math
    (``expf``, ``__shfl_sync``...) that HIP declares, not the LLVM intrinsics of TVM's
    rocm rules."""

    def run(func: Any, mod: Any, ctx: Any) -> Any:
        return func.with_attr("target", printer_target())

    return prim_func_pass(run, "tl.rocm.ForHipSource")


@functools.cache
def _device_header() -> str:
    return DEVICE_HEADER.read_text() + "\n" + MFMA_HEADER.read_text()


def hip_source(cuda_c: str) -> str:
    """The printer's output as HIP: the prelude first, includes renamed."""
    lines = []
    for line in cuda_c.splitlines():
        lines.append(_HIP_INCLUDES.get(line.strip(), line))
    return _device_header() + "\n" + "\n".join(lines) + "\n"


def rocm_source(mod: Any, target: Any) -> str:
    # the CUDA-C printer's build: on an NVIDIA host TVM's CUDA factory would compile it
    with tvm_source_only_build():
        # (the post-processing: #line directives, and a function registered for "hip")
        return hip_source(apply_source_postproc("hip", str(_build_c(mod, printer_target()).inspect_source())))


ROCM_DEVICE_CODEGEN = DeviceCodegen(source_only=rocm_source)

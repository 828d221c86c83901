"""Why each execution backend that could serve HIP kernels cannot serve them here.

Nothing in this backend has run on AMD hardware: kernels are generated and compiled to
code objects, and every launch path says why it is unavailable instead of pretending.
"""

from __future__ import annotations

from .target import gpu_unavailable_reason


def tvm_ffi_unavailable_reason() -> str | None:
    """tvm_ffi would load the code object into TVM's ROCm runtime module."""
    why = gpu_unavailable_reason()
    if why is not None:
        return why
    import tvm_ffi

    if tvm_ffi.get_global_func("device_api.rocm", allow_missing=True) is None:
        return ("this apache-tvm build has no ROCm runtime (device_api.rocm); install a TVM built "
                "with USE_ROCM=ON")
    return ("loading HIP code objects into TVM's ROCm runtime is not implemented in tilelang-rocm "
            "(kernels compile to code objects; nothing has run on AMD hardware)")


def cython_unavailable_reason() -> str | None:
    """cython would launch the code object through the HIP module API from its wrapper."""
    why = gpu_unavailable_reason()
    if why is not None:
        return why
    return ("tilelang-exec-cython has no HIP launcher (it launches CUDA cubins and CPU kernels); "
            "kernels compile to code objects, but nothing launches them")

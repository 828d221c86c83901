"""Device queries through torch (``torch.cuda.get_device_properties``), which serves both
CUDA and ROCm builds; attributes torch does not expose go to the CUDA runtime through
cuda-bindings (``cudaDeviceGetAttribute``). Nothing here is imported at ``import tilelang``.

Without a device every query raises ``BackendUnavailableError``: a number made up for a
GPU that is not there (upstream returns None from some of these) would silently shape a
kernel for the wrong device.
"""

from __future__ import annotations

from typing import Any

from ....errors import BackendUnavailableError

_UNITS = {"bytes": 1, "kb": 1024, "mb": 1024 * 1024}


def unavailable(reason: str) -> BackendUnavailableError:
    return BackendUnavailableError(f"tilelang.carver device query: {reason}")


def _torch_cuda() -> Any:
    try:
        import torch
    except ImportError as err:
        raise unavailable("torch is not installed; tilelang.carver reads GPU properties through "
                          "torch (pip install torch)") from err
    return torch


def get_cuda_device_properties(device_id: int = 0) -> Any:
    """torch's properties of GPU ``device_id`` (name, multi_processor_count, ...)."""
    torch = _torch_cuda()
    if not torch.cuda.is_available():
        raise unavailable("no CUDA or ROCm GPU is visible to torch (torch.cuda.is_available() is "
                          "False); device queries need one — on a machine without a GPU, give "
                          "sizes such as the SM count explicitly")
    count = torch.cuda.device_count()
    if not 0 <= device_id < count:
        raise unavailable(f"GPU {device_id} does not exist: torch sees {count} device(s), "
                          f"numbered 0..{count - 1}")
    return torch.cuda.get_device_properties(device_id)


def get_device_name(device_id: int = 0) -> str:
    return str(get_cuda_device_properties(device_id).name)


def get_num_sms(device_id: int = 0) -> int:
    """The number of streaming multiprocessors (CUs on ROCm) of GPU ``device_id``."""
    return int(get_cuda_device_properties(device_id).multi_processor_count)


def _scaled(value: int, format: str) -> int:
    if format not in _UNITS:
        raise ValueError(f"format must be one of {sorted(_UNITS)}, got {format!r}")
    return value // _UNITS[format]


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory a block may use without opting in (48 KiB on NVIDIA GPUs)."""
    props = get_cuda_device_properties(device_id)
    return _scaled(int(props.shared_memory_per_block), format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory a block may use after opting in (cudaFuncAttributeMaxDynamicSharedMemorySize),
    e.g. 227 KiB on sm_90."""
    props = get_cuda_device_properties(device_id)
    return _scaled(int(props.shared_memory_per_block_optin), format)


def get_registers_per_block(device_id: int = 0) -> int:
    """32-bit registers available to one block."""
    # torch exposes registers per SM only; the per-block limit is a runtime attribute
    return get_device_attribute(_ATTR_MAX_REGISTERS_PER_BLOCK, device_id)


def get_persisting_l2_cache_max_size(device_id: int = 0) -> int:
    """Bytes of L2 that may be set aside for persisting accesses."""
    return get_device_attribute(_ATTR_MAX_PERSISTING_L2_CACHE_SIZE, device_id)


# cudaDeviceAttr values (CUDA Runtime API, enum cudaDeviceAttr)
_ATTR_MAX_REGISTERS_PER_BLOCK = 12
_ATTR_MAX_PERSISTING_L2_CACHE_SIZE = 108


def get_device_attribute(attr: int, device_id: int = 0) -> int:
    """``cudaDeviceGetAttribute(attr, device_id)`` (``attr``: a cudaDeviceAttr value)."""
    get_cuda_device_properties(device_id)  # the same "no GPU" error as every other query
    try:
        from cuda.bindings import runtime
    except ImportError as err:
        raise unavailable("reading a CUDA device attribute needs cuda-bindings "
                          "(pip install 'tilelang[cuda]' or pip install cuda-bindings)") from err
    err, value = runtime.cudaDeviceGetAttribute(runtime.cudaDeviceAttr(attr), device_id)
    if int(err) != 0:
        raise unavailable(f"cudaDeviceGetAttribute({attr}, {device_id}) failed: {err}")
    return int(value)

"""Queries of the current CUDA (or ROCm) device, with upstream TileLang's names."""

from .cuda_driver import (
    get_cuda_device_properties,
    get_device_attribute,
    get_device_name,
    get_max_dynamic_shared_size_bytes,
    get_num_sms,
    get_persisting_l2_cache_max_size,
    get_registers_per_block,
    get_shared_memory_per_block,
)

__all__ = ["get_cuda_device_properties", "get_device_attribute", "get_device_name",
           "get_max_dynamic_shared_size_bytes", "get_num_sms", "get_persisting_l2_cache_max_size",
           "get_registers_per_block", "get_shared_memory_per_block"]

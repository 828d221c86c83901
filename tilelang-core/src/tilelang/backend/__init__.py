"""The backend registry, component interfaces and context resolution (public facade)."""

from .context import BackendContext
from .device_codegen import DeviceCodegen, DeviceOutput, HostCodegen, tvm_build_function
from .execution_backend import ExecutionBackend, ExecutionBackendSpec, KernelLauncher
from .manifest import BackendModule
from .pass_pipeline import PassPipeline, pass_config
from .registration import register_backend, register_execution_backend
from .registry import registered_backends, registered_execution_backends
from .resolution import create_backend_context
from .target import TargetDetector

__all__ = [
    "BackendContext",
    "BackendModule",
    "DeviceCodegen",
    "DeviceOutput",
    "ExecutionBackend",
    "ExecutionBackendSpec",
    "HostCodegen",
    "KernelLauncher",
    "PassPipeline",
    "TargetDetector",
    "create_backend_context",
    "pass_config",
    "register_backend",
    "register_execution_backend",
    "registered_backends",
    "registered_execution_backends",
    "tvm_build_function",
]

"""Shared pass-pipeline plumbing; backends own their ordered pass lists."""

from .dead_bindings import DropDeadBindings
from .launch_checks import GuardEmptyLaunches
from .launch_metadata import CaptureLaunchMetadata, captured_launches, python_expr
from .pipeline import PassPipeline, pass_config, prim_func_pass, take_pass_error
from .pipeline_utils import flatten_and_vectorize
from .shared_memory import PadTinySharedAllocations

__all__ = [
    "CaptureLaunchMetadata",
    "DropDeadBindings",
    "GuardEmptyLaunches",
    "PadTinySharedAllocations",
    "PassPipeline",
    "captured_launches",
    "flatten_and_vectorize",
    "pass_config",
    "prim_func_pass",
    "python_expr",
    "take_pass_error",
]

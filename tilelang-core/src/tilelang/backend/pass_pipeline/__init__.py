"""Shared pass-pipeline plumbing; backends own their ordered pass lists."""

from .launch_metadata import CaptureLaunchMetadata, python_expr
from .pipeline import PassPipeline, pass_config

__all__ = ["CaptureLaunchMetadata", "PassPipeline", "pass_config", "python_expr"]

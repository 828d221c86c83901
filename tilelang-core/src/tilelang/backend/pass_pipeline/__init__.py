"""Shared pass-pipeline plumbing; backends own their ordered pass lists."""

from .pipeline import PassPipeline, pass_config

__all__ = ["PassPipeline", "pass_config"]

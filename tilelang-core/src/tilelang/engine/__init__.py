"""The compiler engine: semantic check -> context.lower -> split -> codegen -> artifact."""

from .artifact import CompiledArtifact, KernelLaunch, ParamInfo
from .lower import current_pass_configs, lower, lower_with_context

__all__ = ["CompiledArtifact", "KernelLaunch", "ParamInfo", "current_pass_configs", "lower",
           "lower_with_context"]

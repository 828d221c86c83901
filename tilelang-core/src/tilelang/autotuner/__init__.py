"""Autotuning, as upstream TileLang spells it: ``@tilelang.autotune(configs=...)`` over
``@tilelang.jit``, or ``AutoTuner.from_kernel(kernel=..., configs=...).run()``.

Configurations compile in parallel in spawned worker processes, are checked and timed in
this process, and the outcome is cached on disk next to the kernels.
"""

from .capture import get_autotune_inputs, set_autotune_inputs
from .decorator import AutoTuneImpl, autotune
from .param import AutotuneResult, CompileArgs, ProfileArgs, Trial
from .tuner import AutotuneError, AutoTuner

__all__ = ["AutoTuneImpl", "AutoTuner", "AutotuneError", "AutotuneResult", "CompileArgs", "ProfileArgs",
           "Trial", "autotune", "get_autotune_inputs", "set_autotune_inputs"]

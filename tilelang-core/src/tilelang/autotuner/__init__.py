"""Autotuning, as upstream TileLang spells it: ``@tilelang.autotune(configs=...)`` over
``@tilelang.jit``, or ``AutoTuner.from_kernel(kernel=..., configs=...).run()``.

Configurations compile in parallel in spawned worker processes, are checked and timed in
this process, and the outcome is cached on disk next to the kernels. ``executor=`` moves
that work elsewhere: ``RayExecutor()`` spreads it over a Ray cluster (``tilelang[ray]``).
"""

from .capture import get_autotune_inputs, set_autotune_inputs
from .decorator import AutoTuneImpl, autotune
from .executor import LocalExecutor, Measurements, TuneExecutor, TuneJob
from .param import AutotuneResult, CompileArgs, ProfileArgs, Trial
from .ray_executor import RayExecutor  # Ray itself is imported when a tune uses it
from .tuner import AutotuneError, AutoTuner

__all__ = ["AutoTuneImpl", "AutoTuner", "AutotuneError", "AutotuneResult", "CompileArgs", "LocalExecutor",
           "Measurements", "ProfileArgs", "RayExecutor", "Trial", "TuneExecutor", "TuneJob", "autotune",
           "get_autotune_inputs", "set_autotune_inputs"]

"""Profiling compiled kernels, as upstream TileLang spells it:

    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda a, b: a @ b, rtol=1e-2, atol=1e-2)
    latency_ms = profiler.do_bench()
    tilelang.profiler.do_bench(lambda: torch.mm(a, b))

Importing this package is light: torch is imported when tensors are made or timed.
"""

from .bench import do_bench
from .compare import ToleranceError, assert_close
from .profiler import Profiler, profiler_for
from .supply import TensorSupplyType, get_tensor_supply

__all__ = ["Profiler", "TensorSupplyType", "ToleranceError", "assert_close", "do_bench",
           "get_tensor_supply", "profiler_for"]

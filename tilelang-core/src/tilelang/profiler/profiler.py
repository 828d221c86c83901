"""Profiler: checks a compiled kernel against a reference and times it (upstream TileLang's
``kernel.get_profiler()``), on inputs generated from the kernel's parameter list."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..engine.artifact import ParamInfo
from ..errors import TileLangError
from .bench import do_bench
from .compare import ToleranceError, assert_close
from .supply import TensorSupplyType, get_tensor_supply, import_torch


def _as_list(outputs: Any) -> list[Any]:
    if outputs is None:
        return []
    if isinstance(outputs, (list, tuple)):
        return list(outputs)
    return [outputs]


@dataclass
class Profiler:
    """params: the kernel's parameters; result_idx: which of them the kernel returns
    (out_idx); device: where generated tensors live ("cpu" for host kernels, "cuda", ...);
    adapter: the callable that runs the kernel (a JITKernel)."""

    params: Sequence[ParamInfo]
    result_idx: Sequence[int]
    supply_type: TensorSupplyType = TensorSupplyType.Auto
    adapter: Callable[..., Any] | None = None
    device: str = "cpu"
    supply: Callable[..., Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        count = len(self.params)
        indices = [self.result_idx] if isinstance(self.result_idx, int) else list(self.result_idx or ())
        for i in indices:
            if not -count <= i < count:
                raise TileLangError(f"result index {i} is out of range for a kernel with {count} parameters")
        self.result_idx = [i % count for i in indices]
        self.supply = get_tensor_supply(self.supply_type, self.device)

    def with_default_adapter(self, adapter: Callable[..., Any]) -> Profiler:
        self.adapter = adapter
        return self

    @property
    def func(self) -> Callable[..., Any]:
        if self.adapter is None:
            raise TileLangError("this Profiler has no kernel to run; create it with kernel.get_profiler() "
                                "or call with_default_adapter(kernel)")
        return self.adapter

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def _get_params(self, with_output: bool = False) -> list[ParamInfo]:
        return [p for i, p in enumerate(self.params) if with_output or i not in self.result_idx]

    def _get_inputs(self, with_output: bool = False,
                    dynamic_symbolic_constraints: Mapping[str, int] | None = None) -> list[Any]:
        """Fresh tensors for the kernel's inputs (and outputs when ``with_output``)."""
        return [self.supply(p, dynamic_symbolic_constraints) for p in self._get_params(with_output)]

    def _synchronize(self) -> None:
        if self.device != "cpu":
            import torch

            torch.cuda.synchronize()

    def _run_both(self, reference_program: Callable[..., Any],
                  input_tensors: Sequence[Any] | None) -> tuple[list[Any], list[Any]]:
        ins = self._get_inputs() if input_tensors is None else list(input_tensors)
        ref_outs = _as_list(reference_program(*ins))
        self._synchronize()
        lib_outs = _as_list(self.func(*ins))
        self._synchronize()
        if len(lib_outs) != len(ref_outs):
            raise ToleranceError(f"the kernel returned {len(lib_outs)} output(s) but the reference "
                                 f"returned {len(ref_outs)}; the reference must return the outputs "
                                 f"at out_idx {self.result_idx}")
        return lib_outs, ref_outs

    def assert_allclose(self, reference_program: Callable[..., Any],
                        input_tensors: Sequence[Any] | None = None, atol: float = 1e-2,
                        rtol: float = 1e-2, max_mismatched_ratio: float = 0.01) -> None:
        """Run the kernel and ``reference_program`` on the same inputs and compare each
        output; raises ToleranceError (an AssertionError) beyond the tolerance."""
        lib_outs, ref_outs = self._run_both(reference_program, input_tensors)
        for i, (lhs, rhs) in enumerate(zip(lib_outs, ref_outs)):
            if lhs is None or rhs is None:  # a reference may leave an output unchecked
                continue
            assert_close(lhs, rhs, rtol=rtol, atol=atol, max_mismatched_ratio=max_mismatched_ratio,
                         name=f"tilelang output {i}", ref_name=f"reference output {i}")

    def manual_assert_close(self, reference_program: Callable[..., Any],
                            input_tensors: Sequence[Any] | None = None,
                            manual_check_prog: Callable[[list[Any], list[Any]], Any] | None = None) -> None:
        """Like assert_allclose, but ``manual_check_prog(kernel_outputs, reference_outputs)``
        does the comparison."""
        if manual_check_prog is None:
            raise TileLangError("manual_assert_close needs manual_check_prog(lib_outs, ref_outs)")
        manual_check_prog(*self._run_both(reference_program, input_tensors))

    def assert_consistent(self, repeat: int = 10) -> None:
        """The kernel returns the same outputs on every run of the same inputs (catches races)."""
        torch = import_torch()
        ins = self._get_inputs()
        first = _as_list(self.func(*ins))
        for run in range(repeat):
            for i, (lhs, rhs) in enumerate(zip(_as_list(self.func(*ins)), first)):
                if not torch.equal(lhs, rhs):
                    raise ToleranceError(f"output {i} of run {run + 1} differs from the first run on "
                                         "the same inputs: the kernel is not deterministic")

    def run_once(self, func: Callable[..., Any] | None = None) -> Any:
        return (func or self.func)(*self._get_inputs())

    def do_bench(self, func: Callable[..., Any] | None = None, warmup: float = 25, rep: float = 100,
                 n_warmup: int = 0, n_repeat: int = 0, input_tensors: Sequence[Any] | None = None,
                 backend: str = "event", quantiles: Sequence[float] | None = None,
                 return_mode: str = "mean", dynamic_symbolic_constraints: Mapping[str, int] | None = None,
                 device: Any = None, early_stop_baseline: float | None = None) -> float | list[float]:
        """Milliseconds per call of ``func`` (default: the kernel) on generated inputs or
        ``input_tensors``; see tilelang.profiler.do_bench for the other arguments."""
        if input_tensors is None:
            input_tensors = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
        target = self.func if func is None else func
        if device is None:
            device = self.device  # host kernels are timed by the wall clock, not CUDA events
        return do_bench(partial(target, *input_tensors), warmup=warmup, rep=rep, _n_warmup=n_warmup,
                        _n_repeat=n_repeat, quantiles=quantiles, backend=backend,
                        return_mode=return_mode, device=device, early_stop_baseline=early_stop_baseline)


def profiler_for(kernel: Any, tensor_supply_type: TensorSupplyType = TensorSupplyType.Auto) -> Profiler:
    """The Profiler of a JITKernel: its parameters, outputs and device."""
    from ..testing import kernel_device  # the kernel exists, so TVM is loaded already

    artifact = kernel.artifact
    device = kernel_device(kernel) or "cpu"
    return Profiler(artifact.params, list(artifact.out_idx), tensor_supply_type, kernel, device)


__all__ = ["Profiler", "profiler_for"]

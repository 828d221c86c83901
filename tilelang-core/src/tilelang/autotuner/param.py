"""What the autotuner is told (CompileArgs, ProfileArgs) and what it returns
(AutotuneResult with one Trial per configuration), in upstream TileLang's spelling."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import TileLangError
from ..profiler.bench import BACKENDS
from ..profiler.supply import TensorSupplyType


@dataclass(frozen=True)
class CompileArgs:
    """tilelang.compile's options for every configuration (see tilelang.compile)."""

    out_idx: Sequence[int] | int | None = None
    target: Any = "auto"
    target_host: Any = None
    execution_backend: str = "auto"
    pass_configs: Mapping[str, Any] | None = None
    verbose: bool = False

    def compile_options(self, per_config_pass_configs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Keyword arguments of tilelang.compile, a configuration's own pass_configs merged in."""
        pass_configs = dict(self.pass_configs or {})
        pass_configs.update(per_config_pass_configs or {})
        return {"out_idx": self.out_idx, "target": self.target, "target_host": self.target_host,
                "execution_backend": self.execution_backend, "pass_configs": pass_configs or None}


@dataclass(frozen=True)
class ProfileArgs:
    """How each compiled configuration is checked and timed.

    warmup / rep: calls before and during timing (the autotuner passes them to do_bench as
    iteration counts, as upstream does); timeout: seconds one configuration's check and
    timing may take; supply_type / supply_prog: input tensors (``supply_prog(params)``
    returns them); ref_prog: the reference each configuration is checked against (and timed
    once, as ``ref_latency``) unless ``skip_check``; cache_input_tensors: reuse one set of
    inputs across configurations."""

    warmup: int = 25
    rep: int = 100
    timeout: float = 30
    supply_type: TensorSupplyType = TensorSupplyType.Auto
    ref_prog: Callable[..., Any] | None = None
    supply_prog: Callable[..., Any] | None = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Callable[..., Any] | None = None
    cache_input_tensors: bool = False
    backend: str = "event"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise TileLangError(f"set_profile_args: backend {self.backend!r} is not one of {BACKENDS}")
        if not isinstance(self.supply_type, TensorSupplyType):
            raise TileLangError(f"set_profile_args: supply_type must be a tilelang.TensorSupplyType, "
                                f"got {self.supply_type!r}")


@dataclass(frozen=True)
class Trial:
    """One configuration's outcome: its latency in ms, or the stage that failed and why.
    ``compile_pid`` is the process that compiled it (a pool worker, or this process);
    ``measured_on`` names the worker that checked and timed it when that was not this
    process (a RayExecutor's: node, device and process)."""

    index: int
    config: dict[str, Any]
    latency: float | None = None
    error: str | None = None
    stage: str | None = None  # "compile", "load", "check" or "bench" when it failed
    compile_pid: int | None = None
    measured_on: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "config": self.config, "latency": self.latency, "error": self.error,
                "stage": self.stage, "compile_pid": self.compile_pid, "measured_on": self.measured_on}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Trial:
        return cls(**data)


@dataclass
class AutotuneResult:
    """The best configuration: ``config``, its ``latency`` (ms), the reference's
    ``ref_latency``, the compiled ``kernel`` (a JITKernel) with its source ``libcode`` and
    ``func`` (the T.prim_func); ``trials`` lists every configuration's outcome and
    ``from_cache`` says whether this came from the on-disk tuning cache."""

    latency: float | None = None
    config: dict[str, Any] | None = None
    ref_latency: float | None = None
    libcode: str | None = None
    func: Any = None
    kernel: Any = None
    trials: list[Trial] = field(default_factory=list)
    from_cache: bool = False

    def __post_init__(self) -> None:
        if hasattr(self.kernel, "update_tuner_result"):  # the kernel knows how it was chosen
            self.kernel.update_tuner_result(self.latency, self.config, self.ref_latency)

    @property
    def failures(self) -> list[Trial]:
        return [t for t in self.trials if not t.ok]


__all__ = ["AutotuneResult", "CompileArgs", "ProfileArgs", "Trial"]

"""The recipe types: a Recipe names an upstream example and its Kernels (each with an optional
CpuCase); ModAttr, Tensor and Splat are argument placeholders resolved by the runner."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModAttr:
    """A (dotted) attribute of the example module, resolved after import."""

    name: str


@dataclass(frozen=True)
class Tensor:
    """An empty torch CPU tensor of this shape and dtype (a torch dtype name)."""

    shape: tuple[int, ...]
    dtype: str = "float16"


@dataclass(frozen=True)
class Splat:
    """Arguments computed from the example module (e.g. its own input constructor),
    spliced into the argument list in place."""

    make: Callable[[Any], Sequence[Any]]


@dataclass(frozen=True)
class CpuCase:
    """--mode cpu for one kernel: small sizes (overrides of the kernel's kwargs or args),
    torch inputs made from a seeded generator, a torch reference returning the expected
    outputs -- the kernel's returned outputs followed by the in-place ones (``inplace``:
    indices into the inputs). ``inputs=None`` compiles only."""

    kwargs: Mapping[str, Any] = field(default_factory=dict)
    args: tuple[Any, ...] | None = None
    inputs: Callable[[Any], list[Any]] | None = None
    ref: Callable[..., Any] | None = None
    out_idx: tuple[int, ...] | None = None  # None: the @tilelang.jit's own out_idx
    inplace: tuple[int, ...] = ()
    rtol: float = 1e-2
    atol: float = 1e-2


@dataclass(frozen=True)
class Kernel:
    attr: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    cpu: CpuCase | None = None
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or self.attr


@dataclass(frozen=True)
class Call:
    """What --mode run calls: a module function (``"__main__"``: the file as a script)."""

    attr: str = "main"
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recipe:
    path: str
    kernels: tuple[Kernel, ...]
    run: Call = Call()
    cuda_shim: bool = False  # the module makes CUDA tensors at import time
    # the SM count a kernel asks the device for (tilelang.carver.arch.driver.get_num_sms),
    # declared for lower/cpu modes where no GPU answers (the library itself refuses to guess)
    num_sms: int | None = None

    @property
    def name(self) -> str:
        return self.path.removesuffix(".py")

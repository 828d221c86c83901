"""The eager kernel style's declarations: ``T.const``, ``T.empty``.

An eager kernel is a ``@tilelang.jit`` function whose body declares its tensors::

    M, N = T.const("M, N")          # sizes taken from the arguments' shapes
    A: T.Tensor((M, N), T.float32)  # an input (a parameter annotated in the body)
    B = T.empty((M, N), T.float32)  # an output, allocated at each call and returned
    with T.Kernel(...): ...
    return B

The JIT (``tilelang.jit.eager``) runs the statements before the first ``with`` as plain
Python inside a :class:`EagerBuild`, twice per specialization: first to learn where each
``T.const`` name sits in the tensors' shapes (the names are TVM variables then), then with
the values read from the arguments (the names are Python ints, so tile sizes such as
``T.alloc_fragment((blk_m, N), ...)`` stay constant). Declarations that need numbers
(``scale = (1.0 / dim) ** 0.5``) fail on variables; for them the first run is repeated with
placeholder numbers (:func:`placeholder`), recognizable in the shapes. Outside such a
build, these declarations have no meaning and say so.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tvm import ir, tirx
from tvm.script.parser.tirx import Buffer as _Buffer

from ..errors import LanguageError
from .dtypes import as_dtype_str

_SEPARATOR = re.compile(r"\s*,\s*|\s+")


def split_names(names: str, what: str) -> list[str]:
    """``"M, N"`` / ``"M N"`` / ``"M"`` -> identifiers (upstream accepts all three)."""
    parts = [p for p in _SEPARATOR.split(names.strip()) if p]
    bad = [p for p in parts if not p.isidentifier()]
    if not parts or bad:
        raise LanguageError(f"{what}({names!r}): expected identifiers separated by commas or "
                            f"spaces, e.g. {what}(\"M, N\")")
    return parts


def placeholder(index: int) -> int:
    """The number standing for the ``index``-th T.const name in a first run with numbers:
    1024 times the index-th prime from 1009 — divisible by any power-of-two tile up to 1024
    (so checks such as ``K % 64 == 0`` pass) and distinct from the others and their small
    multiples (``2 * M`` never equals ``N``). Around a million: no realistic literal size."""
    candidate, found = 1008, -1
    while found < index:
        candidate += 1
        if all(candidate % d for d in range(2, int(candidate ** 0.5) + 1)):
            found += 1
    return 1024 * candidate


class EagerBuild:
    """One run of an eager kernel's declarations.

    ``values`` is None in a first run: T.const gives variables (or, with ``numbers``,
    placeholder ints), recorded in ``consts``. Otherwise it holds the value of every T.const
    name. ``outputs`` collects the T.empty tensors in order.
    """

    def __init__(self, kernel: str, values: Mapping[str, int] | None = None, numbers: bool = False) -> None:
        self.kernel = kernel
        self.values = values
        self.numbers = numbers
        self.consts: dict[str, Any] = {}  # name -> tirx.Var, or its placeholder int
        self.outputs: list[Any] = []
        self.workspaces: list[Any] = []  # T.alloc_global
        self.pass_configs: dict[str, Any] = {}  # T.annotate_pass_configs
        self.compile_flags: list[str] = []  # T.annotate_compile_flags

    def const(self, name: str, dtype: str) -> Any:
        if self.values is None:
            if name not in self.consts:
                numbered = self.numbers
                self.consts[name] = placeholder(len(self.consts)) if numbered else tirx.Var(name, str(dtype))
            return self.consts[name]
        if name not in self.values:  # the JIT resolves every name it saw in the first run
            raise LanguageError(f"kernel {self.kernel!r}: T.const {name!r} has no value; pass "
                                f"{name}=... (its value could not be read from a tensor shape)")
        return self.values[name]


_STATE = threading.local()


def _builds() -> list[EagerBuild]:
    stack = getattr(_STATE, "builds", None)
    if stack is None:
        stack = _STATE.builds = []
    return stack


@contextlib.contextmanager
def eager_build(build: EagerBuild) -> Iterator[EagerBuild]:
    """Make ``build`` the target of T.const / T.empty while the declarations run."""
    stack = _builds()
    stack.append(build)
    try:
        yield build
    finally:
        stack.pop()


def _current(what: str) -> EagerBuild:
    stack = _builds()
    if not stack:
        raise LanguageError(
            f"{what} is only valid in the body of an eager @tilelang.jit function, or of a "
            "T.prim_func whose parameters are annotated in its body, before its first `with "
            "T.Kernel(...)` (e.g. `M, N = T.const(\"M, N\")`); in a T.prim_func use "
            "T.dynamic(\"M\") for a size known at run time"
        )
    return stack[-1]


def const(name: str, dtype: str = "int32") -> Any:
    """``M, N = T.const("M, N")``: sizes the JIT reads from the tensors' shapes.

    A kernel is compiled once per distinct set of values (use ``T.dynamic`` for a size that
    should not cause a recompilation). ``name`` holds one or several names."""
    build = _current("T.const")
    names = split_names(name, "T.const")
    values = tuple(build.const(n, dtype) for n in names)
    return values[0] if len(values) == 1 else values


def _empty_args(shape: Sequence[Any], dtype: Any) -> tuple[tuple[Any, ...], Any]:
    # T.empty((M, N), dtype) / T.empty([M, N], dtype=...) / T.empty(M, N, dtype=...)
    if len(shape) in (1, 2) and isinstance(shape[0], (tuple, list)):
        if len(shape) == 2:
            if dtype is not None:
                raise LanguageError("T.empty: dtype given twice (positionally and as dtype=)")
            dtype = shape[1]
        shape = tuple(shape[0])
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, (int, ir.Expr)):
            raise LanguageError(f"T.empty: dimension {dim!r} is not an integer or a size "
                                "expression; write T.empty((M, N), T.float32)")
    return tuple(shape), ("float32" if dtype is None else dtype)


def empty(*shape: Any, dtype: Any = None) -> Any:
    """``C = T.empty((M, N), T.float16)``: an output of an eager kernel.

    The call allocates it like the inputs (numpy in, numpy out; torch on the inputs'
    device) and returns it; inside the kernel it is a tensor like a parameter."""
    build = _current("T.empty")
    dims, dtype = _empty_args(shape, dtype)
    tensor = _Buffer(dims, as_dtype_str(dtype))
    build.outputs.append(tensor)
    return tensor


def in_declarations() -> bool:
    """Whether an eager kernel's declarations are running (T.const, T.empty are valid)."""
    return bool(_builds())


def workspace(shape: Sequence[Any], dtype: Any) -> Any:
    """``C = T.alloc_global((N,), dtype)`` among an eager kernel's declarations: a global
    workspace the host allocates for each call, as in a T.prim_func's body (the JIT
    declares it before the kernel: jit/eager.py)."""
    build = _current("T.alloc_global")
    buffer = _Buffer(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,), as_dtype_str(dtype),
                     scope="global")
    build.workspaces.append(buffer)
    return buffer


__all__ = ["EagerBuild", "const", "eager_build", "empty", "in_declarations", "placeholder", "split_names",
           "workspace"]


def annotate_pass_configs(configs: Mapping[Any, Any]) -> None:
    """``T.annotate_pass_configs({PassConfigKey.TL_ENABLE_FAST_MATH: True})`` among the
    declarations: pass configs the kernel compiles with (a compile's own win)."""
    build = _current("T.annotate_pass_configs")
    if not isinstance(configs, Mapping):
        raise LanguageError(f"T.annotate_pass_configs expects a dict of pass configs, got {type(configs).__name__}")
    build.pass_configs.update({str(getattr(k, "value", k)): v for k, v in configs.items()})


def annotate_compile_flags(flags: Sequence[str] | str) -> None:
    """``T.annotate_compile_flags(["--use_fast_math"])`` among the declarations: flags for the
    backend's device compiler, as ``tilelang.compile(..., compile_flags=)``."""
    build = _current("T.annotate_compile_flags")
    flags = [flags] if isinstance(flags, str) else list(flags)
    if not all(isinstance(f, str) for f in flags):
        raise LanguageError(f"T.annotate_compile_flags expects strings, got {flags!r}")
    build.compile_flags.extend(flags)

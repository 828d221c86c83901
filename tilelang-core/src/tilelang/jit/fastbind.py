"""The per-call fast path of argument binding, generated per kernel.

Validating a call by walking the signature costs microseconds in Python; a kernel's
signature is fixed, so each kernel gets one straight-line function, emitted here from its
signature, that checks torch tensors with identity and integer comparisons and allocates
outputs. It returns None at the first mismatch, and the caller then runs the full checks,
which raise the detailed ArgumentError. So the fast path never decides an error message,
and a wrong argument can never pass it: every check of the full path is also made here.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any

from ..engine.artifact import CompiledArtifact
from ..errors import CompileError
from .arguments import int_range


class _Emitter:
    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def __init__(self, miss: str) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.miss = miss

    def fail_unless(self, condition: str) -> None:
        self.line(f"if not ({condition}): return {self.miss}")


def _check_pasted(artifact: CompiledArtifact) -> None:
    """Every artifact value the emitted source spells out must be an exact int: an
    artifact can come from a cache entry on disk, and a string there would be code.
    (dtypes and symbol names only enter as getattr arguments and repr()s.)"""
    def exact_int(value: Any) -> bool:
        return type(value) is int

    bad = None
    if not exact_int(artifact.min_alignment) or artifact.min_alignment < 0:
        bad = f"min_alignment = {artifact.min_alignment!r}"
    elif not all(exact_int(i) and 0 <= i < len(artifact.params) for i in artifact.out_idx):
        bad = f"out_idx = {artifact.out_idx!r}"
    else:
        for p in artifact.params:
            # names may be str subclasses (a fresh compile's come from TVM: tvm_ffi.String, and
            # dtypes are tilelang's dtype objects); they are only repr()'d, never pasted
            if not isinstance(p.dtype, str) or not all(exact_int(d) or isinstance(d, str) for d in p.shape or ()):
                bad = f"parameter {p.name!r}: dtype {p.dtype!r}, shape {p.shape!r}"
                break
    if bad is not None:
        raise CompileError(f"kernel {artifact.kernel_name!r}: its metadata is corrupt ({bad}: not what "
                           "the compiler writes); clear its cache entry (tilelang.cache.clear_cache())")


#: what a generated fast *call* returns when an argument needs the full checks
MISS = object()


class _UntilTorch:
    """The fast binder of a kernel loaded before torch was imported (a cache hit in a new
    process must not import torch, ~1 s, for a caller that may pass numpy arrays): a
    miss for every call until torch is imported, then the binder built at that call."""

    def __init__(self, artifact: CompiledArtifact, device_type: int, launch: Callable[..., Any] | None) -> None:
        self.args = (artifact, device_type, launch)
        self.miss = None if launch is None else MISS
        self.built: Callable[..., Any] | None = None

    def __call__(self, *args: Any) -> Any:
        if self.built is None:
            if "torch" not in sys.modules:
                return self.miss  # no torch tensor can be among the arguments
            self.built = _build(*self.args) or (lambda *_: self.miss)
        return self.built(*args)


def build_fast_binder(artifact: CompiledArtifact, device_type: int,
                      launch: Callable[..., Any] | None = None) -> Callable[..., Any] | None:
    """For torch tensors: without ``launch``, ``f(*inputs) -> (call_args, outputs, symbols)``
    or None; with ``launch``, ``f(*inputs)`` also calls ``launch(*call_args)`` and returns
    the outputs as the kernel does (None, one tensor or a list, as upstream), or MISS. None when torch
    is not installed or the signature needs the full path. Before torch is imported, a
    function that misses until it is (torch is not imported here)."""
    _check_pasted(artifact)
    if "torch" not in sys.modules:
        if importlib.util.find_spec("torch") is None:
            return None
        return _UntilTorch(artifact, device_type, launch)
    return _build(artifact, device_type, launch)


def _build(artifact: CompiledArtifact, device_type: int,
           launch: Callable[..., Any] | None) -> Callable[..., Any] | None:
    import torch

    params, out_idx = artifact.params, set(artifact.out_idx)
    if artifact.shape_checks or any(p.packs is not None or any(isinstance(d, str) and not d.isidentifier()
                                                              for d in p.shape or ()) for p in params):
        return None  # sub-byte tensors (several storage dtypes, uint8 views), expression or solved dimensions
    inputs = [i for i in range(len(params)) if i not in out_idx]
    env: dict[str, Any] = {"_Tensor": torch.Tensor, "_empty": torch.empty, "_MISS": MISS, "_launch": launch}
    e = _Emitter("None" if launch is None else "_MISS")
    names = [f"a{i}" for i in inputs]
    symbols: dict[str, str] = {}
    narrow: dict[str, int] = {}
    for name, dtype in artifact.narrow_symbols:
        bounds = int_range(dtype)
        if type(name) is not str or bounds is None:
            return None
        narrow[name] = bounds[1]
    first_tensor = None
    on_device = "is_cuda" if device_type == 2 else "is_cpu"
    scalar_dims = artifact.scalar_dims  # integer scalars in a tensor's shape: symbols they bind
    for i in inputs:
        p, x = params[i], f"a{i}"
        if p.dtype == "handle":  # an address (`T.ptr`): the binder converts tensors and ints
            return None
        if not p.is_tensor:
            if p.dtype.startswith(("int", "uint")):
                bounds = int_range(p.dtype)
                if bounds is None:
                    return None
                e.fail_unless(f"type({x}) is int and {bounds[0]} <= {x} <= {bounds[1]}")
                if p.name in scalar_dims:  # negative, or unlike a tensor's size: the full path says so
                    e.fail_unless(f"{x} >= 0" if p.name not in symbols else f"{x} == {symbols[p.name]}")
                    symbols.setdefault(p.name, x)
            elif p.dtype.startswith(("float", "bfloat")):
                # an int goes as it is, which execution backends convert through int64
                e.fail_unless(f"type({x}) is float or (type({x}) is int and {-(2**63)} <= {x} < {2**63})")
            else:
                e.fail_unless(f"type({x}) is bool")
            continue
        dtype = getattr(torch, p.dtype, None)
        if dtype is None or device_type not in (1, 2):
            return None
        env[f"_dt{i}"] = dtype
        e.fail_unless(f"type({x}) is _Tensor and {x}.dtype is _dt{i} and {x}.{on_device}")
        e.line(f"s = {x}.shape")
        e.fail_unless(f"len(s) == {len(p.shape or ())}")
        for axis, dim in enumerate(p.shape or ()):
            if isinstance(dim, int):
                e.fail_unless(f"s[{axis}] == {dim}")
            elif dim in symbols:
                e.fail_unless(f"s[{axis}] == {symbols[dim]}")
            else:
                symbols[dim] = f"d{len(symbols)}"
                e.line(f"{symbols[dim]} = s[{axis}]")
                if dim in narrow:
                    e.fail_unless(f"{symbols[dim]} <= {narrow[dim]}")
        if p.strides is None:
            e.fail_unless(f"{x}.is_contiguous()")
            if any(not isinstance(d, int) or d == 0 for d in p.shape or ()):
                # no elements: its strides may be numpy's zeros (torch.from_numpy), which
                # DLPack consumers refuse; the full path gives it compact ones
                e.fail_unless(f"{x}.numel()")
        else:
            return None  # explicit strides: the full path checks them
        if artifact.min_alignment:
            e.fail_unless(f"{x}.data_ptr() % {artifact.min_alignment} == 0")
        first_tensor = first_tensor or x
    outputs = []
    for i in sorted(out_idx):
        p = params[i]
        if first_tensor is None:
            return None
        env[f"_dt{i}"] = getattr(torch, p.dtype)
        dims = [str(d) if isinstance(d, int) else symbols.get(d, "") for d in p.shape or ()]
        if "" in dims:
            return None
        shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
        e.line(f"a{i} = _empty({shape}, dtype=_dt{i}, device={first_tensor}.device)")
        outputs.append(f"a{i}")
    call = ", ".join(f"a{i}" for i in range(len(params)))
    if launch is None:  # the symbols tensors bind (the scalars are in the call already)
        tensor_bound = set(artifact.input_symbols)
        syms = ", ".join(f"{name!r}: {var}" for name, var in symbols.items()
                         if name not in scalar_dims or name in tensor_bound)
        e.line(f"return [{call}], [{', '.join(outputs)}], {{{syms}}}")
    else:
        e.line(f"_launch({call})")
        e.line("return " + ("None" if not outputs else outputs[0] if len(outputs) == 1
                            else "[" + ", ".join(outputs) + "]"))
    source = f"def fast_bind({', '.join(names)}):\n" + "\n".join(e.lines) + "\n"
    namespace: dict[str, Any] = dict(env)
    exec(compile(source, f"<tilelang fast binder for {artifact.kernel_name}>", "exec"), namespace)  # noqa: S102 - our own emitted code
    function = namespace["fast_bind"]
    function.source = source
    return function

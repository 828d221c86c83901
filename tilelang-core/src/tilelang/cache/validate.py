"""Type checks of a CompiledArtifact read back from a cache entry.

Its fields reach generated code (the fast binder pastes extents and the alignment into
Python source it compiles; launch plans evaluate expressions), so every field must have
the exact type our compiler writes before anything uses it: a hand-edited or corrupted
``artifact.json`` then reads as a corrupt entry, which is rebuilt, instead of code.
"""

from __future__ import annotations

import re
from typing import Any

from ..engine.artifact import CompiledArtifact, dim_symbols, dim_value

_DTYPE = re.compile(r"[a-z][a-z0-9_]*\Z")


class InvalidArtifact(ValueError):
    """A field of a loaded artifact has a type or value our compiler never writes."""


def _need(ok: bool, what: str, value: Any) -> None:
    if not ok:
        raise InvalidArtifact(f"artifact field {what} = {value!r} is not what the compiler writes")


def _is_int(value: Any) -> bool:
    return type(value) is int


def _check_dims(dims: Any, what: str) -> None:
    if dims is None:
        return
    _need(type(dims) is tuple, what, dims)
    for axis, dim in enumerate(dims):
        _need((_is_int(dim) and dim >= 0) or (type(dim) is str and _is_dim_text(dim)), f"{what}[{axis}]", dim)


def _is_dim_text(text: str) -> bool:
    """A symbol's name, or integer arithmetic over names (what dim_value evaluates)."""
    if text.isidentifier():
        return True
    try:
        dim_value(text, dict.fromkeys(dim_symbols(text), 1))
    except (SyntaxError, ValueError, ArithmeticError):
        return False
    return True


def check_artifact(artifact: CompiledArtifact) -> CompiledArtifact:
    """Return ``artifact`` if every serialized field has its exact type; else raise
    InvalidArtifact naming the field."""
    for name in ("kernel_name", "target", "target_host", "target_backend", "execution_backend",
                 "host_source", "device_source", "route"):
        _need(type(getattr(artifact, name)) is str, name, getattr(artifact, name))
    alignment = artifact.min_alignment
    _need(_is_int(alignment) and alignment >= 0 and alignment & (alignment - 1) == 0,
          "min_alignment", alignment)
    _need(_is_int(artifact.device_type) and artifact.device_type >= 0, "device_type", artifact.device_type)
    _need(type(artifact.params) is tuple, "params", artifact.params)
    for i, p in enumerate(artifact.params):
        _need(type(p.name) is str, f"params[{i}].name", p.name)
        _need(type(p.dtype) is str and bool(_DTYPE.match(p.dtype)), f"params[{i}].dtype", p.dtype)
        _check_dims(p.shape, f"params[{i}].shape")
        _check_dims(p.strides, f"params[{i}].strides")
        _need(p.packs is None or (type(p.packs) is str and bool(_DTYPE.match(p.packs))), f"params[{i}].packs", p.packs)
        _need(type(p.optional) is bool, f"params[{i}].optional", p.optional)
    count = len(artifact.params)
    for i in artifact.out_idx:
        _need(_is_int(i) and 0 <= i < count, "out_idx", artifact.out_idx)
    _need(len(set(artifact.out_idx)) == len(artifact.out_idx), "out_idx", artifact.out_idx)
    written = artifact.written
    _need(written is None or (type(written) is tuple and all(_is_int(i) and 0 <= i < count for i in written)),
          "written", written)
    symbols = artifact.narrow_symbols
    _need(type(symbols) is tuple and all(type(s) is tuple and len(s) == 2 and type(s[0]) is str
                                         and s[0].isidentifier() and type(s[1]) is str
                                         and bool(_DTYPE.match(s[1])) for s in symbols),
          "narrow_symbols", symbols)
    checks = artifact.shape_checks
    _need(type(checks) is tuple and all(
        type(c) is tuple and len(c) == 7 and _is_int(c[0]) and 0 <= c[0] < count and _is_int(c[1]) and c[1] >= 0
        and type(c[2]) is str and c[2].isidentifier() and _is_int(c[3]) and c[3] > 0 and _is_int(c[4])
        and type(c[5]) is str and type(c[6]) is str for c in checks), "shape_checks", checks)
    windows = artifact.l2_windows
    inputs = count - len(artifact.out_idx)
    _need(type(windows) is tuple and all(
        type(w) is tuple and len(w) == 2 and _is_int(w[0]) and 0 <= w[0] < inputs and type(w[1]) is float
        and 0 < w[1] <= 1 for w in windows), "l2_windows", windows)
    for k, launch in enumerate(artifact.launches):
        _need(type(launch.symbol) is str, f"launches[{k}].symbol", launch.symbol)
        for field in ("args", "arg_types", "grid", "block"):
            values = getattr(launch, field)
            _need(all(type(v) is str for v in values), f"launches[{k}].{field}", values)
        _need(type(launch.dynamic_smem) is str, f"launches[{k}].dynamic_smem", launch.dynamic_smem)
    return artifact


def load_artifact(text: str) -> CompiledArtifact:
    """Parse and check an entry's ``artifact.json``; InvalidArtifact for anything else."""
    try:
        artifact = CompiledArtifact.from_json(text)
    except (ValueError, TypeError, KeyError, AttributeError) as err:  # JSONDecodeError is a ValueError
        raise InvalidArtifact(f"artifact.json cannot be read ({type(err).__name__}: {err})") from err
    return check_artifact(artifact)


__all__ = ["InvalidArtifact", "check_artifact", "load_artifact"]

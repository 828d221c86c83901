"""Dtypes as upstream TileLang writes them: ``T.float16``, ``T.bfloat16``, ``T.float``,
``T.float8_e4m3fn``, ``dtype: T.dtype = T.float16`` ...

Each one is a :class:`dtype`: a subclass of TVM's ``DataType``, which is itself a ``str``,
so ``T.float16`` goes everywhere a dtype string goes (``T.Tensor``, ``T.alloc_*``,
``T.cast``, ``tirx.const``, comparisons with ``"float16"``, dict keys, cache keys) with no
conversion at each call site. Calling it keeps TVMScript's meaning: ``T.float32(1)`` is a
constant, ``T.float32()`` a fresh variable (what the parser does with ``x: T.float32``).

``T.dtype(x)`` normalizes any spelling a user may hold — a string, a numpy or torch dtype,
Python's ``int``/``float``/``bool`` — and says which spellings exist when it cannot.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping
from typing import Any

import tvm
from tvm import tirx
from tvm.tirx.script.builder import ir as _ir
from typing_extensions import Self

from ..errors import LanguageError

# Python's own types as dtypes (upstream's reading of `x: int` in an eager signature)
_PYTHON_TYPES = {builtins.bool: "bool", builtins.int: "int32", builtins.float: "float32"}

# C-style aliases upstream exports next to the sized names
ALIASES = {"bool": "bool", "short": "int16", "int": "int32", "uint": "uint32", "long": "int64",
           "half": "float16", "float": "float32", "double": "float64",
           # upstream's TF32 tensor-core inputs: float32 storage; products here are computed
           # in float32, at least TF32's precision
           "tfloat32": "float32"}

# Upstream's `T.float8_e4m3` is the e4m3 of NVIDIA's hardware: its CUDA code generator
# prints the same type for float8_e4m3 and float8_e4m3fn, and `.as_torch()` gives
# torch.float8_e4m3fn. Written as a name (T.float8_e4m3, "float8_e4m3"), it means that here
# too; a numpy array of ml_dtypes' IEEE-style float8_e4m3 keeps TVM's type of that name.
_UPSTREAM_NAMES = {"float8_e4m3": "float8_e4m3fn"}


def _name_of(value: Any) -> str:
    """The dtype string for any value a user may pass as a dtype."""
    if isinstance(value, str):
        return str.__str__(value)
    if value in _PYTHON_TYPES:
        return _PYTHON_TYPES[value]
    # numpy's scalar types are classes (np.float32); dtype instances and torch dtypes are not
    module = (value.__module__ if isinstance(value, type) else type(value).__module__) or ""
    if module.startswith("torch"):  # torch.float16 -> "float16"
        return str(value).removeprefix("torch.")
    if module.startswith("numpy") or hasattr(value, "char"):  # np.float32 / np.dtype("float32")
        import numpy as np

        return np.dtype(value).name
    if isinstance(value, _ir.DtypeConstructor):
        return value._dtype_str
    if value is _ir.ptr or value is ptr:
        # upstream's T.Tensor([n], T.ptr): a table of device addresses, as torch holds them
        # (tensor.data_ptr() in an int64 tensor); T.make_tensor(table[i], ...) reads one
        return "int64"
    raise LanguageError(f"{value!r} ({type(value).__name__}) is not a dtype; write T.float16, "
                        "'float16', torch.float16 or numpy.float16")


class dtype(tvm.DataType):
    """A TileLang dtype: a ``str`` (TVM's ``DataType``) that is also TVMScript's constructor.

    ``T.dtype("float16") == T.float16 == "float16"``; ``T.float16(1.5)`` is a constant and
    ``T.float16()`` a scalar variable."""

    __slots__ = ()

    def __new__(cls, value: Any) -> Self:
        if isinstance(value, dtype):
            return value
        name = _name_of(value)
        name = ALIASES.get(name, name)
        if isinstance(value, (str, _ir.DtypeConstructor)):
            name = _UPSTREAM_NAMES.get(name, name)
        try:
            return super().__new__(cls, name)
        except Exception as err:  # TVM's parser raises a plain ValueError/TVMError
            raise LanguageError(f"{name!r} is not a dtype TVM knows ({err}); write e.g. T.float16, "
                                "T.bfloat16, T.float32, T.int8, T.float8_e4m3fn") from None

    def __call__(self, expr: Any = None, *more: Any, is_size_var: bool = False) -> Any:
        """``T.float32(1)``: a constant of this dtype; ``T.float32()``: a new variable;
        ``T.bfloat16x2(a, b)``: a vector of its lanes (upstream's packing form)."""
        if more:
            values = [expr, *more]
            if len(values) != self.lanes:
                raise LanguageError(f"T.{str.__str__(self)}(...) packs {self.lanes} lanes, got {len(values)} values")
            lane = str(self.with_lanes(1))
            values = [tirx.convert(v) if not isinstance(v, tirx.PrimExpr) else v for v in values]
            values = [v if str(v.ty) == lane else tirx.Cast(lane, v) for v in values]
            return tirx.Shuffle(values, [tirx.const(i, "int32") for i in range(len(values))])
        if self.lanes > 1 and str.__str__(self) not in _CONSTRUCTOR_CALLS:
            # TVM lists constructors of vectors it has no builder function for (T.int8x2(1)
            # failed with "_ffi_api has no attribute 'Int8x2'"): a variable, or the lane's
            # value in every lane
            if expr is None:
                return tirx.Var("v", str.__str__(self))
            lane = dtype(str(self.with_lanes(1)))
            value = expr if isinstance(expr, tirx.PrimExpr) and expr.dtype.lanes > 1 else lane(expr)
            return value if isinstance(value, tirx.PrimExpr) and value.dtype.lanes > 1 else \
                tirx.Broadcast(value, self.lanes)
        if expr is None:
            return _ir.var(str(self), is_size_var=is_size_var) if is_size_var else _constructor(self)()
        if str.__str__(self) == "uint64" and isinstance(expr, int) and 2 ** 63 <= expr < 2 ** 64:
            # TVM's integer constants are int64 inside: the upper half of uint64 is its bit pattern
            return tirx.reinterpret("uint64", tirx.const(expr - 2 ** 64, "int64"))
        return _constructor(self)(expr)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (dtype, (str.__str__(self),))

    @property
    def bytes(self) -> int:
        """Bytes per element (vector dtypes count every lane; sub-byte types round up)."""
        return (self.bits * self.lanes + 7) // 8

    def as_torch(self) -> Any:
        """The matching ``torch.dtype`` (torch's name for fp8 formats included)."""
        import torch

        found = getattr(torch, str.__str__(self), None)
        if not isinstance(found, torch.dtype):
            raise LanguageError(f"dtype {str.__str__(self)!r} has no torch equivalent")
        return found

    def as_numpy(self) -> Any:
        import numpy as np

        return np.dtype(str.__str__(self))


def _constructor(value: dtype) -> Any:
    """TVMScript's constructor for a dtype (a DtypeConstructor, or a generic one)."""
    found = _CONSTRUCTORS.get(str.__str__(value))
    if found is not None:
        return found
    return lambda expr=None: _ir.var(str(value)) if expr is None else tvm.tirx.const(expr, str(value))


# Every sized dtype TVMScript spells as `T.<name>` (float16, int8x4, float8_e4m3fn, ...).
_CONSTRUCTORS: dict[str, Any] = {
    c._dtype_str: c for c in vars(_ir).values() if isinstance(c, _ir.DtypeConstructor)
}
#: the dtypes whose TVMScript constructor has its builder function (vectors of a few)
_CONSTRUCTOR_CALLS = {name for name, c in _CONSTRUCTORS.items() if hasattr(_ir._ffi_api, c._ffi_name)}
#: name -> dtype object, for `tilelang.language` to export
DTYPES: dict[str, dtype] = {}
for _ctor in vars(_ir).values():
    if isinstance(_ctor, _ir.DtypeConstructor):
        _name = next(k for k, v in vars(_ir).items() if v is _ctor)
        DTYPES[_name] = dtype(_ctor._dtype_str)
for _alias, _target in ALIASES.items():
    DTYPES[_alias] = dtype(_target)
for _extra in ("int4", "uint4", "float4_e2m1fn", "float8_e4m3fn", "float8_e5m2"):
    DTYPES.setdefault(_extra, dtype(_extra))
# vectors of every sized scalar, as upstream exports them (T.bfloat16x2, T.float32x4, ...)
for _scalar in [n for n in DTYPES if "x" not in n and n not in ALIASES and n not in ("void", "handle")]:
    for _lanes in (2, 4, 8):
        try:
            DTYPES.setdefault(f"{_scalar}x{_lanes}", dtype(f"{_scalar}x{_lanes}"))
        except LanguageError:  # a name TVM has no vector of
            pass

#: upstream's private list of the dtype names ``T`` exports (its frontend tests iterate it)
_all_dtypes: list[str] = list(DTYPES)


def ptr(dtype: Any = None, storage_scope: str = "global") -> Any:
    """``T.ptr``: a pointer variable, as upstream spells it. ``a_ptr: T.ptr`` is an opaque
    handle parameter (``T.make_tensor(a_ptr, shape, dtype)`` gives it a type), ``T.ptr(T.float16)``
    a typed one, and ``T.Tensor([n], T.ptr)`` a table of addresses (int64, see ``_name_of``).

    TVMScript's own ``ptr`` requires the dtype, so upstream's bare annotation would fail."""
    return _ir.handle(None if dtype is None else as_dtype_str(dtype), storage_scope)


class _TorchDtypeNames(Mapping):
    """torch dtype -> dtype string, for code written against upstream's private
    ``_TORCH_DTYPE_TO_STR`` (upstream's gemm_sp example imports it). Reads torch only when
    used, so importing this module stays light."""

    def _dtypes(self) -> list[Any]:
        import torch

        return [v for v in vars(torch).values() if isinstance(v, torch.dtype)]

    def __getitem__(self, key: Any) -> str:
        module = type(key).__module__ or ""
        if not module.startswith("torch"):
            raise KeyError(key)
        return _name_of(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(dict.fromkeys(self._dtypes()))

    def __len__(self) -> int:
        return len(dict.fromkeys(self._dtypes()))


_TORCH_DTYPE_TO_STR: Mapping[Any, str] = _TorchDtypeNames()


def as_dtype_str(value: Any) -> str:
    """A plain dtype string for any dtype spelling (for code that stores or compares it)."""
    return str.__str__(dtype(value))


def __getattr__(name: str) -> dtype:
    """``from tilelang.language import dtypes as T; T.float16``: each dtype by name, as
    upstream's module has them (module attributes resolved on access, so the C-style aliases
    ``int`` / ``float`` / ``bool`` do not shadow Python's in this module)."""
    try:
        return DTYPES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = ["ALIASES", "DTYPES", "as_dtype_str", "dtype", "ptr"]

"""Argument validation and binding shared by the Python execution backends.

Checks run before any launch and raise ArgumentError with the kernel, the argument and the
fix: dtype, shape (constant and symbolic dimensions, which must agree across arguments),
device, contiguity. Outputs named by ``out_idx`` are allocated here, like the inputs
(numpy in -> numpy out; torch in -> torch out on the same device).

The rules every execution backend applies (cython's compiled checks agree, and fall back to
these for the message):
- a read-only numpy array is refused where the kernel may write (``artifact.written``) and
  accepted elsewhere; DLPack cannot mark memory read-only, so a consumer that needs DLPack
  (tvm_ffi) gets a writable alias of the same memory, never a copy (the kernel does not
  write it, which is what ``written`` records);
- a numpy masked array is refused: a kernel would read the masked-out values as data;
- an integer scalar must fit its parameter's type (no silent truncation of 2**40 to int32);
- keyword arguments name input parameters (``bind_keywords``).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from ..engine.artifact import (
    CompiledArtifact,
    ParamInfo,
    dim_symbols,
    dim_value,
    is_symbol,
)
from ..errors import ArgumentError, LanguageError

# DLPack device type codes (dlpack.h DLDeviceType)
DEVICE_NAMES = {1: "cpu", 2: "cuda", 10: "rocm"}
#: DLPack device types torch allocates on, by torch's name (a ROCm build names its GPUs "cuda")
TORCH_DEVICES = {2: "cuda", 10: "cuda"}
_TORCH_DEVICE_TYPES = {"cpu": 1, "cuda": 2}


def _describe_shape(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _compact_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides in elements, each the product of the later extents (0 after an
    empty axis): what TVM's compact-layout check of a static shape compares against."""
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


def _compact_if_empty(array: Any) -> Any:
    """An array with no elements has no layout, but DLPack consumers check its strides:
    numpy (2.x) gives such arrays all-zero strides and torch gives ``(1, 1)`` for a
    ``(512, 0)`` tensor, where TVM's check wants ``(0, 1)`` (upstream's issue 1697, a GEMM
    with K = 0). Give them the compact strides instead; no element is ever read or written.
    ``torch.from_numpy`` keeps numpy's strides (and torch calls the tensor contiguous)."""
    if type(array).__module__.startswith("torch"):
        if array.numel() or not array.dim():
            return array
        import torch

        return torch.empty_strided(tuple(array.shape), _compact_strides(array.shape), dtype=array.dtype,
                                   device=array.device)
    if type(array).__module__ != "numpy" or array.size != 0 or array.ndim == 0:
        return array
    import numpy

    strides = tuple(s * array.itemsize for s in _compact_strides(array.shape))
    return numpy.lib.stride_tricks.as_strided(array, shape=array.shape, strides=strides)


def int_range(dtype: str) -> tuple[int, int] | None:
    """The values an integer parameter of ``dtype`` holds, or None for other dtypes."""
    for prefix, signed in (("uint", False), ("int", True)):
        bits = dtype.removeprefix(prefix)
        if dtype.startswith(prefix) and bits.isdigit():
            return (-(2 ** (int(bits) - 1)), 2 ** (int(bits) - 1) - 1) if signed else (0, 2 ** int(bits) - 1)
    return None


class MaskedArrayError(TypeError):
    """A numpy masked array was passed as a tensor."""


def _writable_alias(array: Any) -> Any:
    """A writable ndarray over ``array``'s memory (see the module doc: read-only inputs)."""
    import ctypes

    import numpy

    if array.size == 0:
        return _compact_if_empty(numpy.empty(array.shape, dtype=array.dtype))
    low = sum(min(0, s * (n - 1)) for s, n in zip(array.strides, array.shape))
    high = sum(max(0, s * (n - 1)) for s, n in zip(array.strides, array.shape)) + array.itemsize
    start = array.ctypes.data + low
    memory = (ctypes.c_char * (high - low)).from_address(start)
    return numpy.ndarray(array.shape, array.dtype, buffer=memory, offset=-low, strides=array.strides)


class TensorInfo:
    """dtype/shape/device/contiguity of a numpy array or torch tensor, read cheaply."""

    __slots__ = ("contiguous", "device_index", "device_type", "dtype", "is_torch", "obj", "shape",
                 "writable")

    def data_ptr(self) -> int:
        return int(self.obj.data_ptr()) if self.is_torch else int(self.obj.ctypes.data)

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        module = type(obj).__module__
        if module.startswith("torch"):
            self.is_torch = True
            self.dtype = str(obj.dtype).removeprefix("torch.")
            self.shape = tuple(obj.shape)
            device = obj.device
            self.device_type = _TORCH_DEVICE_TYPES.get(device.type, -1)
            self.device_index = device.index or 0
            self.contiguous = obj.is_contiguous()
            self.writable = True
        elif module == "numpy" or _is_ndarray(obj):
            self.is_torch = False
            self.dtype = str(obj.dtype)
            self.shape = obj.shape
            self.device_type, self.device_index = 1, 0
            self.contiguous = obj.flags.c_contiguous
            self.writable = obj.flags.writeable
        else:
            raise TypeError(type(obj).__name__)


def _is_ndarray(obj: Any) -> bool:
    """A numpy.ndarray subclass (memmap, ...) other than a masked array."""
    import sys

    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(obj, numpy.ndarray):
        return False
    if isinstance(obj, numpy.ma.MaskedArray):
        raise MaskedArrayError
    return True


_MISSING = object()


def bind_keywords(artifact: CompiledArtifact, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """The positional arguments of a call with keyword arguments: each keyword names an
    input parameter (one not in out_idx); every input is given once."""
    kernel, params = artifact.kernel_name, artifact.params
    names = [p.name for i, p in enumerate(params) if i not in artifact.out_idx]
    if len(args) > len(names):
        return tuple(args)  # the binder words the count error
    merged = list(args) + [_MISSING] * (len(names) - len(args))
    for key, value in kwargs.items():
        if key not in names:
            outputs = [params[i].name for i in artifact.out_idx]
            why = (f"{key!r} is an output (out_idx), which the kernel allocates and returns"
                   if key in outputs else f"it has no input parameter {key!r}")
            raise ArgumentError(f"kernel {kernel!r}: keyword argument {key!r} refused: {why}; "
                                f"its inputs are ({', '.join(names)})")
        position = names.index(key)
        if merged[position] is not _MISSING:
            raise ArgumentError(f"kernel {kernel!r}: argument {key!r} given twice (by position "
                                "and by keyword)")
        merged[position] = value
    missing = [n for n, v in zip(names, merged) if v is _MISSING]
    if missing:
        raise ArgumentError(f"kernel {kernel!r}: missing argument(s) {', '.join(missing)}; its "
                            f"inputs are ({', '.join(names)})")
    return tuple(merged)


class ArgumentBinder:
    """Binds a call's arguments to a compiled kernel's parameters."""

    def __init__(self, artifact: CompiledArtifact, device_type: int) -> None:
        self.kernel = artifact.kernel_name
        self.params = artifact.params
        self.out_idx = artifact.out_idx
        self.inputs = tuple(i for i in range(len(self.params)) if i not in self.out_idx)
        self.device_type = device_type
        self.alignment = artifact.min_alignment
        tensors = (i for i, p in enumerate(self.params) if p.is_tensor)
        self.written = frozenset(tensors if artifact.written is None else artifact.written)
        self.narrow = {name: (dtype, int_range(dtype)) for name, dtype in artifact.narrow_symbols}
        self.shape_checks = artifact.shape_checks
        from .fastbind import build_fast_binder

        self._fast = build_fast_binder(artifact, device_type)
        bound = set(artifact.input_symbols)
        self.scalar_dims = frozenset(artifact.scalar_dims)  # a call's value is a tensor dimension's symbol
        bound |= self.scalar_dims
        # symbols only a scalar binds: the call holds their value already, so they are not
        # handed on with the tensor-bound ones (a launcher passes those by name)
        self._scalar_only = self.scalar_dims - set(artifact.input_symbols)
        for i in self.out_idx:
            free = [s for d in self.params[i].shape or () for s in dim_symbols(d) if s not in bound]
            if free:
                raise LanguageError(
                    f"kernel {self.kernel!r}: output {self.params[i].name!r} (out_idx {i}) has "
                    f"symbolic dimension(s) {free} that no input tensor determines"
                )

    def _error(self, index: int, message: str) -> ArgumentError:
        p = self.params[index]
        return ArgumentError(f"kernel {self.kernel!r}, argument {p.name!r} (#{index}): {message}")

    def _check_tensor(self, index: int, value: Any, symbols: dict[str, int],
                      deferred: list[tuple[int, int, str, int, tuple[Any, ...]]]) -> TensorInfo:
        param = self.params[index]
        try:
            info = TensorInfo(value)
        except MaskedArrayError:
            raise self._error(index, "a numpy masked array is refused: the kernel would read its "
                              "masked-out values as data; pass x.filled(fill_value) or "
                              "numpy.asarray(x) to say which values it sees") from None
        except TypeError:
            raise self._error(index, f"expected a tensor (torch.Tensor or numpy.ndarray), got "
                              f"{type(value).__name__}") from None
        if param.packs is not None:
            if info.dtype not in PACKED_STORAGE[param.packs]:
                raise self._error(index, f"expected the bytes of a {param.packs} tensor (two elements per "
                                  f"byte: {' or '.join(PACKED_STORAGE[param.packs])}), got {info.dtype}")
        elif info.dtype != param.dtype:
            raise self._error(index, f"expected dtype {param.dtype}, got {info.dtype}; convert "
                              f"it first (e.g. x.to(torch.{param.dtype}) / x.astype('{param.dtype}'))")
        self._check_device(index, info)
        shape = param.shape or ()
        if len(info.shape) != len(shape):
            raise self._error(index, f"expected {len(shape)} dimensions {_describe_shape(shape)}, "
                              f"got shape {_describe_shape(info.shape)}")
        for axis, (want, got) in enumerate(zip(shape, info.shape)):
            if isinstance(want, str) and not is_symbol(want):
                deferred.append((index, axis, want, got, tuple(info.shape)))  # once every symbol is bound
            elif isinstance(want, int):
                if want != got:
                    raise self._error(index, f"expected shape {_describe_shape(shape)}, got "
                                      f"{_describe_shape(info.shape)}: dimension {axis} must be {want}")
            else:
                dtype, bounds = self.narrow.get(want, ("", None))
                if bounds is not None and not bounds[0] <= got <= bounds[1]:
                    raise self._error(index, f"dimension {axis} is {got}, more than its symbolic "
                                      f"dimension {want} ({dtype}) holds; declare it "
                                      f"T.symbolic({want!r}, 'int64') for tensors this large")
                seen = symbols.setdefault(want, got)
                if seen != got:
                    raise self._error(index, f"symbolic dimension {want} is {got} here but {seen} "
                                      "in an earlier argument")
        if param.strides is None and not info.contiguous:
            raise self._error(index, "expected a contiguous (row-major) tensor; call "
                              ".contiguous() / numpy.ascontiguousarray() first")
        if not info.writable and index in self.written:
            raise self._error(index, "it is a read-only array and the kernel writes it; pass a "
                              "writable one (x.copy(), or set x.flags.writeable = True if you own "
                              "its memory)")
        if self.alignment and info.data_ptr() % self.alignment:
            raise self._error(index, f"its data pointer is not aligned to {self.alignment} bytes, "
                              "which this kernel's vectorized accesses need (a view that starts "
                              "mid-allocation?); pass x.clone() or an aligned tensor")
        return info

    def bind(self, args: Sequence[Any]) -> tuple[list[Any], list[Any], dict[str, int]]:
        """Validate ``args`` (the inputs); return (all call arguments, outputs, the values of
        the symbolic dimensions). Torch tensors take the generated fast path."""
        if self._fast is not None and len(args) == len(self.inputs):
            bound = self._fast(*args)
            if bound is not None:
                return bound
        return self.bind_checked(args)

    def bind_checked(self, args: Sequence[Any]) -> tuple[list[Any], list[Any], dict[str, int]]:
        """The full checks, with the detailed errors (see fastbind for the fast path)."""
        if len(args) != len(self.inputs):
            names = ", ".join(self.params[i].name for i in self.inputs)
            raise ArgumentError(f"kernel {self.kernel!r} takes {len(self.inputs)} argument(s) "
                                f"({names}), got {len(args)}")
        call: list[Any] = [None] * len(self.params)
        symbols: dict[str, int] = {}
        like: TensorInfo | None = None
        deferred: list[tuple[int, int, str, int, tuple[Any, ...]]] = []
        for index, value in zip(self.inputs, args):
            param = self.params[index]
            if param.is_tensor and value is None:
                if not param.optional:
                    raise self._error(index, "got None, but the kernel reads or writes this tensor; pass a "
                                      "tensor (None may only stand for a tensor the kernel never uses)")
            elif param.is_tensor:
                info = self._check_tensor(index, value, symbols, deferred)
                like = like or info
                value = _compact_if_empty(value) if info.writable else _writable_alias(value)
                if param.packs is not None:
                    value = _as_bytes(value)
            else:
                value = self._check_scalar(index, param, value)
                if param.name in self.scalar_dims:
                    seen = symbols.setdefault(param.name, value)
                    if seen != value:
                        raise self._error(index, f"{value} differs from {param.name} = {seen}, the size "
                                          "an earlier tensor's shape gives it; pass the same value")
                    if value < 0:
                        raise self._error(index, f"{value} is the dimension {param.name} of a tensor, which "
                                          "cannot be negative")
            call[index] = value
        for index, axis, want, got, shape in deferred:
            expected = dim_value(want, symbols)
            if expected != got:
                given = ", ".join(f"{n} = {symbols[n]}" for n in dim_symbols(want))
                raise self._error(index, f"expected shape {_describe_shape(self.params[index].shape or ())}, "
                                  f"got {_describe_shape(shape)}: dimension {axis} must be {want} = {expected} "
                                  f"({given})")
        for index, axis, symbol, a, b, solved, written in self.shape_checks:
            value = symbols[symbol]
            if value < b or (value - b) % a:
                raise self._error(index, f"dimension {axis} is {value}, but the kernel declares it {written}, "
                                  f"which is {value} for no whole {solved} >= 0; pass a tensor whose dimension "
                                  f"{axis} is {a} * {solved} + {b} for some {solved}" if b else
                                  f"dimension {axis} is {value}, but the kernel declares it {written}, "
                                  f"which is {value} for no whole {solved} >= 0; pass a tensor whose dimension "
                                  f"{axis} is a multiple of {a}")
        outputs = []
        for index in self.out_idx:
            out = self._allocate(self.params[index], symbols, like)
            call[index] = out if self.params[index].packs is None else _as_bytes(out)
            outputs.append(out)
        if self._scalar_only:
            symbols = {name: value for name, value in symbols.items() if name not in self._scalar_only}
        return call, outputs, symbols

    def _check_scalar(self, index: int, param: ParamInfo, value: Any) -> Any:
        if param.dtype == "handle":
            return self._address(index, value)
        if param.dtype.startswith(("int", "uint")):
            if isinstance(value, bool) or not hasattr(value, "__index__"):
                raise self._error(index, f"expected an integer ({param.dtype}), got {value!r}")
            value = value.__index__()
            bounds = int_range(param.dtype)
            if bounds is not None and not bounds[0] <= value <= bounds[1]:
                raise self._error(index, f"{value!r} does not fit its type {param.dtype} "
                                  f"[{bounds[0]}, {bounds[1]}]; declare the parameter with a wider "
                                  "type (e.g. T.int64) or pass a smaller value")
            return value
        if param.dtype.startswith(("float", "bfloat")):
            if not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
                raise self._error(index, f"expected a number ({param.dtype}), got {value!r}")
            try:
                return float(value)
            except OverflowError:  # an int past 2**1024
                raise self._error(index, f"{value!r} is too large for any float; pass a float "
                                  "(float('inf') if that is what it means)") from None
            except (TypeError, ValueError) as e:  # __float__ of the value's own type failed
                raise self._error(index, f"expected a number ({param.dtype}), got {value!r} ({e})") from None
        if param.dtype == "bool":
            return bool(value)
        return value

    def _address(self, index: int, value: Any) -> int:
        """A pointer parameter's value (``a_ptr: T.ptr``): the data pointer of a tensor on the
        kernel's device, an address as an int (upstream passes ``x.data_ptr()``), or None."""
        if value is None:
            return 0
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            address = int(value)
            if not 0 <= address < 2**64:
                raise self._error(index, f"{address!r} is not an address (0 <= address < 2**64)")
            return address
        try:
            info = TensorInfo(value)
        except (TypeError, MaskedArrayError):
            raise self._error(index, "expected an address for this pointer parameter: a tensor, an int "
                              f"(x.data_ptr()) or None; got {type(value).__name__}") from None
        self._check_device(index, info)
        return info.data_ptr()

    def _check_device(self, index: int, info: TensorInfo) -> None:
        if info.device_type != self.device_type:
            want = DEVICE_NAMES.get(self.device_type, str(self.device_type))
            got = DEVICE_NAMES.get(info.device_type, "an unsupported device")
            move = f"; move it with .to('{want}')" if want in ("cpu", "cuda") else ""
            raise self._error(index, f"expected a tensor on {want}, got one on {got}{move}")

    def _allocate(self, param: ParamInfo, symbols: dict[str, int], like: TensorInfo | None) -> Any:
        shape = tuple(dim_value(d, symbols) for d in param.shape or ())
        if like is not None and like.is_torch:
            import torch

            device = like.obj.device
            return torch.empty(shape, dtype=output_torch_dtype(torch, param), device=device)
        if like is None and self.device_type in TORCH_DEVICES:
            # no tensor argument (scalars only): the current device, as upstream allocates
            device = _current_torch_device(TORCH_DEVICES[self.device_type])
            if device is not None:
                import torch

                return torch.empty(shape, dtype=output_torch_dtype(torch, param), device=device)
        if self.device_type != 1:
            raise ArgumentError(
                f"kernel {self.kernel!r}: cannot allocate output {param.name!r} on "
                f"{DEVICE_NAMES.get(self.device_type, self.device_type)} without a torch input "
                "tensor to take the device from; pass torch tensors"
            )
        import numpy

        return _compact_if_empty(numpy.empty(shape, dtype=param.dtype))


#: a sub-byte dtype -> the dtypes of the byte tensors that hold it (the first: outputs'
#: numpy dtype); torch allocates outputs as the last one it has (upstream's choice)
PACKED_STORAGE = {"float4_e2m1fn": ("uint8", "int8", "float4_e2m1fn_x2"), "int4": ("int8", "uint8"),
                  "uint4": ("uint8", "int8")}


def output_torch_dtype(torch: Any, param: ParamInfo) -> Any:
    """The torch dtype of an output tensor for ``param`` (a sub-byte one: its bytes')."""
    if param.packs is None:
        return getattr(torch, param.dtype, None)
    return next(getattr(torch, d) for d in reversed(PACKED_STORAGE[param.packs]) if hasattr(torch, d))


def _as_bytes(value: Any) -> Any:
    """A byte tensor's uint8 view (the parameter's storage dtype), same memory."""
    if type(value).__module__.startswith("torch"):
        import torch

        return value if value.dtype == torch.uint8 else value.view(torch.uint8)
    return value if str(value.dtype) == "uint8" else value.view("uint8")


def _current_torch_device(kind: str) -> Any:
    """torch's current device of ``kind``, or None without torch or such a device."""
    try:
        import torch
    except ImportError:
        return None
    module = getattr(torch, kind, None)
    if module is None or not module.is_available():
        return None
    return torch.device(kind, module.current_device())

"""Buffers over existing storage: ``T.view``/``T.reshape`` (the same data seen with another
shape or dtype), ``T.make_tensor`` (a tensor at a pointer), ``T.StridedTensor`` (a kernel
parameter with explicit strides) and ``T.access_ptr`` (the address of a buffer element, for
``T.call_extern`` helpers).

A view is a ``decl_buffer`` on the source's data pointer: no copy, and every backend lowers
its accesses like any other buffer's (the flattened offset, reinterpreted in the view's
dtype).
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx
from tvm.ir import TensorLoad, TensorRegion
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as _ib
from tvm.script.parser.tirx import Buffer as _BufferProxy
from tvm.sym.analyzer import Analyzer

from ..errors import LanguageAssertionError, LanguageError
from .dtypes import as_dtype_str


def _bits(shape: Any, dtype: str) -> Any:
    info = tvm.DataType(dtype)
    total = info.bits * info.lanes
    for dim in shape:
        total = total * dim
    return total


def view(src: Any, shape: Any = None, dtype: Any = None) -> Any:
    """The data of ``src`` seen with another ``shape`` and/or ``dtype`` (the same number of
    bits in all); writes through either buffer are seen by the other."""
    if not isinstance(src, tirx.Buffer):
        raise LanguageError(f"T.view / T.reshape: expected a buffer, got {type(src).__name__}")
    shape = list(src.shape) if shape is None else ([shape] if not isinstance(shape, (list, tuple)) else list(shape))
    dtype = str(src.dtype) if dtype is None else str(dtype)
    new_bits, old_bits = _bits(shape, dtype), _bits(src.shape, str(src.dtype))
    if not Analyzer().can_prove_equal(new_bits, old_bits):
        raise LanguageAssertionError(f"T.view / T.reshape of {src.name!r}: {shape} x {dtype} is {new_bits} bits but "
                            f"{list(src.shape)} x {src.dtype} is {old_bits}; a view keeps the size of its source")
    if len(src.strides):
        raise LanguageError(f"T.view / T.reshape of {src.name!r}: the source has explicit strides; only "
                            "compact buffers can be viewed")
    if not IRBuilder.is_in_scope():
        # outside a kernel body (upstream's tests view a bare tirx.decl_buffer): a buffer of
        # the view's shape and dtype in the source's scope. TVM 0.27 records which storage a
        # buffer uses only in the DeclBuffer statement a kernel body emits (the branch
        # below), so such a buffer is a description, like T.Tensor(shape, dtype, data) there.
        return tirx.decl_buffer(shape, dtype, name=src.name, data=src.data, scope=src.scope())
    return _ib.decl_buffer(shape, dtype, data=src.data, scope=src.scope())


def reshape(src: Any, shape: Any) -> Any:
    """``src`` with another shape of the same number of elements (no copy)."""
    return view(src, shape)


def make_tensor(ptr: Any, shape: Any, dtype: Any = "float32", strides: Any = None) -> Any:
    """A global tensor of ``shape`` x ``dtype`` at the address ``ptr`` (a ``T.handle``
    parameter, or an element of a pointer table such as ``A_ptrs[i]`` holding addresses)."""
    dtype = str(dtype)
    shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    if not IRBuilder.is_in_scope():
        raise LanguageError("T.make_tensor outside a kernel: write it in a T.prim_func's body, or in an "
                            "eager @tilelang.jit function as `A = T.make_tensor(A, shape, dtype)` for a "
                            "parameter annotated `A: T.ptr` (a call then passes the tensor)")
    ty = getattr(ptr, "ty", None)
    if ty is None:
        raise LanguageError(f"T.make_tensor: expected a pointer expression, got {type(ptr).__name__}")
    if isinstance(ptr, TensorLoad) or str(getattr(ty, "dtype", "")) in ("int64", "uint64"):
        # an address stored as a 64-bit integer (upstream's T.ptr tables): reinterpret it
        ptr = tirx.reinterpret("handle", tirx.Cast("uint64", ptr)) if str(ty.dtype) != "handle" else ptr
    data = _ib.Bind(ptr) if not isinstance(ptr, tirx.Var) else ptr
    return _ib.decl_buffer(shape, dtype, data=data, strides=strides, scope="global")


class TensorProxy(type(_BufferProxy)):
    """``T.Tensor``: TVMScript's buffer annotation (``A: T.Tensor((M, K), "float16")``), and
    inside a kernel body, with a data pointer, a tensor over that storage:
    ``kernel_flat = T.Tensor((KH * KW * C, F), dtype, kernel.data)`` (upstream's convolution
    sees a 4-D weight as a 2-D matrix so). TVMScript's own proxy would return a bare buffer
    that no statement declares, which TVM rejects as ill-formed TIR; here such a buffer is
    declared where it is written, like ``T.view``."""

    def __call__(self, shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                 elem_offset: Any = None, scope: str = "global", **kwargs: Any) -> Any:
        dtype = as_dtype_str(dtype)  # T.float16, "float16", torch.float16, numpy.float16
        if data is None or not IRBuilder.is_in_scope():
            return super().__call__(shape, dtype, data=data, strides=strides, elem_offset=elem_offset,
                                    scope=scope, **kwargs)
        shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
        return _ib.decl_buffer(shape, dtype, data=data, strides=strides, elem_offset=elem_offset,
                               scope=scope, **kwargs)

    def __getitem__(self, keys: Any) -> Any:
        """``T.Tensor[(M, N), dtype]`` (upstream's subscript spelling; TVMScript deprecates
        it for T.Buffer, so it is answered here as the call)."""
        keys = keys if isinstance(keys, tuple) else (keys,)
        if len(keys) in (1, 2):  # a shape (a tuple, or one extent: T.Tensor[n, dtype]) and a dtype
            shape = keys[0] if isinstance(keys[0], (tuple, list)) else (keys[0],)
            return self(shape, *keys[1:])
        raise LanguageError(f"T.Tensor[...] takes a shape and a dtype, as T.Tensor[(M, N), T.float16]; got {keys!r}")


Tensor = TensorProxy()


def SharedBuffer(shape: Any, dtype: Any = "float32") -> Any:
    """Upstream's annotation of a shared tile parameter of a ``T.macro``
    (``K_shared: T.SharedBuffer([stages, bN, d], dtype)``): a buffer type in shared memory."""
    return Tensor(shape, dtype, scope="shared.dyn")


def FragmentBuffer(shape: Any, dtype: Any = "float32") -> Any:
    """Upstream's annotation of a fragment parameter of a ``T.macro`` (T.alloc_fragment's kind)."""
    return Tensor(shape, dtype, scope="local.fragment")


def LocalBuffer(shape: Any, dtype: Any = "float32") -> Any:
    """Upstream's annotation of a per-thread buffer parameter of a ``T.macro`` (T.alloc_local's kind)."""
    return Tensor(shape, dtype, scope="local")


def _strided_tensor(shape: Any, strides: Any, dtype: Any = "float32", scope: str | None = None) -> Any:
    """``A: T.StridedTensor((M, N), (s0, s1), "float32")``: a kernel parameter whose strides
    (in elements) are given, e.g. a column slice of a larger tensor; ``T.symbolic`` strides
    take each call's actual strides."""
    shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    strides = list(strides) if isinstance(strides, (list, tuple)) else [strides]
    if len(shape) != len(strides):
        raise LanguageError(f"T.StridedTensor: shape {shape} and strides {strides} differ in length")
    kwargs = {"scope": scope} if scope is not None else {}
    return _BufferProxy(shape, as_dtype_str(dtype), strides=strides, **kwargs)


class _StridedTensorProxy:
    """``T.StridedTensor(shape, strides, dtype)``, also written ``T.StridedTensor[shape, strides, dtype]``."""

    def __call__(self, shape: Any, strides: Any, dtype: Any = "float32", scope: str | None = None) -> Any:
        return _strided_tensor(shape, strides, dtype, scope)

    def __getitem__(self, keys: Any) -> Any:
        keys = keys if isinstance(keys, tuple) else (keys,)
        if len(keys) not in (2, 3):
            raise LanguageError("T.StridedTensor[...] takes a shape, strides and a dtype, as "
                                f"T.StridedTensor[(M, N), (s, 1), T.float16]; got {keys!r}")
        return _strided_tensor(*keys)


StridedTensor = _StridedTensorProxy()


_ACCESS_MASKS = {"r": 1, "w": 2, "rw": 3}


def _flat_offset(buffer: Any, indices: list[Any]) -> Any:
    offset = tirx.const(0, "int32")
    if len(buffer.strides):
        for index, stride in zip(indices, buffer.strides):
            offset = offset + index * stride
        return offset
    for index, dim in zip(indices, buffer.shape):
        offset = offset * dim + index
    return offset


def access_ptr(base: Any, access_type: Any = "r", *extents: Any, offset: Any = 0, extent: Any = None,
               ignore_last_ndim: int = 0) -> Any:
    """``T.access_ptr(B[i, j], "r", n)``: the address of an element (or of a buffer's start,
    or a region's corner) as TVM's ``tvm_access_ptr``, for passing to ``T.call_extern``.
    ``extents``/``extent`` say how many elements the callee touches (default: one element for
    an element, the rest of the buffer for a buffer)."""
    if isinstance(access_type, str):
        if access_type not in _ACCESS_MASKS:
            raise LanguageError(f"T.access_ptr: access_type {access_type!r} is not one of {sorted(_ACCESS_MASKS)}")
        mask = _ACCESS_MASKS[access_type]
    elif isinstance(access_type, int) and 1 <= access_type <= 3:
        mask = access_type
    else:
        raise LanguageError(f"T.access_ptr: access_type must be 'r', 'w', 'rw' or 1..3, got {access_type!r}")
    if isinstance(base, TensorLoad):
        buffer, mins, default_extent = base.source, list(base.indices), 1
    elif isinstance(base, TensorRegion):
        buffer, mins = base.source, [r.min for r in base.region]
        default_extent = 1
        for r in base.region:
            default_extent = default_extent * r.extent
    elif isinstance(base, tirx.Buffer):
        buffer, mins = base, [tirx.const(0, "int32") for _ in base.shape]
        default_extent = 1
        for dim in base.shape:
            default_extent = default_extent * dim
    else:
        raise LanguageError(f"T.access_ptr: expected a buffer, an element B[i, j] or a region, got {type(base).__name__}")
    if ignore_last_ndim:
        keep = max(0, len(mins) - int(ignore_last_ndim))
        mins = mins[:keep] + [tirx.const(0, "int32")] * (len(mins) - keep)
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    if extent is None and extents:
        extent = 1
        for e in extents:
            extent = extent * e
    start = _flat_offset(buffer, mins) + offset
    return buffer.access_ptr(mask, offset=start, extent=default_extent if extent is None else extent)

"""A tvm_ffi kernel library loaded and called through libtvm_ffi's C ABI, without the
``tvm_ffi`` package.

In a torch program, ``import tvm_ffi`` was most of a tvm_ffi disk hit: 20 ms here, 40 ms on
the lent H200 host, against 6 ms for the rest (architecture notes 43 and 66). Its Cython
core, ml_dtypes and its dataclasses are all imported, and a cached kernel needs none of
them. The kernel's host function is a ``TVMFFISafeCallType`` behind libtvm_ffi's stable C
ABI (``tvm/ffi/c_api.h``), which ctypes reaches. So a hit in a process that has not
imported tvm_ffi does this:

- it loads libtvm_ffi itself, from the file the package loads, so a later
  ``import tvm_ffi`` shares it;
- it loads the kernel library through the global ``ffi.ModuleLoadFromFile`` and keeps it
  alive, as ``tvm_ffi.load_module`` does;
- it calls the kernel with the arguments the fast binder has checked: torch tensors as
  DLTensor pointers (compact: the binder checked that), and ints, floats and bools as
  themselves. A device call runs on torch's current stream, set and restored around the
  call, as tvm_ffi does.

Any other call (arguments only the full binder accepts, numpy arrays, an explicit
``stream=``) imports tvm_ffi once and loads the library through it, and from then on the
launcher calls through tvm_ffi. A library, platform or tvm_ffi version this module does
not know gives None here, and the hit takes tvm_ffi's way.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# type indices of tvm/ffi/c_api.h (TVMFFITypeIndex)
NONE, INT, BOOL, FLOAT, DLTENSOR_PTR, RAW_STR = 0, 1, 2, 3, 7, 8
OBJECT_BEGIN = 64  # kTVMFFIStaticObjectBegin: from here on, a value holds a reference
CUDA = 2  # DLPack kDLCUDA
#: the C ABI versions this module was written against (TVMFFIGetVersion's major.minor)
KNOWN_ABI = {(0, 1)}
_OBJECT_HEADER = 24  # sizeof(TVMFFIObject): ref counts, type index, padding, deleter
#: a direct call costs about 2.5 us more than tvm_ffi's on the H200 (ctypes sets what tvm_ffi's
#: Cython sets in C), and importing tvm_ffi costs about 40 ms there: after this many calls the
#: launcher imports it and goes on through it, so a long-running process pays at most about
#: twice what the better choice in hindsight would have cost (the ski-rental bound)
SWITCH_AFTER_CALLS = 16384


class _ByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class _Value(ctypes.Union):
    _fields_ = [("v_int64", ctypes.c_int64), ("v_float64", ctypes.c_double), ("v_ptr", ctypes.c_void_p)]


class _Any(ctypes.Structure):
    _anonymous_ = ("value",)
    _fields_ = [("type_index", ctypes.c_int32), ("zero_padding", ctypes.c_uint32), ("value", _Value)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _ErrorCell(ctypes.Structure):
    _fields_ = [("kind", _ByteArray), ("message", _ByteArray)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("patch", ctypes.c_uint32)]


def _signatures(lib: ctypes.CDLL) -> None:
    p, i32 = ctypes.c_void_p, ctypes.c_int32
    for name, args, result in (
        ("TVMFFIGetVersion", [p], None),
        ("TVMFFIFunctionGetGlobal", [p, p], ctypes.c_int),
        ("TVMFFIFunctionCall", [p, p, i32, p], ctypes.c_int),
        ("TVMFFIErrorMoveFromRaised", [p], None),
        ("TVMFFIObjectDecRef", [p], ctypes.c_int),
        ("TVMFFIDataTypeFromString", [p, p], ctypes.c_int),
        ("TVMFFIEnvSetStream", [i32, i32, p, p], ctypes.c_int),
    ):
        function = getattr(lib, name)
        function.argtypes, function.restype = args, result


@functools.cache
def ffi_library() -> ctypes.CDLL | None:
    """libtvm_ffi from the ``tvm_ffi`` package's ``lib`` folder (the wheel's layout, the file
    the package's own import loads, RTLD_GLOBAL as it does), found without importing the
    package; None where it is elsewhere or of a C ABI version not known here."""
    if "tvm_ffi" in sys.modules:
        from tvm_ffi import libinfo

        path = Path(libinfo.find_libtvm_ffi())
    else:
        if not sys.platform.startswith("linux"):
            return None
        spec = importlib.util.find_spec("tvm_ffi")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / "lib" / "libtvm_ffi.so"
        if not path.is_file():
            return None
    try:
        lib = ctypes.CDLL(str(path), ctypes.RTLD_GLOBAL)
        _signatures(lib)
    except (OSError, AttributeError):
        return None
    version = _Version()
    lib.TVMFFIGetVersion(ctypes.byref(version))
    return lib if (version.major, version.minor) in KNOWN_ABI else None


#: the kinds tvm_ffi's own import registers (tvm_ffi/error.py); any other is a RuntimeError
_BUILTIN_KINDS: dict[str, type[Exception]] = {
    cls.__name__: cls for cls in (RuntimeError, ValueError, TypeError, AttributeError, KeyError, IndexError,
                                  AssertionError, MemoryError)}


def _holding_the_gil(lib: ctypes.CDLL, name: str) -> Callable[..., int]:
    """``name`` called without releasing the GIL (ctypes.CDLL releases it around every
    call): for the C API's constant-time setters, as tvm_ffi's Cython calls them. The
    kernel's own call releases it, as tvm_ffi's does."""
    function = getattr(lib, name)
    prototype = ctypes.PYFUNCTYPE(function.restype, *function.argtypes)
    return prototype(ctypes.cast(function, ctypes.c_void_p).value)


def take_error(lib: ctypes.CDLL) -> Exception:
    """The error a failed call raised, as the Python exception tvm_ffi makes of its kind
    (``ValueError``, ``TypeError``, ...; RuntimeError for a kind it does not know)."""
    handle = ctypes.c_void_p()
    lib.TVMFFIErrorMoveFromRaised(ctypes.byref(handle))
    if not handle.value:
        return RuntimeError("a tvm_ffi call failed without raising an error")
    cell = _ErrorCell.from_address(handle.value + _OBJECT_HEADER)
    kind = ctypes.string_at(cell.kind.data, cell.kind.size).decode(errors="replace")
    message = ctypes.string_at(cell.message.data, cell.message.size).decode(errors="replace")
    lib.TVMFFIObjectDecRef(handle)
    core = sys.modules.get("tvm_ffi.core")  # its registry holds the kinds others (tvm) registered
    cls = core.ERROR_NAME_TO_TYPE.get(kind) if core is not None else None
    return (cls or _BUILTIN_KINDS.get(kind, RuntimeError))(message)


def global_function(lib: ctypes.CDLL, name: str) -> int | None:
    """A global function's handle (a reference the caller owns), None where none has the name."""
    raw = name.encode()
    key, out = _ByteArray(ctypes.cast(ctypes.c_char_p(raw), ctypes.c_void_p), len(raw)), ctypes.c_void_p()
    if lib.TVMFFIFunctionGetGlobal(ctypes.byref(key), ctypes.byref(out)) != 0:
        raise take_error(lib)
    return out.value


def has_global(lib: ctypes.CDLL, name: str) -> bool:
    handle = global_function(lib, name)
    if handle is None:
        return False
    lib.TVMFFIObjectDecRef(handle)
    return True


def _call_global(lib: ctypes.CDLL, name: str, *values: tuple[int, Any]) -> _Any:
    """``name(*values)`` (type index, value) through its global function; the result holds a
    reference the caller owns."""
    function = global_function(lib, name)
    if function is None:
        raise RuntimeError(f"libtvm_ffi has no global function {name!r}")
    args, keep = (_Any * max(len(values), 1))(), []
    for slot, (index, value) in zip(args, values):
        slot.type_index = index
        if index == RAW_STR:
            keep.append(ctypes.c_char_p(value.encode()))
            slot.v_ptr = ctypes.cast(keep[-1], ctypes.c_void_p)
        elif index in (INT, BOOL):
            slot.v_int64 = int(value)
        else:
            slot.v_ptr = value
    result = _Any()
    try:
        if lib.TVMFFIFunctionCall(function, args, len(values), ctypes.byref(result)) != 0:
            raise take_error(lib)
    finally:
        lib.TVMFFIObjectDecRef(function)
    return result


def load_function(lib: ctypes.CDLL, path: str, name: str) -> int:
    """The library at ``path`` loaded (and kept alive for the process, as
    ``tvm_ffi.load_module`` does) and its function ``name``: a reference the caller owns."""
    module = _call_global(lib, "ffi.ModuleLoadFromFile", (RAW_STR, path))
    try:
        _call_global(lib, "ffi.ModuleGlobalsAdd", (module.type_index, module.v_ptr))
        function = _call_global(lib, "ffi.ModuleGetFunction", (module.type_index, module.v_ptr),
                                (RAW_STR, name), (BOOL, False))
    finally:
        lib.TVMFFIObjectDecRef(module.v_ptr)
    if function.type_index < OBJECT_BEGIN:
        raise RuntimeError(f"{path}: the library has no function {name!r}")
    return function.v_ptr


def _data_type(lib: ctypes.CDLL, dtype: str) -> _DataType:
    raw = str(dtype).encode()
    text, out = _ByteArray(ctypes.cast(ctypes.c_char_p(raw), ctypes.c_void_p), len(raw)), _DataType()
    if lib.TVMFFIDataTypeFromString(ctypes.byref(text), ctypes.byref(out)) != 0:
        raise take_error(lib)
    return out


class DirectFunction:
    """A kernel library's function called through the C ABI with arguments the fast binder
    checked (``launch``), or through tvm_ffi for any other call (``__call__``)."""

    def __init__(self, lib: ctypes.CDLL, path: str, name: str, params: Sequence[Any], device_type: int,
                 tvm_ffi_function: Callable[[], Callable[..., Any]]) -> None:
        self.lib, self.name = lib, name
        self.handle = load_function(lib, path, name)
        self._tvm_ffi_function = tvm_ffi_function
        self._through_tvm_ffi: Callable[..., Any] | None = None
        self.device_type = device_type
        self.arity = len(params)
        # per tensor: (argument index, DLDataType, ndim, static shape or None per axis)
        self._tensors = [(i, _data_type(lib, p.dtype), len(p.shape or ()),
                          [d if type(d) is int else None for d in p.shape or ()])
                         for i, p in enumerate(params) if p.is_tensor]
        self._scalars = [(i, FLOAT if str(p.dtype).startswith(("float", "bfloat")) else
                          BOOL if str(p.dtype) == "bool" else INT) for i, p in enumerate(params) if not p.is_tensor]
        #: what the SWITCH_AFTER_CALLS-th call runs first (the launcher moves to tvm_ffi's call)
        self.on_many_calls: Callable[[], None] = lambda: None
        self._frames: list[tuple[Any, ...]] = []  # argument buffers, one per call in flight
        self.launch = self._emit_launch()

    def _frame(self) -> tuple[Any, ...]:
        """Argument buffers for one call: (the arguments' address, the result, its address,
        the replaced stream, its address, then per tensor its DLTensor and shape array, then per scalar its argument slot)."""
        args, result = (_Any * max(self.arity, 1))(), _Any()
        previous = ctypes.c_void_p()  # the stream a device call replaces, set back after it
        frame: list[Any] = [ctypes.addressof(args), result, ctypes.addressof(result), previous,
                            ctypes.addressof(previous)]
        for i, dtype, ndim, static in self._tensors:
            shape = (ctypes.c_int64 * max(ndim, 1))(*(d or 0 for d in static))
            dl = _DLTensor(None, self.device_type, 0, ndim, dtype.code, dtype.bits, dtype.lanes,
                           ctypes.addressof(shape), None, 0)
            args[i].type_index, args[i].v_ptr = DLTENSOR_PTR, ctypes.addressof(dl)
            frame += [dl, shape]
        frame += [args[i] for i, _ in self._scalars]
        frame.append(args)  # keeps the buffers alive with the frame
        return tuple(frame)

    def _emit_launch(self) -> Callable[..., None]:
        """``launch(*call)`` for the fast binder's arguments (torch tensors of the declared
        dtypes, compact, on the kernel's device; scalars of the declared kinds), as one
        straight-line function: the call's share of a kernel's launch in Python is what a
        loop over the signature would double. Only indices enter the source."""
        lines = ["def launch(" + ", ".join(f"c{i}" for i in range(self.arity)) + "):",
                 "    global _calls",
                 "    _calls += 1",
                 "    if _calls == _switch_at:",
                 "        _switch()",
                 "    f = _pop() if _frames else _new()",
                 "    try:"]
        names = ["args_at", "res", "res_at", "prev", "prev_at"]
        body, device = [], "-1"
        for i, _, _, static in self._tensors:
            names += [f"t{i}", f"s{i}"]
            body.append(f"t{i}.data = c{i}.data_ptr()")
            dynamic = [axis for axis, d in enumerate(static) if d is None]
            if dynamic:
                body.append(f"z = c{i}.shape")
                body += [f"s{i}[{axis}] = z[{axis}]" for axis in dynamic]
            if self.device_type == CUDA:
                if device == "-1":  # the first device tensor's device: where tvm_ffi sets the stream
                    body.append(f"t{i}.device_id = dev = c{i}.get_device()")
                    device = "dev"
                else:
                    body.append(f"t{i}.device_id = c{i}.get_device()")
        for i, kind in self._scalars:
            names.append(f"a{i}")
            if kind == FLOAT:  # an int for a float parameter goes as an int, as tvm_ffi passes it
                body += [f"if type(c{i}) is float: a{i}.type_index, a{i}.v_float64 = {FLOAT}, c{i}",
                         f"else: a{i}.type_index, a{i}.v_int64 = {INT}, int(c{i})"]
            else:
                body.append(f"a{i}.type_index, a{i}.v_int64 = {BOOL if kind == BOOL else INT}, int(c{i})")
        names.append("_")
        lines.append("        " + ", ".join(names) + " = f")
        lines += ["        " + line for line in body]
        lines.append(f"        res.type_index = {NONE}")
        if device == "-1":
            lines.append(f"        failed = _call(_handle, args_at, {self.arity}, res_at)")
        else:  # on torch's current stream, as tvm_ffi calls with torch tensors
            lines += ["        stream = _stream(dev)",
                      f"        if _set_stream({CUDA}, dev, stream, prev_at):",
                      "            raise _error(_lib)",
                      "        try:",
                      f"            failed = _call(_handle, args_at, {self.arity}, res_at)",
                      "        finally:",
                      "            if prev.value != stream:",
                      f"                _set_stream({CUDA}, dev, prev.value, None)"]
        lines += [f"        if res.type_index >= {OBJECT_BEGIN}:",
                  "            _decref(res.v_ptr)",
                  "    finally:",
                  "        _append(f)",
                  "    if failed:",
                  "        raise _error(_lib)"]
        namespace = {"_frames": self._frames, "_pop": self._frames.pop, "_append": self._frames.append,
                     "_new": self._frame, "_call": self.lib.TVMFFIFunctionCall, "_handle": self.handle,
                     "_set_stream": _holding_the_gil(self.lib, "TVMFFIEnvSetStream"),
                     "_decref": self.lib.TVMFFIObjectDecRef,
                     "_error": take_error, "_lib": self.lib, "_calls": 0, "_switch_at": SWITCH_AFTER_CALLS,
                     "_switch": lambda: self.on_many_calls()}

        def first_stream(device_id: int) -> int:  # torch is imported by the time a call has tensors
            namespace["_stream"] = sys.modules["torch"]._C._cuda_getCurrentRawStream  # what tvm_ffi reads
            return namespace["_stream"](device_id)

        namespace["_stream"] = first_stream
        source = "\n".join(lines) + "\n"
        exec(compile(source, f"<tilelang direct tvm_ffi call of {self.name}>", "exec"), namespace)  # noqa: S102 - our own emitted code
        launch = namespace["launch"]
        launch.source = source
        return launch

    def tvm_ffi_function(self) -> Callable[..., Any]:
        """The kernel through tvm_ffi (imported, and the library loaded through it, once)."""
        if self._through_tvm_ffi is None:
            self._through_tvm_ffi = self._tvm_ffi_function()
        return self._through_tvm_ffi

    def __call__(self, *call: Any) -> Any:
        """Any call the fast binder did not check: through tvm_ffi, imported at the first."""
        return self.tvm_ffi_function()(*call)

    def __del__(self) -> None:
        handle, self.handle = getattr(self, "handle", None), None
        if handle and sys is not None and not sys.is_finalizing():
            self.lib.TVMFFIObjectDecRef(handle)


__all__ = ["DirectFunction", "ffi_library", "global_function", "has_global", "load_function", "take_error"]

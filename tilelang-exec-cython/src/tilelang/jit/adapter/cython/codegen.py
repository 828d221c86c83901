"""The per-kernel C of a launcher: ``tl_kernel.h``, emitted from the artifact's signature
and launch metadata.

It defines ``tl_call(state, args, has_stream, stream)``, one straight-line C function per
kernel: view each tensor (tl_runtime.h), compare dtype code/bits, device type, rank,
constant extents, symbolic extents (bound by their first occurrence, compared after),
contiguity or declared strides and alignment; convert scalars; allocate the ``out_idx``
outputs; then call the compute function (CPU) or launch every device kernel with
``cuLaunchKernel`` (CUDA), whose grid, block, shared memory and operands are the
metadata's expressions printed as C (c_expr.py). Any failed check jumps to ``miss``; the
Python side then words the error (backend.py), so messages stay those of the shared binder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilelang.errors import CompileError
from tilelang.plugin import CompiledArtifact, KernelLaunch, ParamInfo, dim_symbols

from .c_expr import CExpr, c_expression

#: TVM dtype -> DLPack (type code, bits) (dlpack.h DLDataTypeCode)
DLPACK_DTYPES: dict[str, tuple[int, int]] = {
    "bool": (6, 8),
    **{f"int{b}": (0, b) for b in (8, 16, 32, 64)},
    **{f"uint{b}": (1, b) for b in (8, 16, 32, 64)},
    **{f"float{b}": (2, b) for b in (16, 32, 64)},
    "bfloat16": (4, 16),
    "float8_e4m3fn": (10, 8),
    "float8_e5m2": (12, 8),
    "float8_e8m0fnu": (14, 8),
}

#: kernel operand type -> (C type, conversion of a value) as a compute function or a CUDA
#: kernel declares it; 16-bit floats travel as their bits on CUDA (half/bfloat16 params)
_OPERANDS: dict[str, tuple[str, str]] = {
    "handle": ("void*", "(void*)(uintptr_t)({})"),  # a `T.ptr` parameter's address (int64_t here)
    "bool": ("bool", "(bool)({})"),
    **{f"int{b}": (f"int{b}_t", f"(int{b}_t)({{}})") for b in (8, 16, 32, 64)},
    **{f"uint{b}": (f"uint{b}_t", f"(uint{b}_t)({{}})") for b in (8, 16, 32, 64)},
    "float32": ("float", "(float)({})"),
    "float64": ("double", "(double)({})"),
    "float16": ("uint16_t", "tl_float16_bits({})"),
    "bfloat16": ("uint16_t", "tl_bfloat16_bits({})"),
}
#: C's own half type for scalar float16 operands of a C compute function (TVM declares `half`)
_HOST_FLOAT16 = ("half", "(half)({})")


def _int_range(dtype: str) -> tuple[str, str]:
    bits = int(dtype.removeprefix("u").removeprefix("int"))
    if dtype.startswith("u"):
        return "INT64_C(0)", f"UINT64_C({2**bits - 1})"
    low = "INT64_MIN" if bits == 64 else f"(-INT64_C({2 ** (bits - 1)}))"
    return low, f"UINT64_C({2 ** (bits - 1) - 1})"


def _int_max(dtype: str) -> int:
    """The largest value of an integer type ("int32" -> 2**31 - 1)."""
    bits = dtype.removeprefix("u").removeprefix("int")
    if not bits.isdigit():
        raise CompileError(f"symbolic dimension type {dtype!r} is not an integer type")
    return 2 ** (int(bits) - (not dtype.startswith("u"))) - 1


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _symbol(launch: KernelLaunch, where: str) -> str:
    """A launch's kernel symbol, which the generated C names verbatim."""
    if not _IDENTIFIER.match(launch.symbol):
        raise CompileError(f"{where}: kernel symbol {launch.symbol!r} is not a C identifier; the "
                           "launch metadata is corrupt")
    return launch.symbol


def _text(name: str) -> str:
    """A name as it may appear in generated comments and string literals."""
    return re.sub(r"[^A-Za-z0-9_.]", "?", name)


class _Lines:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, text: str = "") -> None:
        self.lines.append("  " * self.depth + text if text else "")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass(frozen=True)
class KernelSource:
    """What the emitter needs besides the artifact."""

    device_type: int        # DLPack device type of the kernel's tensors
    host_call: bool         # True: launches are calls of C functions in tl_kernel_host.c


class _Emitter:
    def __init__(self, artifact: CompiledArtifact, source: KernelSource) -> None:
        self.a = artifact
        self.source = source
        self.inputs = [i for i in range(len(artifact.params)) if i not in artifact.out_idx]
        self.names: dict[str, CExpr] = {}  # expression name -> C local
        self.symbols: dict[str, str] = {}  # symbolic dimension -> C local
        self.out = _Lines()
        self.where = f"kernel {artifact.kernel_name!r}"
        self.narrow = {name: _int_max(dtype) for name, dtype in artifact.narrow_symbols}
        self.deferred: list[tuple[str, str, int]] = []  # (extent, expression dimension, parameter)

    # -- checks ---------------------------------------------------------------------
    def tensor(self, index: int, param: ParamInfo, arg: str) -> None:
        if param.optional:  # a tensor the kernel never uses: None stands for it (a null pointer)
            e = self.out
            e(f"if ({arg} == Py_None) {{")
            e(f"  v[{index}].dl.data = NULL;")
            e(f"  v[{index}].dl.byte_offset = 0;")
            e("} else {")
            e.depth += 1
            self._tensor(index, param, arg)
            e.depth -= 1
            e("}")
            return
        self._tensor(index, param, arg)

    def _tensor(self, index: int, param: ParamInfo, arg: str) -> None:
        e, v = self.out, f"v[{index}]"
        if param.dtype not in DLPACK_DTYPES:
            raise CompileError(f"{self.where}: parameter {param.name!r} has dtype {param.dtype}, "
                               f"which the cython launcher cannot check; supported: {', '.join(DLPACK_DTYPES)}")
        code, bits = DLPACK_DTYPES[param.dtype]
        shape = param.shape or ()
        e(f"/* {_text(param.name)} (#{index}): {param.dtype} {_text(str(shape))} */")
        writable = int(self.a.written is None or index in self.a.written)
        e(f"if (tl_view_of(st, {arg}, &{v}, {writable})) TL_MISS(TL_MISS_NOT_TENSOR, {index});")
        if param.packs is not None:  # a sub-byte tensor: its bytes, of any 8-bit dtype (the binder's list)
            e(f"if ({v}.dl.dtype.bits * {v}.dl.dtype.lanes != 8) TL_MISS(TL_MISS_DTYPE, {index});")
        else:
            e(f"if (!tl_dtype_is(&{v}, {code}, {bits})) TL_MISS(TL_MISS_DTYPE, {index});")
        e(f"if ({v}.dl.device.device_type != TL_DEVICE_TYPE) TL_MISS(TL_MISS_DEVICE, {index});")
        e(f"if ({v}.dl.ndim != {len(shape)}) TL_MISS(TL_MISS_NDIM, {index});")
        for axis, dim in enumerate(shape):
            extent = f"{v}.dl.shape[{axis}]"
            if isinstance(dim, int):
                e(f"if ({extent} != {dim}) TL_MISS(TL_MISS_SHAPE, {index});")
            elif not dim.isidentifier():  # an expression: checked once every symbol is bound
                self.deferred.append((extent, dim, index))
            elif dim in self.symbols:
                e(f"if ({extent} != {self.symbols[dim]}) TL_MISS(TL_MISS_SYMBOL, {index});")
            else:
                local = self.symbols[dim] = f"s{len(self.symbols)}"
                self.names.setdefault(dim, CExpr(local, False))
                e(f"{local} = {extent};")
                if dim in self.narrow:  # the compute function would truncate it
                    e(f"if ({local} > {self.narrow[dim]}) TL_MISS(TL_MISS_SHAPE, {index});")
        if param.strides is None:
            e(f"if (!tl_contiguous(&{v})) TL_MISS(TL_MISS_STRIDES, {index});")
        else:
            for axis, stride in enumerate(param.strides):
                value = stride if isinstance(stride, int) else self.symbols.get(stride)
                if value is not None:  # an unbound symbolic stride is not checked (as the binder)
                    e(f"if (!tl_stride_is(&{v}, {axis}, {value})) TL_MISS(TL_MISS_STRIDES, {index});")
        if self.a.min_alignment:
            e(f"if ((uintptr_t)tl_data(&{v}) % {self.a.min_alignment}) TL_MISS(TL_MISS_ALIGN, {index});")
        e(f"if (like == NULL) {{ like = &{v}; }} else if ({v}.dl.device.device_id != "
          f"like->dl.device.device_id) TL_MISS(TL_MISS_DEVICE_ID, {index});")

    def scalar(self, index: int, param: ParamInfo, arg: str) -> None:
        e, local = self.out, f"p{index}"
        dtype = param.dtype
        e(f"/* {_text(param.name)} (#{index}): {dtype} */")
        if dtype.startswith(("int", "uint")) and dtype in _OPERANDS:
            low, high = _int_range(dtype)
            e(f"switch (tl_int_arg({arg}, {low}, {high}, &{local})) {{")
            e(f"  case -1: TL_MISS(TL_MISS_SCALAR, {index});")
            e(f"  case -2: TL_MISS(TL_MISS_RANGE, {index});")
            e("}")
            self.names[param.name] = CExpr(local, False)
            if param.name in self.a.scalar_dims:
                # an output's dimension (`T.empty((n,))`): a symbol this scalar binds; a wrong
                # or negative value goes to ArgumentBinder, which says what differs
                if param.name in self.symbols:
                    e(f"if ({local} != {self.symbols[param.name]}) TL_MISS(TL_MISS_SHAPE, {index});")
                else:
                    self.symbols[param.name] = local
                e(f"if ({local} < 0) TL_MISS(TL_MISS_RANGE, {index});")
        elif dtype.startswith(("float", "bfloat")):
            e(f"if (tl_float_arg({arg}, &d{index})) TL_MISS(TL_MISS_SCALAR, {index});")
            self.names[param.name] = CExpr(f"d{index}", True)
        elif dtype == "bool":
            e(f"if (tl_bool_arg({arg}, &{local})) TL_MISS(TL_MISS_SCALAR, {index});")
            self.names[param.name] = CExpr(local, False)
        elif dtype == "handle":  # `T.ptr`: None, an address, or a tensor on the kernel's device
            e(f"switch (tl_address_arg(st, {arg}, &v[{index}], &{local})) {{")
            e(f"  case -1: TL_MISS(TL_MISS_SCALAR, {index});")
            e(f"  case 1: if (v[{index}].dl.device.device_type != TL_DEVICE_TYPE) TL_MISS(TL_MISS_DEVICE, {index});")
            e("}")
            self.names[param.name] = CExpr(local, False)
        else:
            raise CompileError(f"{self.where}: scalar parameter {param.name!r} has dtype {dtype}, "
                               "which the cython launcher cannot pass")

    def c_dim(self, dim: str) -> str | None:
        """A symbol's C local, or an expression dimension (integer arithmetic over symbol
        names, engine/lower.py) in C over them; None if a symbol is unbound."""
        names = dim_symbols(dim)
        if any(n not in self.symbols for n in names):
            return None
        return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: self.symbols[m.group(0)], dim).replace("//", "/")

    def deferred_checks(self) -> None:
        for extent, dim, index in self.deferred:
            value = self.c_dim(dim)
            if value is None:
                raise CompileError(f"{self.where}: dimension {dim} of parameter {self.a.params[index].name!r} "
                                   "refers to a symbol no input binds")
            self.out(f"if ({extent} != {value}) TL_MISS(TL_MISS_SHAPE, {index});")
        # a dimension a symbol was solved from: a * n + b for a whole n >= 0 (ArgumentBinder says which)
        for index, _axis, symbol, a, b, _solved, _written in self.a.shape_checks:
            local = self.symbols[symbol]
            self.out(f"if ({local} < {b} || ({local} - {b}) % {a} != 0) TL_MISS(TL_MISS_SHAPE, {index});")

    # -- outputs --------------------------------------------------------------------
    def output(self, slot: int, index: int, param: ParamInfo) -> None:
        e = self.out
        dims = [str(d) if isinstance(d, int) else self.c_dim(d) for d in param.shape or ()]
        if None in dims:  # ArgumentBinder refuses such kernels when the launcher is made
            raise CompileError(f"{self.where}: output {param.name!r} has a symbolic dimension no input binds")
        shape = f"(const int64_t[]){{{', '.join(dims)}}}" if dims else "NULL"
        e(f"/* output {_text(param.name)} (#{index}) */")
        if self.source.device_type != 1:
            e(f"if (like == NULL || !like->is_torch) TL_MISS(TL_MISS_NO_TORCH, {index});")
        e(f"if ((like != NULL && like->is_torch) ? st->torch_dtypes[{slot}] == NULL "
          f": st->numpy_dtypes[{slot}] == NULL) TL_MISS(TL_MISS_DTYPE, {index});")
        e(f"out[{slot}] = tl_empty(st, {slot}, like, {len(dims)}, {shape});")
        e(f"if (out[{slot}] == NULL) goto done;")
        e(f"if (tl_view_of(st, out[{slot}], &v[{index}], 1)) {{")
        e(f'  PyErr_SetString(PyExc_RuntimeError, "cannot view the output {_text(param.name)} it allocated");')
        e("  goto done;")
        e("}")

    # -- launches -------------------------------------------------------------------
    def operands(self, launch: KernelLaunch, where: str) -> list[tuple[str, str]]:
        """(C type, value) per operand of one launch."""
        if len(launch.args) != len(launch.arg_types):
            raise CompileError(f"{where}: {len(launch.args)} operands but {len(launch.arg_types)} arg_types")
        result = []
        for k, (arg, arg_type) in enumerate(zip(launch.args, launch.arg_types)):
            spec = _OPERANDS.get(arg_type)
            if self.source.host_call and arg_type == "float16":
                spec = _HOST_FLOAT16
            if spec is None:
                raise CompileError(f"{where}: operand #{k} ({arg}) has type {arg_type!r}, which the "
                                   f"cython launcher cannot pass; supported: {', '.join(_OPERANDS)}")
            c_type, convert = spec
            if arg.startswith("param:"):
                index = int(arg[6:]) if arg[6:].isdigit() else -1
                if not 0 <= index < len(self.a.params) or not self.a.params[index].is_tensor:
                    raise CompileError(f"{where}: operand #{k} {arg!r} names no tensor parameter")
                result.append((c_type, f"(void*)tl_data(&v[{index}])"))
            else:
                value = c_expression(arg, self.names, f"{where}, operand #{k}")
                result.append((c_type, convert.format(value.code)))
        return result

    def host_call(self, launch: KernelLaunch, where: str) -> None:
        e = self.out
        args = ", ".join(value for _, value in self.operands(launch, where))
        symbol = _symbol(launch, where)
        e("Py_BEGIN_ALLOW_THREADS  /* the kernel touches no Python object */")
        e(f"rc = {symbol}({args});")
        e("Py_END_ALLOW_THREADS")
        e("if (rc != 0) {")
        e(f'  tl_raise_compute_error(st, "{symbol}", rc);')
        e("  goto done;")
        e("}")

    def device_launch(self, number: int, launch: KernelLaunch, where: str) -> None:
        e = self.out
        if len(launch.grid) != 3 or len(launch.block) != 3:
            raise CompileError(f"{where}: grid and block need three extents each")
        extents = [c_expression(x, self.names, f"{where}, grid extent") for x in launch.grid]
        extents += [c_expression(x, self.names, f"{where}, block extent") for x in launch.block]
        smem = c_expression(launch.dynamic_smem, self.names, f"{where}, dynamic shared memory size")
        operands = self.operands(launch, where)
        e(f"{{ /* launch {number}: {_symbol(launch, where)} */")
        e.depth += 1
        e("const int64_t grid[3] = {" + ", ".join(f"(int64_t)({x.code})" for x in extents[:3]) + "};")
        e("const int64_t block[3] = {" + ", ".join(f"(int64_t)({x.code})" for x in extents[3:]) + "};")
        for k, (c_type, value) in enumerate(operands):
            e(f"{c_type} a{k} = {value};")
        if operands:
            e("void* params[] = {" + ", ".join(f"&a{k}" for k in range(len(operands))) + "};")
        else:
            e("void** params = NULL;")
        e(f"if (tl_cuda_launch(st, &scope, {number}, grid, block, (int64_t)({smem.code}), stream, params)) {{")
        e("  tl_cuda_exit(st, &scope);")
        e("  goto done;")
        e("}")
        e.depth -= 1
        e("}")


def kernel_header(artifact: CompiledArtifact, source: KernelSource) -> str:
    """The text of ``tl_kernel.h`` for one kernel. Raises CompileError for a signature or
    launch metadata the launcher cannot handle (at build time, not at the first call)."""
    if not artifact.launches:
        raise CompileError(f"kernel {artifact.kernel_name!r}: cython launches compiled kernels from "
                           f"their launch metadata; target backend {artifact.target_backend!r} recorded none")
    m = _Emitter(artifact, source)
    params, outputs = artifact.params, list(artifact.out_idx)
    body = m.out
    body.depth = 1
    for position, index in enumerate(m.inputs):
        param = params[index]
        if not param.optional:
            (m.tensor if param.is_tensor else m.scalar)(index, param, f"argv[{position}]")
    for position, index in enumerate(m.inputs):  # last: the parameters that bind them come first
        if params[index].optional:
            m.tensor(index, params[index], f"argv[{position}]")
    m.deferred_checks()
    for slot, index in enumerate(outputs):
        m.output(slot, index, params[index])
    if source.host_call:
        for launch in artifact.launches:
            m.host_call(launch, f"{m.where}, call of {launch.symbol!r}")
    else:
        body("if (!has_stream) {")
        body("  stream = NULL;")
        body("  if (like != NULL && like->is_torch && st->dlpack->current_work_stream(kDLCUDA, TL_DEV(like), &stream)) goto done;")
        body("}")
        body("if (tl_cuda_enter(st, like != NULL ? TL_DEV(like) : tl_cuda_current_device(st), &scope)) goto done;")
        for number, launch in enumerate(artifact.launches):
            m.device_launch(number, launch, f"{m.where}, launch of {launch.symbol!r}")
        body("tl_cuda_exit(st, &scope);")
    if not outputs:
        body("result = Py_None;")
        body("Py_INCREF(result);")
    elif len(outputs) == 1:
        body("result = out[0];")
        body("out[0] = NULL;")
    else:
        body(f"result = PyList_New({len(outputs)});  /* a list of the outputs, as upstream returns them */")
        body("if (result != NULL) {")
        for s in range(len(outputs)):
            body(f"  PyList_SET_ITEM(result, {s}, out[{s}]);  /* the list takes the reference */")
            body(f"  out[{s}] = NULL;")
        body("}")
    return _assemble(artifact, source, m)


def _assemble(artifact: CompiledArtifact, source: KernelSource, m: _Emitter) -> str:
    e = _Lines()
    n_params, n_outputs = len(artifact.params), len(artifact.out_idx)
    e(f"/* tl_kernel.h: the launcher of kernel '{_text(artifact.kernel_name)}' (generated by")
    e(" * tilelang.jit.adapter.cython from the compiled artifact; do not edit) */")
    e(f"#define TL_DEVICE_TYPE {source.device_type}")
    e(f"#define TL_NUM_OUTPUTS {n_outputs}")
    e(f"#define TL_NUM_LAUNCHES {len(artifact.launches)}")
    e("#include <stdbool.h>")
    if source.host_call:
        e("#if defined(__FLT16_MAX__)  /* TVM's C codegen spells float16 `half` */")
        e("typedef _Float16 half;")
        e("#endif")
        e('#include "tl_kernel_host.c"  /* the compute function(s), from TVM\'s C codegen */')
    else:
        symbols = ", ".join(f'"{_symbol(launch, "kernel launch")}"' for launch in artifact.launches)
        e(f"static const char* const tl_symbols[TL_NUM_LAUNCHES] = {{{symbols}}};")
        cooperative = ", ".join(str(int(launch.cooperative)) for launch in artifact.launches)
        e(f"static const int tl_cooperative[TL_NUM_LAUNCHES] = {{{cooperative}}};  /* T.sync_grid */")
    e('#include "tl_runtime.h"')
    e()
    e("#define TL_MISS(code, arg) do { st->miss_code = (code); st->miss_arg = (arg); goto miss; } while (0)")
    e("#define TL_DEV(view) ((view)->dl.device.device_id)")
    e()
    e("static PyObject* tl_call(tl_state* st, PyObject* args, int has_stream, void* stream) {")
    e.depth = 1
    e("PyObject* const* argv = &PyTuple_GET_ITEM(args, 0);")
    e("PyObject* result = NULL;")
    e(f"PyObject* out[{n_outputs + 1}] = {{NULL}};")
    e(f"tl_view v[{n_params + 1}];")
    e("const tl_view* like = NULL;  /* the first tensor: outputs follow its kind and device */")
    locals_ = [f"int64_t {s};" for s in m.symbols.values()]
    locals_ += [f"{'double' if n.is_float else 'int64_t'} {n.code};" for n in m.names.values()
                if n.code not in m.symbols.values()]
    for line in locals_:
        e(line)
    e("int32_t rc = 0;" if source.host_call else "tl_cuda_scope scope;")
    e("(void)stream; (void)has_stream; (void)rc;" if source.host_call else "(void)has_stream;")
    for i in range(n_params):
        e(f"v[{i}].has_buffer = 0;")
    e(f"if (PyTuple_GET_SIZE(args) != {len(m.inputs)}) TL_MISS(TL_MISS_ARGC, -1);")
    e.lines.extend(m.out.lines)
    e("goto done;")
    e.depth = 0
    e("miss:")
    e("  result = st->miss;")
    e("  Py_INCREF(result);")
    e("done:")
    for i in range(n_params):
        e(f"  tl_view_release(&v[{i}]);")
    for s in range(n_outputs):
        e(f"  Py_XDECREF(out[{s}]);")
    e("  return result;")
    e("}")
    return e.text()

"""Eager kernels: ``c = matmul(a, b)`` specializes, compiles (once per shape), runs.

Calling an eager ``@tilelang.jit`` function (see ``tilelang.language.eager`` for the
style, ``eager_source`` for how its source is split) goes through two caches:

* per value of the non-tensor arguments, an :class:`EagerTemplate`: the declarations run
  once with ``T.const`` names as variables, which tells where each name sits in the input
  tensors' annotated shapes;
* per value of the ``T.const`` names (read from the tensors' shapes, or given as keywords),
  a compiled kernel: the declarations run again with the values, the kernel part is parsed
  as TVMScript with the tensors as parameters (inputs in signature order, then the T.empty
  outputs, which become ``out_idx``), and ``tilelang.compile`` builds it — its disk cache
  keys on the PrimFunc's script, so a new process compiles nothing it has compiled before.

``T.dynamic`` sizes are not part of either key: one kernel serves every value. Before any
of this (and TVM's import), ``eager_index.EagerEntry`` asks the request index, which
answers a call compiled by an earlier process.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import tvm
from tvm.ir import IRModule
from tvm.script.ir_builder import IRBuilder
from tvm.script.parser.core import doc
from tvm.script.parser.core.diagnostics import Source
from tvm.script.parser.core.error import ParserError
from tvm.script.parser.core.parser import Parser
from tvm.tirx import is_buffer_var

from .. import language as T
from ..errors import ArgumentError, LanguageError, TileLangError
from ..language.diagnostics import raise_for_user
from ..language.dtypes import as_dtype_str
from ..language.eager import EagerBuild, eager_build
from ..language.frontend import normalize
from .eager_index import Specialization, bind_arguments, missing_tensors, static_key
from .eager_scopes import (
    Scope,
    ScopeRunner,
    function_namespace,
    output_names,
    returned,
    unshadowed,
)
from .eager_source import DECLARE_TENSOR, EagerSource
from .kernel import JITKernel

_PRIM_FUNC = "__tilelang_prim_func__"
_PARAM = "__tilelang_param_{}"
_WORKSPACE = "__tilelang_workspace_{}"


def _const_name(size: Any, consts: Mapping[str, Any]) -> str | None:
    """The T.const name a dimension is, in a first run (variables or placeholder ints)."""
    value = size if isinstance(size, int) else getattr(size, "value", None)
    for name, marker in consts.items():
        if marker.same_as(size) if hasattr(marker, "same_as") else value == marker:
            return name
    return None


#: PrimFunc attributes of the declarations (upstream's names): the outputs' parameter
#: indices (negative: the T.empty outputs come last), pass configs, device compiler flags
OUT_IDX_ATTR, PASS_CONFIGS_ATTR, COMPILE_FLAGS_ATTR = "tilelang_out_idx", "tilelang_pass_configs", "tilelang_compile_flags"


def with_declared_options(func: Any, build: EagerBuild) -> Any:
    """``func`` with what its declarations asked for recorded as attributes, which
    ``tilelang.compile`` reads (:func:`declared_options`)."""
    if build.outputs:
        func = func.with_attr(OUT_IDX_ATTR, [i - len(build.outputs) for i in range(len(build.outputs))])
    if build.pass_configs:
        func = func.with_attr(PASS_CONFIGS_ATTR, dict(build.pass_configs))
    if build.compile_flags:
        func = func.with_attr(COMPILE_FLAGS_ATTR, list(build.compile_flags))
    return func


def _python(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "items"):
        return {str(k): _python(v) for k, v in value.items()}
    if isinstance(value, tvm.tirx.IntImm):
        return bool(value.value) if str(value.ty.dtype) == "bool" else int(value.value)
    if isinstance(value, tvm.tirx.FloatImm):
        return float(value.value)
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return [_python(v) for v in value]
    return str(value)


def declared_options(func: Any, out_idx: Any, pass_configs: Mapping[str, Any] | None
                     ) -> tuple[Any, Mapping[str, Any] | None]:
    """(out_idx, pass_configs) of a compile of ``func``, with its declared attributes: the
    T.empty outputs (given out_idx too is a conflict, as upstream says), its pass configs
    under the compile's own, its compile flags before the compile's."""
    attrs = getattr(func, "attrs", None)
    if attrs is None:
        return out_idx, pass_configs
    if OUT_IDX_ATTR in attrs:
        declared = _python(attrs[OUT_IDX_ATTR])
        if out_idx is not None:
            raise LanguageError(
                f"Out index conflict: kernel {str(attrs.get('global_symbol', 'kernel'))!r} returns its T.empty "
                f"outputs (out_idx {declared}) and the compile was given out_idx={out_idx!r}; drop out_idx=")
        out_idx = declared
    if PASS_CONFIGS_ATTR in attrs:
        pass_configs = {**_python(attrs[PASS_CONFIGS_ATTR]), **(pass_configs or {})}
    if COMPILE_FLAGS_ATTR in attrs:
        flags = _python(attrs[COMPILE_FLAGS_ATTR])
        given = list((pass_configs or {}).get("tl.device_compile_flags", []))
        pass_configs = {**(pass_configs or {}), "tl.device_compile_flags": flags + given}
    return out_idx, pass_configs


def lazy_prim_func(func: Callable[..., Any]) -> Any:
    """``@T.prim_func def kernel(A, B): A: T.Tensor(...); ...``: a kernel whose parameters
    are declared in its body, with T.empty outputs returned (upstream's lazy style). Its
    declarations run once, without arguments: sizes known only at run time are T.dynamic;
    T.const names need @tilelang.jit, which reads them from each call's tensors."""
    from .eager_source import read_eager_source

    source = read_eager_source(func)
    name = getattr(func, "__name__", "kernel")
    if source is None:
        raise LanguageError(f"T.prim_func {name!r}: its parameters have no annotations, and its body does not "
                            "declare them before a `with T.Kernel(...)`; annotate them (`A: T.Tensor((M, N), "
                            "T.float32)`) in the signature or as the body's first statements")
    undeclared = [p for p in source.params if p not in source.inputs]
    if undeclared:
        raise LanguageError(f"T.prim_func {name!r}: parameter(s) {undeclared} are declared neither in the "
                            "signature nor in the body; annotate each, in the signature or as one of the "
                            "body's first statements: `n: T.int32` (a scalar) or `A: T.Tensor((M, N), "
                            "T.float32)`")
    lazy = EagerFunction(func, source, {}, compile_fn=lambda *a, **k: None)
    template = lazy._template((), {})
    if template.consts:
        raise LanguageError(f"T.prim_func {name!r}: T.const {list(template.consts)} takes its values from a "
                            "call's tensors; decorate the function with @tilelang.jit, or use T.dynamic")
    lazy.kind = "T.prim_func"  # how its errors name it
    return lazy._prim_func({}, {})[0]


@dataclass(frozen=True)
class EagerTemplate:
    """Where the T.const names sit in the input tensors' shapes (for one set of
    non-tensor arguments)."""

    consts: tuple[str, ...]  # every T.const name, in declaration order
    ranks: Mapping[str, int]  # input tensor -> annotated number of dimensions
    shapes: Mapping[str, str]  # input tensor -> its annotation, for messages
    #: const -> (tensor, axis, a stride?, elements per storage element) it is read from (a
    #: sub-byte tensor's last dimension and other strides count elements, its storage bytes)
    places: Mapping[str, tuple[tuple[str, int, bool, int], ...]]

    def values(self, kernel: str, tensors: Mapping[str, Any], given: Mapping[str, int]) -> dict[str, int]:
        """The value of every T.const name: ``given`` first, else the tensors' shapes (which
        must agree with each other and have the annotated ranks)."""
        for tensor, rank in self.ranks.items():
            value = tensors.get(tensor)
            if value is not None and len(value.shape) != rank:
                raise LanguageError(
                    f"eager kernel {kernel!r}: argument {tensor!r} is annotated with {rank} "
                    f"dimension(s) {self.shapes[tensor]} but got a tensor of shape "
                    f"{tuple(value.shape)}")
        values: dict[str, int] = {}
        for name in self.consts:
            if name in given:
                values[name] = int(given[name])
                continue
            seen: tuple[str, int, int] | None = None
            for tensor, dim, stride, scale in self.places.get(name, ()):
                if tensors.get(tensor) is None:
                    continue
                size = (_stride(tensors[tensor], dim) if stride else int(tensors[tensor].shape[dim])) * scale
                if seen is None:
                    seen = (tensor, dim, size)
                elif seen[2] != size:
                    raise LanguageError(
                        f"eager kernel {kernel!r}: T.const {name!r} is {seen[2]} in "
                        f"{seen[0]!r} (dimension {seen[1]}) but {size} in {tensor!r} "
                        f"(dimension {dim}); the tensors' shapes must agree")
            if seen is None:
                tensors_with = sorted({p[0] for p in self.places.get(name, ())})
                where = (f"pass {' or '.join(map(repr, tensors_with))}, whose shape has it, or"
                         if tensors_with else "it is no dimension of an input tensor, so")
                raise LanguageError(f"eager kernel {kernel!r}: no value for T.const {name!r}; "
                                    f"{where} give it as a keyword: {name}=...")
            values[name] = seen[2]
        return values


def _stride(tensor: Any, axis: int) -> int:
    """A tensor's stride along ``axis`` in elements (torch's stride(); numpy's strides are
    in bytes)."""
    stride = getattr(tensor, "stride", None)
    if callable(stride):
        return int(stride(axis))
    return int(tensor.strides[axis]) // int(tensor.itemsize)


class _KernelSource(Source):
    """TVMScript's source object for the rewritten kernel: the original file and lines
    (so diagnostics point at the user's code), our syntax tree."""

    def __init__(self, source: EagerSource, tree: Any) -> None:
        self.source_name = source.filename
        self.start_line = source.first_line
        self.start_column = source.indent
        self.source = source.text
        self.full_source = "".join(linecache.getlines(source.filename)) or source.text
        self._tree = tree

    def as_ast(self) -> Any:
        return self._tree


class EagerFunction:
    """The eager side of a ``@tilelang.jit`` function (see the module docstring)."""

    def __init__(self, func: Callable[..., Any], source: EagerSource, options: Mapping[str, Any],
                 compile_fn: Callable[..., JITKernel]) -> None:
        self.func = func
        self.source = source
        self.options = dict(options)
        self.signature = inspect.signature(func)
        self._compile = compile_fn
        self.kind = "eager kernel"
        self._scopes = ScopeRunner(source.name)
        self._templates: dict[Any, EagerTemplate] = {}
        self._kernels: dict[Any, Specialization] = {}

    # -- binding ------------------------------------------------------------------------
    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any], *, partial: bool
              ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(non-tensor arguments, tensors, keywords that are not parameters)."""
        return bind_arguments(self.signature, self.source, args, kwargs, partial=partial)

    def _static_key(self, statics: Mapping[str, Any]) -> Any:
        return static_key(self.source, statics)

    # -- running the declarations -------------------------------------------------------
    def _declare(self, statics: Mapping[str, Any], build: EagerBuild) -> tuple[list[Scope], dict[str, Any]]:
        """Run the declarations (and those of the T.macro calls that hold the kernel, see
        eager_scopes); return (the scopes, the input tensors' buffers)."""
        namespace = function_namespace(self.func)
        buffers: dict[str, Any] = {}

        def declare_tensor(name: str, annotation: Any) -> Any:
            if name in self.source.scalars:  # `n: T.int32`: a run-time scalar parameter
                buffers[name] = tvm.tirx.Var(name, as_dtype_str(annotation))
                return buffers[name]
            if callable(annotation) and not is_buffer_var(annotation):
                annotation = annotation()
            if not is_buffer_var(annotation):
                raise LanguageError(f"eager kernel {self.source.name!r}: {name!r} is annotated "
                                    f"with {annotation!r}, not a tensor; write "
                                    f"`{name}: T.Tensor((M, N), dtype)`")
            buffers[name] = annotation
            return annotation

        namespace[DECLARE_TENSOR] = declare_tensor
        arguments = {p: statics.get(p) for p in self.source.params}
        with warnings.catch_warnings(), eager_build(build):
            # `T.Tensor[shape, dtype]` is upstream TileLang's spelling; TVM calls it deprecated
            warnings.filterwarnings("ignore", message=r"T\.Buffer\[\.\.\.\] is deprecated")
            for name, node in self.source.signature_tensors.items():
                code = compile(ast.Expression(node), self.source.filename, "eval")
                arguments[name] = declare_tensor(name, eval(code, namespace))
            scopes = self._scopes.run(self.source, self.func, namespace, arguments)
        return scopes, buffers

    def _template(self, key: Any, statics: Mapping[str, Any]) -> EagerTemplate:
        template = self._templates.get(key)
        if template is not None:
            return template
        build = EagerBuild(self.source.name)
        try:
            _, buffers = self._declare(statics, build)
        except TileLangError:
            raise
        except Exception as err:  # e.g. `(1.0 / dim) ** 0.5` on a variable: retry with numbers
            if not build.consts:
                raise
            build = EagerBuild(self.source.name, numbers=True)
            try:
                _, buffers = self._declare(statics, build)
            except Exception:  # noqa: BLE001 - whatever the second run raises, the first error explains
                raise LanguageError(
                    f"eager kernel {self.source.name!r}: its declarations (the statements before "
                    f"the first `with`) failed with {type(err).__name__}: {err}. The JIT runs them "
                    f"once with the T.const names {list(build.consts)} standing for unknown sizes "
                    "(variables, then placeholder numbers) to find the names in the tensors' "
                    "shapes; move what needs the values into the kernel (after "
                    "`with T.Kernel(...)`) or pass it as a parameter") from err
        from ..transform.subbyte import SUBBYTE_BITS

        places: dict[str, list[tuple[str, int, bool, int]]] = {}
        shapes: dict[str, str] = {}
        for tensor in self.source.tensors:
            buffer = buffers[tensor]
            pack = 8 // SUBBYTE_BITS.get(str(buffer.dtype), 8)
            names = [_const_name(size, build.consts) for size in buffer.shape]
            for dim, name in enumerate(names):
                if name is not None:
                    scale = pack if dim == len(names) - 1 else 1
                    places.setdefault(name, []).append((tensor, dim, False, scale))
            for dim, stride in enumerate(list(buffer.strides)):
                name = _const_name(stride, build.consts)
                if name is not None:
                    places.setdefault(name, []).append((tensor, dim, True, pack if dim < len(names) - 1 else 1))
            shapes[tensor] = "(" + ", ".join(n or str(d) for n, d in zip(names, buffers[tensor].shape)) + ")"
        template = EagerTemplate(
            consts=tuple(build.consts),
            ranks={t: len(buffers[t].shape) for t in self.source.tensors},
            shapes=shapes,
            places={k: tuple(v) for k, v in places.items()},
        )
        self._templates[key] = template
        return template

    # -- building -----------------------------------------------------------------------
    def _prim_func(self, statics: Mapping[str, Any], values: Mapping[str, int]
                   ) -> tuple[Any, tuple[str, ...], tuple[int, ...] | None]:
        """The specialized PrimFunc, its output names and the outputs a call returns
        (positions among them; None: no `return`, the kernel's result)."""
        build = EagerBuild(self.source.name, values)
        scopes, buffers = self._declare(statics, build)
        gives = returned(scopes)
        outputs = output_names(scopes, build.outputs, self.source.inputs, self.source.name)
        picks = None
        if gives is not None:
            wrong = [n for n, v in gives if not any(v is out for out in build.outputs)]
            if wrong:
                raise LanguageError(f"{self.kind} {self.source.name!r}: `return` names {wrong}, which "
                                    f"T.empty did not make; the outputs are {outputs or 'none'}")
            picks = tuple(next(i for i, out in enumerate(build.outputs) if v is out) for _, v in gives)
        params = {t: buffers[t] for t in self.source.inputs}
        params.update(zip(outputs, build.outputs))
        kernel_scope = scopes[-1]
        kernel, namespace = unshadowed(kernel_scope.source.kernel, kernel_scope, params)
        kernel = self._declare_workspaces(kernel, namespace, build.workspaces)
        namespace.update({_PARAM.format(p): value for p, value in params.items()})
        namespace[_PRIM_FUNC] = T.prim_func
        func = self._parse(kernel_scope.source, kernel, list(params), namespace)
        return with_declared_options(func, build), tuple(outputs), picks

    def _declare_workspaces(self, kernel: list[ast.stmt], namespace: dict[str, Any],
                            workspaces: list[Any]) -> list[ast.stmt]:
        """``kernel`` after a ``name = T.alloc_global(shape, dtype)`` for each workspace the
        declarations made (the buffer the name held there stood for it)."""
        added = []
        for i, buffer in enumerate(workspaces):
            names = [name for name, value in namespace.items() if value is buffer]
            if not names:
                continue  # declared and never used by the kernel
            slot = _WORKSPACE.format(i)
            namespace[slot] = (tuple(buffer.shape), str(buffer.dtype))
            namespace.setdefault("__tilelang_alloc_global__", T.alloc_global)
            statement = ast.parse(f"{names[0]} = __tilelang_alloc_global__(*{slot})").body[0]
            added.append(ast.copy_location(statement, kernel[0]) if kernel else statement)
        return [*added, *kernel]

    def _parse(self, source: EagerSource, kernel: list[ast.stmt], params: list[str],
               namespace: dict[str, Any]) -> Any:
        """TVMScript's parse of ``kernel`` (statements of ``source``, the eager function's
        or a macro's) as a PrimFunc named after the eager function."""
        fdef = source.function
        annotations = [ast.copy_location(ast.Name(_PARAM.format(p), ast.Load()), fdef) for p in params]
        args = [ast.copy_location(ast.arg(p, a), fdef) for p, a in zip(params, annotations)]
        kernel_def = ast.FunctionDef(
            name=self.source.name, body=kernel, returns=None, type_comment=None,
            decorator_list=[ast.copy_location(ast.Name(_PRIM_FUNC, ast.Load()), fdef)],
            args=ast.arguments(posonlyargs=[], args=args, vararg=None, kwonlyargs=[],
                               kw_defaults=[], kwarg=None, defaults=[]))
        tree = ast.fix_missing_locations(ast.Module([ast.copy_location(kernel_def, fdef)], []))
        parser = Parser(_KernelSource(source, doc.to_doc(tree)), {})
        try:
            with IRBuilder() as builder:
                try:
                    parser.parse(extra_vars=namespace)
                except ParserError as err:
                    parser.report_error(err.node, err.args[0])
        except Exception as err:  # TVMScript reports our errors as diagnostics with a location
            raise_for_user(err)
            raise
        func = builder.get()
        # the checks TVMScript's own entry point makes after parsing a T.prim_func
        tvm.s_tir.analysis.verify_well_formed(IRModule.from_expr(func))
        tvm.tirx.analysis.verify_tirx_well_formed(func)
        return normalize(func)

    def specialize(self, statics: Mapping[str, Any], tensors: Mapping[str, Any],
                   given: Mapping[str, Any], request: str | None = None) -> Specialization:
        """The kernel for a bound call (compiled on first need); ``request``: the request
        key the compile answers (eager_index), remembered for the next process."""
        key = self._static_key(statics)
        template = self._template(key, statics)
        if self.source.var_keyword is not None:  # the keywords **kwargs took: T.const values too
            given = {k: v for k, v in given.items() if k in template.consts}
        unknown = sorted(set(given) - set(template.consts))
        if unknown:
            raise ArgumentError(
                f"eager kernel {self.source.name!r}: unexpected keyword(s) {unknown}; it takes "
                f"its parameters {list(self.source.params)} and its T.const names "
                f"{list(template.consts)}")
        values = template.values(self.source.name, tensors, given)
        full_key = (key, tuple(values[n] for n in template.consts))
        spec = self._kernels.get(full_key)
        if spec is None:
            func, outputs, picks = self._prim_func(statics, values)
            kernel = self._compile(func, **self.options, request=request)  # out_idx: the function's attribute
            spec = Specialization(kernel, self.source.inputs, picks, len(outputs))
            self._kernels[full_key] = spec
        return spec

    # -- the public entry points --------------------------------------------------------
    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        statics, tensors, given = self._bind(args, kwargs, partial=False)
        missing_tensors(self.source, tensors)
        return self.specialize(statics, tensors, given).run(tensors)

    def compile(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> JITKernel:
        statics, tensors, given = self._bind(args, kwargs, partial=True)
        return self.specialize(statics, tensors, given).kernel

    def const_values(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, int]:
        """The T.const sizes a call with tensors binds (from their shapes, or keywords)."""
        statics, tensors, given = self._bind(args, kwargs, partial=False)
        template = self._template(self._static_key(statics), statics)
        return template.values(self.source.name, tensors, given)

    def get_tir(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        statics, tensors, given = self._bind(args, kwargs, partial=True)
        return self.prim_func(statics, tensors, given)

    def prim_func(self, statics: Mapping[str, Any], tensors: Mapping[str, Any], given: Mapping[str, Any]) -> Any:
        """The PrimFunc of a bound call (``tensors``: anything with the tensors' ``shape``)."""
        template = self._template(self._static_key(statics), statics)
        return self._prim_func(statics, template.values(self.source.name, tensors, given))[0]


__all__ = ["EagerFunction", "EagerTemplate", "Specialization"]

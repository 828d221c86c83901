"""``T.alloc_var`` (a scalar variable), ``T.alloc_global`` (a global workspace) and ``T.let``
(an immutable binding).

Upstream's ``x = T.alloc_var(dtype, init)`` is a one-element buffer used as a scalar:
``x = v`` and ``x += v`` store into it, ``x`` in an expression reads it, ``x[0]`` is the same
element and ``T.clear(x)`` zeroes it. The handle returned here *is* the element
``buffer[0]`` (a ``TensorLoad`` subclass), so it goes wherever an expression goes: indices
(``A[x]``, ``A[x, 0:64]``, which TVM converts only for real expressions), TVM functions
(``T.max(x, y)``) and arithmetic. TVMScript's parser stores into a one-element buffer
when an assignment's target evaluates to such an element; the handle is wrapped in
``meta_var`` so the parser binds the handle itself and ``x[0]`` / ``T.clear(x)`` can
still see the variable.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.ir import TensorLoad
from tvm.script.ir_builder import ir as _ir
from tvm.script.ir_builder import tirx as _ib
from tvm.tirx.script.builder.ir import LetAnnotation, scalar_wrapper
from tvm_ffi import Object

from ..errors import LanguageError
from .dtypes import as_dtype_str
from .kernel import _ACTIVE

#: upstream's scope name for variables; every backend here knows ``local``
_VAR_SCOPES = {"local.var": "local", "local": "local"}


class LocalVar(TensorLoad):
    """A scalar variable: the expression ``buffer[0]``, remembering its buffer."""

    buffer: Any

    @staticmethod
    def of(buffer: Any) -> LocalVar:
        # an FFI object cannot be built by a Python subclass's constructor: take over the
        # handle of the element load instead (the object stays a TensorLoad to TVM)
        handle = buffer[0]
        if not isinstance(handle, Object):
            raise LanguageError(f"T.alloc_var: internal: {buffer} did not yield an element load")
        var = LocalVar.__new__(LocalVar)
        var.__move_handle_from__(handle)
        var.buffer = buffer
        return var

    def __getitem__(self, index: Any) -> TensorLoad:
        indices = index if isinstance(index, tuple) else (index,)
        if len(indices) != 1 or not (isinstance(indices[0], int) and indices[0] == 0):
            raise LanguageError(f"T.alloc_var {self.buffer.name!r} holds one value: index it as [0], "
                                f"not {list(indices)}")
        return self.buffer[0]


def _parse_var_args(args: tuple[Any, ...], scope: str, init: Any) -> tuple[Any, str]:
    """Upstream's forms: (init), (scope), (init, scope), keyword init/scope."""
    if len(args) > 2:
        raise LanguageError(f"T.alloc_var takes dtype, init and scope; got {len(args) + 1} positional arguments")
    if len(args) == 1:
        if isinstance(args[0], str) and init is None:
            scope = args[0]
        elif init is not None:
            raise LanguageError("T.alloc_var: the initial value is given twice (positionally and as init=)")
        else:
            init = args[0]
    elif len(args) == 2:
        if init is not None:
            raise LanguageError("T.alloc_var: the initial value is given twice (positionally and as init=)")
        init, scope = args
    if not isinstance(scope, str):
        raise LanguageError(f"T.alloc_var: scope must be a str, got {type(scope).__name__}")
    return init, scope


def alloc_var(dtype: Any, *args: Any, scope: str = "local.var", init: Any = None) -> Any:
    """``x = T.alloc_var(T.int32)`` / ``T.alloc_var(T.float32, init=1.0)``: a per-thread
    scalar variable, zero unless ``init`` is given (as upstream initializes it)."""
    init, scope = _parse_var_args(args, scope, init)
    storage = _VAR_SCOPES.get(scope, scope)
    if not (storage == "local" or storage.startswith("shared")):
        raise LanguageError(f"T.alloc_var: scope {scope!r} is not supported; use 'local.var' (the default)")
    dtype = str(dtype)
    buffer = _ib.alloc_buffer((1,), dtype, scope=storage)
    if init is None:
        init = tirx.const(0, dtype)
    elif isinstance(init, (bool, int, float)):
        try:
            init = tirx.const(init, dtype)
        except ValueError as err:  # TVM: "Literal value 1e+300 exceeds maximum of float32"
            message = str(err).splitlines()[0].split(" : ")[-1].strip()
            raise LanguageError(f"T.alloc_var({dtype}, init={init!r}): {message}; give a value the type "
                                "holds, or a wider type") from None
    elif isinstance(init, scalar_wrapper):
        init = init.scalar
    if str(getattr(getattr(init, "ty", None), "dtype", dtype)) != dtype:
        init = tirx.Cast(dtype, init)
    _ib.buffer_store(buffer, init, [0])
    return _ir.meta_var(LocalVar.of(buffer))


def alloc_global(shape: Any, dtype: Any, scope: str = "global") -> Any:
    """A global-memory workspace of the kernel, allocated by the host for each call (upstream:
    "mainly for testing"; pass workspaces as arguments in production code). Allocate it in
    the function body before ``T.Kernel`` so the kernels that follow share it."""
    if scope != "global":
        raise LanguageError(f"T.alloc_global: scope must be 'global', got {scope!r}")
    from .eager import in_declarations, workspace

    if in_declarations():  # an eager kernel's declarations: the JIT declares it in the kernel
        return workspace(shape, dtype)
    if _ACTIVE:
        raise LanguageError("T.alloc_global inside T.Kernel: device code cannot allocate global memory; "
                            "allocate the workspace before the `with T.Kernel(...)` block")
    return _ib.alloc_buffer(shape, as_dtype_str(dtype), scope="global")


class LetBinding(LetAnnotation):
    """``T.let``: TVMScript's annotation (``x: T.let = expr``, ``x: T.let[T.int32] = expr``)
    that is also upstream's call form.

    ``T.let(v, value)`` as a statement binds the variable ``v`` (``v = T.int32()``) to
    ``value`` for the rest of the enclosing block; ``T.let(v, value, body)`` is the
    expression ``body`` with ``v`` bound. (Upstream's TVM builds a LetStmt frame for the
    first form; TVM 0.27's flat ``Bind`` statement is the same binding.)"""

    def __call__(self, var: Any, value: Any, body: Any = None) -> Any:
        if not isinstance(var, tirx.Var) or isinstance(var.ty, tirx.BufferType):
            raise LanguageError(f"T.let(var, value): var must be a scalar variable such as "
                                f"`x = T.int32()`, got {type(var).__name__}")
        dtype = str(var.ty.dtype) if hasattr(var.ty, "dtype") else None
        if isinstance(value, scalar_wrapper):
            value = value.scalar
        if isinstance(value, (bool, int, float)):
            value = tirx.const(value, dtype) if dtype is not None else tirx.const(value)
        elif dtype is not None and str(getattr(getattr(value, "ty", None), "dtype", dtype)) != dtype:
            value = tirx.Cast(dtype, value)
        if body is not None:
            return tirx.Let(var, value, body)
        return _ib.Bind(value, var=var)


#: the language's ``T.let`` (replaces TVMScript's annotation-only marker of the same name)
let = LetBinding()

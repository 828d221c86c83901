"""Eager kernels from the request index: a new process gets an eager kernel it compiled
before without importing TVM (1-5 s), as a classic ``@tilelang.jit`` builder does.

``EagerEntry`` is what ``@tilelang.jit`` makes of an eager function. It binds a call's
arguments and, for a call new to this process, looks the kernel up under a request key
(``tilelang.jit.request_key``: the builder's source and the values it reads, the options,
the target, the compiler's code ...) of the non-tensor arguments, the ``T.const`` keywords
and the input tensors' shapes and dtypes. The shapes are a superset of what a kernel is
specialized on (the ``T.const`` sizes read from them; a ``T.dynamic`` size only makes the
key more specific), so the kernel found is the one compiling would build. Everything else
goes to ``EagerFunction`` (``eager.py``: TVM, the declarations run as TVMScript), which
records the request when it compiles; once it exists TVM is loaded, and a call the index
has not answered in this process goes to it (its own memo is cheaper per call than a
request key). A record is written when a compile runs, so a ``T.dynamic`` kernel reached
with a shape no compile saw takes the TVM path in a new process.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError, LanguageError
from .call_key import arguments_key, normalized
from .eager_source import EagerSource
from .kernel import JITKernel

if TYPE_CHECKING:
    from .eager import EagerFunction


def is_tensor_value(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, str)


def frozen(name: str, value: Any, kernel: str) -> Any:
    """A hashable form of a non-tensor argument (part of the cache key; see call_key); a
    tensor in it is refused: it needs an annotation to be an input."""
    def no_tensor(leaf: Any) -> None:
        if is_tensor_value(leaf):
            raise LanguageError(f"eager kernel {kernel!r}: argument {name!r} is a tensor but has no "
                                f"tensor annotation; annotate it, e.g. `{name}: T.Tensor((M, N), T.float32)`")

    return normalized(value, name, f"eager kernel {kernel!r}", leaf=no_tensor)


def static_key(source: EagerSource, statics: Mapping[str, Any]) -> tuple[Any, ...]:
    """The hashable key of a call's non-tensor arguments; a ``**kwargs`` parameter's
    keywords each named as themselves in errors."""
    return arguments_key(statics, source.var_keyword, lambda name, value: frozen(name, value, source.name))


def bind_arguments(signature: inspect.Signature, source: EagerSource, args: tuple[Any, ...],
                   kwargs: dict[str, Any], *, partial: bool) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(compile-time arguments, run-time ones: the tensors and the scalars annotated with a
    dtype, keywords that are not parameters) of a call. With a
    ``**kwargs`` parameter the keywords that are not parameters are its value, a non-tensor
    argument like the others, and also the candidates for T.const values."""
    if source.var_keyword is None:
        named = {k: v for k, v in kwargs.items() if k in signature.parameters}
    else:
        named = kwargs
    try:
        bound = (signature.bind_partial if partial else signature.bind)(*args, **named)
    except TypeError as err:
        raise ArgumentError(f"eager kernel {source.name!r}: {err}") from None
    bound.apply_defaults()
    if source.var_keyword is None:
        extra = {k: v for k, v in kwargs.items() if k not in signature.parameters}
    else:
        extra = dict(bound.arguments[source.var_keyword])
    statics, tensors = {}, {}
    for name in signature.parameters:
        if name in source.scalars:  # a run-time value, as a tensor is: not part of the key
            tensors[name] = bound.arguments.get(name)
        elif name in source.tensors:
            value = bound.arguments.get(name)
            if partial and type(value).__module__.startswith("tvm") and not hasattr(value, "shape"):
                value = None  # a placeholder in a compile (upstream's `"A": T.ptr()` in par_compile)
            if value is not None and not is_tensor_value(value):
                raise ArgumentError(
                    f"eager kernel {source.name!r}: argument {name!r} is a tensor "
                    f"parameter; expected a torch.Tensor or numpy.ndarray, got {type(value).__name__}")
            tensors[name] = value
        elif name in bound.arguments:
            statics[name] = bound.arguments[name]
        else:
            raise ArgumentError(f"eager kernel {source.name!r}: missing argument {name!r}")
    return statics, tensors, extra


def missing_tensors(source: EagerSource, tensors: Mapping[str, Any]) -> None:
    missing = [name for name, value in tensors.items() if value is None]
    if missing:
        raise ArgumentError(f"eager kernel {source.name!r}: tensor argument(s) {missing} "
                            f"missing; to compile without tensors, call "
                            f"{source.name}.compile(M=..., ...)")


@dataclass(frozen=True)
class Specialization:
    """A compiled eager kernel and how to hand back what its `return` names."""

    kernel: JITKernel
    inputs: tuple[str, ...]
    picks: tuple[int, ...] | None  # output positions the `return` names; None: all
    n_outputs: int

    def run(self, tensors: Mapping[str, Any]) -> Any:
        result = self.kernel(*(tensors[name] for name in self.inputs))
        if self.picks is None:
            return result
        outputs = (result,) if self.n_outputs == 1 else tuple(result or ())
        if len(self.picks) == 1:
            return outputs[self.picks[0]]
        return [outputs[i] for i in self.picks] if self.picks else None  # a list, as upstream


class EagerEntry:
    """The eager side of a ``@tilelang.jit`` function: the request index first, then
    EagerFunction (see the module docstring). Same entry points as EagerFunction."""

    def __init__(self, func: Callable[..., Any], source: EagerSource, options: Mapping[str, Any],
                 compile_fn: Callable[..., JITKernel]) -> None:
        self.func = func
        self.source = source
        self.options = dict(options)
        self.signature = inspect.signature(func)
        self._compile = compile_fn
        self._full: EagerFunction | None = None
        self._found: dict[Any, Specialization] = {}  # call key -> a kernel from the index
        self._by_kernel: dict[str, Specialization] = {}  # kernel key -> the one loaded

    @property
    def full(self) -> EagerFunction:
        """The TVM side, made on first need."""
        if self._full is None:
            from .eager import EagerFunction  # imports TVM

            self._full = EagerFunction(self.func, self.source, self.options, self._compile)
        return self._full

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        statics, tensors, given = bind_arguments(self.signature, self.source, args, kwargs, partial=False)
        missing_tensors(self.source, tensors)
        return self._specialize(statics, tensors, given).run(tensors)

    def compile(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> JITKernel:
        statics, tensors, given = bind_arguments(self.signature, self.source, args, kwargs, partial=True)
        return self._specialize(statics, tensors, given).kernel

    def get_tir(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.full.get_tir(args, kwargs)

    def const_values(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, int]:
        return self.full.const_values(args, kwargs)

    def _specialize(self, statics: dict[str, Any], tensors: dict[str, Any], given: dict[str, Any]) -> Specialization:
        if self._full is not None and not self._found:
            return self._full.specialize(statics, tensors, given)
        shapes = {name: None if t is None or name in self.source.scalars else (tuple(int(d) for d in t.shape),
                                                                                  str(t.dtype))
                  for name, t in tensors.items()}
        call = (static_key(self.source, statics),
                tuple(shapes.items()), tuple((k, frozen(k, v, self.source.name)) for k, v in sorted(given.items())))
        spec = self._found.get(call)
        if spec is not None:
            return spec
        if self._full is not None:
            return self._full.specialize(statics, tensors, given)
        from .request_key import request_key

        request = request_key(self.func, (), {"eager statics": statics, "tensors": shapes, "given": given},
                              self.options)
        spec = self._from_index(request, statics, shapes, given) if request is not None else None
        if spec is None:
            return self.full.specialize(statics, tensors, given, request=request)
        self._found[call] = spec
        return spec

    def _from_index(self, request: str, statics: dict[str, Any], shapes: dict[str, Any],
                    given: dict[str, Any]) -> Specialization | None:
        if self.source.macro_call is not None:
            return None  # which outputs it returns is the macro's to say: only a build knows
        # the kernel's IR, should it be asked for, from the shapes alone (no tensor kept)
        views = {name: None if s is None else types.SimpleNamespace(shape=s[0]) for name, s in shapes.items()}
        kernel = JITKernel.from_request(request, lambda: self.full.prim_func(statics, views, given), self.options)
        if kernel is None:
            return None
        known = self._by_kernel.get(kernel.cache_key)
        if known is not None:
            return known
        params = kernel.artifact.params
        outputs = [params[i].name for i in kernel.artifact.out_idx]
        returns = self.source.returns
        if returns is not None and not set(returns) <= set(outputs):
            return None  # the compile path says what is wrong
        picks = None if returns is None else tuple(outputs.index(r) for r in returns)
        spec = self._by_kernel[kernel.cache_key] = Specialization(kernel, self.source.inputs, picks, len(outputs))
        return spec


__all__ = ["EagerEntry", "Specialization", "bind_arguments", "frozen", "is_tensor_value", "missing_tensors",
           "static_key"]

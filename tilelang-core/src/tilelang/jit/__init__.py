"""The JIT: ``@tilelang.jit`` and ``tilelang.compile``."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import LanguageError
from .call_key import bound_arguments, call_key, normalized
from .eager_source import read_eager_source
from .kernel import JITKernel


def compile(
    func: Any,
    out_idx: Sequence[int] | int | None = None,
    target: Any = "auto",
    target_host: Any = None,
    execution_backend: str = "auto",
    pass_configs: Mapping[str, Any] | None = None,
    instruments: Sequence[Any] = (),
    verbose: bool = False,
    compile_flags: Sequence[str] | str | None = None,
    request: str | None = None,
) -> JITKernel:
    """Compile a T.prim_func for a target and execution backend (both "auto" by default).

    ``instruments``: TVM pass instruments for this compilation's pass-instrumentation
    session; the backend pipeline's phases appear in it as ``<pipeline>.lower``,
    ``<pipeline>.finalize_host`` ... A cached kernel runs no passes.
    ``verbose``: say on stderr what was compiled, for which backends, and whether it came
    from the cache. ``compile_flags``: extra flags for the backend's device compiler, as
    upstream; they travel as the ``tl.device_compile_flags`` pass config, which a backend
    applies or (declaring it not honoured) logs. ``request``: the request key this compile
    answers (``JITFunction`` passes it; see tilelang.jit.request_key).
    """
    if compile_flags:
        flags = [compile_flags] if isinstance(compile_flags, str) else list(compile_flags)
        pass_configs = {**(pass_configs or {}), "tl.device_compile_flags": flags}
    kernel = JITKernel(func, out_idx=out_idx, target=target, target_host=target_host,
                       execution_backend=execution_backend, pass_configs=pass_configs,
                       instruments=instruments, request=request)
    if verbose:
        _say_how(kernel)
    return kernel


def _say_how(kernel: JITKernel) -> None:
    import sys

    how = "from the kernel cache" if kernel.from_cache else "compiled"
    print(f"tilelang: {kernel.describe()}: {how}", file=sys.stderr)


def lower(func: Any, target: Any = "auto", target_host: Any = None,
          out_idx: Sequence[int] | int | None = None,
          pass_configs: Mapping[str, Any] | None = None, execution_backend: str | None = None,
          *, runtime_only: bool = False, enable_host_codegen: bool = False,
          enable_device_compile: bool = False) -> Any:
    """Lower and generate code without choosing an execution backend: returns the
    CompiledArtifact (sources, signature, launch metadata, ``host_mod``/``device_mod``).
    Works for targets this machine cannot run, e.g. CUDA source on a machine without a GPU.

    ``execution_backend``: lower the kernel as that execution backend gets it, whether or
    not it can run here: its launch conventions shape the code (tvm_ffi's host code encodes
    TMA tensor maps, so sm_90 pipelines take TMA; without one they keep cp.async).

    ``runtime_only``, ``enable_host_codegen``, ``enable_device_compile``: upstream's
    keywords, accepted so that its calls run unchanged; they change nothing here. The
    artifact always carries the signature and both sources, and compiling the device code
    is the execution backend's step (tilelang.compile), never lowering's."""
    del runtime_only, enable_host_codegen, enable_device_compile
    import dataclasses

    from ..backend.module import create_backend_context
    from ..backend.resolution import execution_spec_named
    from ..engine.lower import lower_with_context
    from ..tvm_pass_context import ambient_pass_configs
    from .eager import declared_options
    from .kernel import _name_of

    context = create_backend_context(target, target_host, execution_backend=None, kernel=func,
                                     kernel_name=_name_of(func))
    if execution_backend is not None:
        context = dataclasses.replace(context, execution_spec=execution_spec_named(context.module,
                                                                                   execution_backend))
    out_idx, pass_configs = declared_options(func, out_idx, pass_configs)  # T.empty, T.annotate_*
    # as upstream's lower, the enclosing tvm.transform.PassContext's configs, under the
    # call's own (tilelang.tvm_pass_context)
    pass_configs = {**ambient_pass_configs(), **(pass_configs or {})}
    out = [out_idx] if isinstance(out_idx, int) else list(out_idx or ())
    return lower_with_context(func, context, out_idx=out, pass_configs=pass_configs)


class JITFunction:
    """What ``@tilelang.jit`` returns. Two styles, told apart by the function's source:

    * classic: the function returns a ``T.prim_func``; call it with the kernel's parameters
      (sizes, tile shapes) to get a compiled JITKernel;
    * eager (a top-level ``with T.Kernel(...)`` in its body, or a final call of a
      ``T.macro`` that has one; tensors declared with annotations, ``T.const`` and
      ``T.empty``): call it with tensors to run the kernel and get its outputs back;
      ``.compile(M=..., ...)`` gives the JITKernel without tensors.

    Each parameter set compiles once per process and once per machine (the disk cache).
    The parameters are compile-time constants, ``**kwargs`` included; calls that bind them
    to the same values share a kernel (see call_key).
    """

    #: pytest collects a module-level callable named test_* whose ``__wrapped__`` is a
    #: function (functools.update_wrapper sets it); a kernel named so is not a test
    __test__ = False

    def __init__(self, builder: Callable[..., Any], options: dict[str, Any]) -> None:
        self.builder = builder
        self.options = options
        self._kernels: dict[Any, JITKernel] = {}  # canonical call key -> kernel
        self._call_forms: dict[Any, JITKernel] = {}  # a call as written -> kernel (no binding)
        self._eager = _eager_reading(builder, options)
        try:
            self._signature: inspect.Signature | None = inspect.signature(builder)
        except (TypeError, ValueError):  # no signature to bind against: calls keyed as written
            self._signature = None
        functools.update_wrapper(self, builder)

    @property
    def is_eager(self) -> bool:
        return self._eager is not None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._eager is not None:
            return self._eager(args, kwargs)
        return self.compile(*args, **kwargs)

    def compile(self, *args: Any, **kwargs: Any) -> JITKernel:
        """The JITKernel for these arguments. Eager style: sizes named by ``T.const`` as
        keywords (``matmul.compile(M=1024, N=1024, K=1024, block_M=128)``) or tensors."""
        if self._eager is not None:
            return self._eager.compile(args, kwargs)
        # the call as written first: types too, as 1, 1.0 and True are equal keys
        form: Any = (args, tuple(map(type, args)), tuple(sorted(kwargs.items())),
                     tuple(type(v) for _, v in sorted(kwargs.items())))
        try:
            kernel = self._call_forms.get(form)
        except TypeError:  # an unhashable argument: only the canonical key finds its kernel
            form, kernel = None, None
        if kernel is not None:
            return kernel
        where = f"@tilelang.jit function {getattr(self.builder, '__name__', 'kernel')!r}"
        if self._signature is None:
            key = normalized((args, kwargs), "(args, kwargs)", where)
        else:
            key = call_key(self._signature, bound_arguments(self._signature, args, kwargs, where), where)
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._compile_new(args, kwargs)
            self._kernels[key] = kernel
        if form is not None:
            self._call_forms[form] = kernel
        return kernel

    def _compile_new(self, args: tuple, kwargs: dict[str, Any]) -> JITKernel:
        """A kernel new to this process: through the request index when these arguments
        compiled before (no IR built, no TVM import: see request_key), else compiled."""
        from .request_key import request_key

        request = request_key(self.builder, args, kwargs, self.options)
        if request is not None:
            kernel = JITKernel.from_request(request, functools.partial(self.get_tir, *args, **kwargs),
                                            self.options)
            if kernel is not None:
                if self.options.get("verbose"):
                    _say_how(kernel)
                return kernel
        return compile(self.get_tir(*args, **kwargs), **self.options, request=request)

    def par_compile(self, configs: Sequence[Any], num_workers: int | None = None,
                    ignore_error: bool = False) -> list[JITKernel | None]:
        """Upstream's ``par_compile``: the kernels of several argument sets (a tuple of
        positional arguments or a dict of keywords each), compiled by worker processes into
        the kernel cache where they can be (tilelang.jit.par_compile)."""
        from .par_compile import par_compile_jit

        return par_compile_jit(self, configs, num_workers, ignore_error)

    def get_tir(self, *args: Any, **kwargs: Any) -> Any:
        """The PrimFunc these arguments specialize to (not compiled)."""
        if self._eager is not None:
            return self._eager.get_tir(args, kwargs)
        return self.builder(*args, **kwargs)

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        return self.compile(*args, **kwargs).get_kernel_source()


def _eager_reading(builder: Callable[..., Any], options: dict[str, Any]) -> Any:
    """The EagerEntry for an eager-style builder, else None (classic)."""
    source = read_eager_source(builder)
    if source is None:
        return None
    if options.get("out_idx") is not None:
        raise LanguageError(
            f"@tilelang.jit(out_idx=...) on eager kernel {source.name!r}: out_idx is for "
            "builders that return a T.prim_func; an eager kernel's outputs are its T.empty "
            "tensors (`C = T.empty((M, N), dtype)` ... `return C`)")
    # TVM only where the request index has no kernel
    from .eager_index import EagerEntry

    options = {k: v for k, v in options.items() if k != "out_idx"}
    return EagerEntry(builder, source, options, compile)


def jit(
    func: Callable[..., Any] | None = None,
    *,
    out_idx: Sequence[int] | int | None = None,
    target: Any = "auto",
    target_host: Any = None,
    execution_backend: str = "auto",
    pass_configs: Mapping[str, Any] | None = None,
    verbose: bool = False,
    compile_flags: Sequence[str] | str | None = None,
) -> Any:
    """``@tilelang.jit(out_idx=[-1])`` on a function that returns a T.prim_func, or
    ``@tilelang.jit`` on an eager kernel (see JITFunction). ``verbose`` and
    ``compile_flags`` as for tilelang.compile."""
    options = {"out_idx": out_idx, "target": target, "target_host": target_host,
               "execution_backend": execution_backend, "pass_configs": pass_configs}
    if verbose:
        options["verbose"] = True
    if compile_flags:
        options["compile_flags"] = compile_flags
    if func is not None:
        return JITFunction(func, options)
    return lambda f: JITFunction(f, options)


__all__ = ["JITFunction", "JITKernel", "compile", "jit", "lower"]

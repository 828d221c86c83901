"""JITKernel: a compiled kernel, callable with tensors."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import env
from .._version import __version__
from ..backend.module import BackendContext, create_backend_context
from ..backend.registry import origin
from ..cache import KernelCache, RequestIndex, cache_key
from ..cache.validate import load_artifact
from ..engine.artifact import CompiledArtifact, ParamInfo
from ..errors import BackendUnavailableError, CacheError
from .deferred_context import ContextFacts, DeferredContext
from .diagnostics import jit_phase
from .fingerprint import (  # noqa: F401
    COMPILER_SOURCE_SUFFIXES,
    compiler_fingerprint,
    plugins_fingerprint,
)

log = logging.getLogger("tilelang.jit")


def _kernel_key(func: Any, context: BackendContext, out_idx: Sequence[int],
                pass_configs: Mapping[str, Any]) -> str:
    import tvm

    from ..transform.source_lines import CONFIG as LINE_DIRECTIVES
    from ..transform.source_lines import lines_of

    # tl.emit_line_directives: the lines the source will name (the printed IR has none)
    lines = [f"lines={lines_of(func)}"] if pass_configs.get(LINE_DIRECTIVES) else []
    return cache_key([
        f"compiler={compiler_fingerprint()}",
        f"plugins={plugins_fingerprint(context)}",
        func.script(),
        *lines,
        context.fingerprint(),
        f"out_idx={list(out_idx)}",
        f"pass_configs={sorted((k, repr(v)) for k, v in pass_configs.items())}",
        f"tilelang={__version__}",
        f"tvm={tvm.__version__}",
    ])


def _warn_of_ambient_configs(pass_configs: Mapping[str, Any] | None) -> None:
    """An enclosing ``tvm.transform.PassContext`` with TileLang keys: not applied by a
    compile, which (as upstream's) runs in a context of its own and is cached by its own
    ``pass_configs`` (tilelang.tvm_pass_context)."""
    from ..tvm_pass_context import ambient_tilelang_configs

    given = {getattr(k, "value", k) for k in (pass_configs or {})}
    ignored = sorted(k for k in ambient_tilelang_configs() if k not in given)
    if ignored:
        import warnings

        warnings.warn(f"tilelang.compile does not apply the enclosing tvm.transform.PassContext's "
                      f"configs {ignored} (nor does upstream TileLang's); pass them to the compile "
                      "as pass_configs={...} (or to @tilelang.jit), or call tilelang.lower inside "
                      "the context", stacklevel=4)


class JITKernel:
    """A kernel compiled for one BackendContext. Call it with the input tensors. The best
    kernel of an autotune also carries its ``latency`` (ms), ``config`` and the
    reference's ``ref_latency``, as upstream's does."""

    latency: float | None = None
    config: dict[str, Any] | None = None
    ref_latency: float | None = None

    def __init__(self, func: Any, *, out_idx: Sequence[int] | int | None = None,
                 target: Any = "auto", target_host: Any = None, execution_backend: str = "auto",
                 pass_configs: Mapping[str, Any] | None = None, cache: KernelCache | None = None,
                 instruments: Sequence[Any] = (), request: str | None = None) -> None:
        """``request``: the request key (tilelang.jit.request_key) this compile answers;
        the request index then remembers the kernel key for the next process."""
        from ..engine.lower import lower_with_context, validate_pass_configs
        from ..engine.semantic_check import check_kernel
        from .eager import declared_options

        check_kernel(func, getattr(func, "__name__", "kernel"))  # before hashing its script
        out_idx, pass_configs = declared_options(func, out_idx, pass_configs)  # T.empty, T.annotate_*
        _warn_of_ambient_configs(pass_configs)
        if isinstance(out_idx, int):
            out_idx = [out_idx]
        if execution_backend is None:
            raise TypeError("tilelang.compile needs an execution backend; use tilelang.lower(...) "
                            "to generate code without one")
        self.context = create_backend_context(target, target_host, execution_backend, kernel=func,
                                              kernel_name=_name_of(func))
        configs = validate_pass_configs(pass_configs, self.context)
        self._prim_func = func
        self._pass_configs = configs
        cache = cache or KernelCache()
        key = _kernel_key(func, self.context, out_idx or (), configs)
        self.cache_key = key
        backend = self.context.execution_backend
        log.info("tilelang: %s", self.context.describe())
        # what TILELANG_JIT_DIAGNOSTICS logs with each phase
        target = self.context.target
        arch = target.attrs.get("arch") if hasattr(target, "attrs") else None
        about = {"kernel": _name_of(func), "target": f"{target.kind.name}{f' {arch}' if arch else ''}",
                 "backend": self.context.execution_spec.name}
        with jit_phase("cache lookup", **about):
            hit = self._load_hit(cache, key, backend)
        if hit:
            self._remember(cache, request)
            return
        with cache.lock(key) if cache.enabled else _null():
            if self._load_hit(cache, key, backend):  # another process may have built it meanwhile
                self._remember(cache, request)
                return
            log.log(logging.INFO if env.is_print_on_compilation_enabled() else logging.DEBUG,
                    "tilelang: compiling a kernel for %s", self.context.describe())
            with jit_phase("lower", **about):
                self.artifact = lower_with_context(func, self.context, out_idx=out_idx or (), pass_configs=configs,
                                                   instruments=instruments)
            with jit_phase("build", **about):
                files = backend.build(self.artifact, self.context)
            with jit_phase("cache store", **about):
                entry = cache.store(key, self.artifact.to_json(), files)
            if entry is not None:
                self._remember(cache, request)
        if entry is None:  # cache disabled or unwritable: load from a private directory
            self._tmp = tempfile.TemporaryDirectory(prefix="tilelang-kernel-")
            entry = Path(self._tmp.name)
            for name, data in files.items():
                (entry / name).write_bytes(data)
        with jit_phase("load", **about):
            self.launcher = _with_launch_state(self.artifact, backend.load(self.artifact, entry, self.context))
        self.from_cache = False

    def update_tuner_result(self, latency: float | None, config: Mapping[str, Any] | None,
                            ref_latency: float | None) -> JITKernel:
        """Record the autotune that chose this kernel (upstream's name); returns the kernel."""
        self.latency, self.ref_latency = latency, ref_latency
        self.config = dict(config) if config is not None else None
        return self

    def get_tuner_result(self) -> dict[str, Any]:
        """{"latency", "config", "ref_latency"} of the autotune that chose this kernel."""
        if self.latency is None:
            raise ValueError("this kernel has no tuning result: it was compiled directly, not chosen by "
                             "@tilelang.autotune (tilelang.autotuner.AutoTuner)")
        return {"latency": self.latency, "config": self.config, "ref_latency": self.ref_latency}

    @classmethod
    def from_request(cls, request: str, build: Callable[[], Any], options: Mapping[str, Any],
                     cache: KernelCache | None = None) -> JITKernel | None:
        """The kernel the request index names for ``request``, loaded without building its
        IR, resolving its context, or importing TVM (unless the execution backend needs
        it); None on a miss. ``build`` makes the PrimFunc, ``options`` are compile()'s
        keywords: both are used only when the kernel's IR or full context is asked for."""
        cache = cache or KernelCache()
        if not cache.enabled:
            return None
        record = RequestIndex(cache).lookup(request)
        facts = ContextFacts.from_record(record) if record is not None else None
        if record is None or facts is None:
            return None
        kernel = cls.__new__(cls)
        kernel._build, kernel._options = build, dict(options)
        kernel._prim_func = kernel._pass_configs = None
        context = DeferredContext.from_facts(facts, kernel._resolve_context)
        if context is None:
            return None
        kernel.context = context
        kernel.cache_key = record["kernel"]
        if not kernel._load_hit(cache, kernel.cache_key, context.execution_backend):
            return None
        return kernel

    def _resolve_context(self) -> BackendContext:
        """The full context of a kernel loaded through the request index (on first use)."""
        options = self._options
        return create_backend_context(options.get("target", "auto"), options.get("target_host"),
                                      options.get("execution_backend", "auto"), kernel=self.prim_func,
                                      kernel_name=_name_of(self.prim_func))

    def _remember(self, cache: KernelCache, request: str | None) -> None:
        if request is not None and cache.enabled:
            RequestIndex(cache).store(request, ContextFacts.of(self.context).record(self.cache_key))

    @property
    def prim_func(self) -> Any:
        """The kernel's T.prim_func (built now if the kernel came through the request index)."""
        if self._prim_func is None:
            self._prim_func = self._build()
        return self._prim_func

    @property
    def pass_configs(self) -> dict[str, Any]:
        if self._pass_configs is None:
            from ..engine.lower import validate_pass_configs

            context = self.context.resolve() if isinstance(self.context, DeferredContext) else self.context
            self._pass_configs = validate_pass_configs(_configs_of(self._options), context)
        return self._pass_configs

    def _load_hit(self, cache: KernelCache, key: str, backend: Any) -> bool:
        """Load ``key``'s cache entry (its files already checked against their record);
        False on a miss. An entry whose metadata fails its type checks, or that the backend
        cannot load, is discarded with one warning and rebuilt: never fatal, never loaded."""
        hit = cache.lookup(key)
        if hit is None:
            return False
        try:
            self.artifact = load_artifact(hit[0])
            self.launcher = _with_launch_state(self.artifact, backend.load(self.artifact, hit[1], self.context))
        except (BackendUnavailableError, CacheError):
            raise  # the machine, not the entry: rebuilding would not help
        except Exception as err:  # noqa: BLE001 - whatever a bad entry raises, rebuild it
            cache.discard(key, f"{type(err).__name__}: {err}")
            return False
        self.from_cache = True
        return True

    def __call__(self, /, *args: Any, stream: Any = None, **kwargs: Any) -> Any:
        if kwargs:  # inputs by name: the shared binder's rule, on every execution backend
            from .arguments import bind_keywords

            args = bind_keywords(self.artifact, args, kwargs)
        if stream is None:
            return self.launcher(*args)
        return self.launcher(*args, stream=stream)

    @property
    def kernel_name(self) -> str:
        return self.artifact.kernel_name

    def get_kernel_source(self, kernel_only: bool = True) -> str:
        """The device source (CUDA, HIP, ...) or, for CPU kernels, the host code.
        ``kernel_only=False`` (upstream's flag) appends the host code to device source."""
        if kernel_only or not self.artifact.device_source:
            return self.artifact.kernel_source
        return "\n".join(s for s in (self.artifact.device_source, self.artifact.host_source) if s)

    def get_host_source(self) -> str:
        return self.artifact.host_source

    # -- upstream JITKernel's attributes -------------------------------------------------
    @property
    def kernel_source(self) -> str:
        return self.artifact.kernel_source

    @property
    def host_source(self) -> str:
        return self.artifact.host_source

    @property
    def params(self) -> tuple[ParamInfo, ...]:
        """Every parameter's name, dtype and shape (symbolic dimensions by name)."""
        return self.artifact.params

    @property
    def out_idx(self) -> list[int]:
        """Indices of the parameters the call allocates and returns (non-negative)."""
        return list(self.artifact.out_idx)

    @property
    def target(self) -> Any:
        """The tvm Target compiled for (its host attached)."""
        return self.context.target

    @property
    def target_host(self) -> Any:
        return self.context.target_host

    @property
    def execution_backend(self) -> str:
        """The name of the execution backend that runs the kernel ("tvm_ffi", ...)."""
        return self.context.execution_spec.name

    def get_profiler(self, tensor_supply_type: Any = None) -> Any:
        """A tilelang.profiler.Profiler for this kernel: ``assert_allclose(reference)``,
        ``do_bench()``, ``run_once()`` on torch inputs made from the kernel's parameters on
        its device (``tensor_supply_type``: a tilelang.TensorSupplyType, default Auto)."""
        from ..profiler import (  # the profiler imports torch lazily
            TensorSupplyType,
            profiler_for,
        )

        return profiler_for(self, tensor_supply_type or TensorSupplyType.Auto)

    def run_once(self, func: Any = None) -> Any:
        """Upstream's: run the kernel once on inputs the profiler makes (or ``func`` on them)."""
        return self.get_profiler().run_once(func)

    def show_source(self, which: str = "kernel") -> None:
        """Upstream's: print the kernel's source ("kernel"), the host's ("host") or both."""
        if which not in ("kernel", "host", "both"):
            raise ValueError(f"show_source(which={which!r}): use 'kernel', 'host' or 'both'")
        if which in ("kernel", "both"):
            print(self.get_kernel_source())
        if which in ("host", "both"):
            print(self.get_host_source())

    def describe(self) -> str:
        dist = origin("backend", self.context.module.name)[0]
        return f"{self.kernel_name}: {self.context.describe()} [{dist}]"

    def __repr__(self) -> str:
        return f"<JITKernel {self.describe()}>"


def _configs_of(options: Mapping[str, Any]) -> dict[str, Any] | None:
    """compile()'s pass configs, with ``compile_flags`` folded in as compile() folds them."""
    configs = options.get("pass_configs")
    flags = options.get("compile_flags")
    if flags:
        configs = {**(configs or {}), "tl.device_compile_flags": [flags] if isinstance(flags, str) else list(flags)}
    return configs


def _with_launch_state(artifact: CompiledArtifact, launcher: Any) -> Any:
    """``launcher``, wrapped by the target backend's launch wrapper when the artifact asks
    for state around each launch (T.annotate_l2_hit_ratio); lowering kept none for a backend
    that has no wrapper."""
    if not artifact.l2_windows:
        return launcher
    from ..backend.refs import resolve
    from ..backend.registry import registered_backends

    module = registered_backends().get(artifact.target_backend)
    wrapper = getattr(module, "launch_wrapper", None)
    return launcher if wrapper is None else resolve(wrapper)(artifact, launcher)


def _name_of(func: Any) -> str:
    """The kernel's name for routing messages (its global symbol, as the engine names it)."""
    symbol = func.attrs.get("global_symbol") if getattr(func, "attrs", None) is not None else None
    return str(symbol) if symbol else "main"


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None

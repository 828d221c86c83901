"""The stage clocks of benchmarks/compile_time.py: which steps of a cold compile and of a
disk hit it times, and the probe that wraps them (every stage exclusive of the others)."""

from __future__ import annotations

import importlib
import sys
import time

# Steps inside backends that a cold compile pays once per process, timed as stages of their
# own where the backend is installed: (stage, module, function). The driver probe is what
# touches the GPU in a compile (the execution backend's availability check); on an H200 a
# cuInit without a context already made can take a second, which would otherwise hide in
# "backend context". Each is a functools.cache'd function looked up by name at its calls.
ONCE_PER_PROCESS = (
    ("CUDA driver init / device query", "tilelang.cuda.target", "_driver"),
    ("NVRTC library load (cuda-bindings)", "tilelang.cuda.toolchain", "nvrtc_unavailable_reason"),
    ("CUDA driver init / device query", "tilelang.jit.adapter.nvrtc.driver", "cuda_driver"),
)


# What a disk hit is made of, timed in a process of its own (``hit_stages``: its wrappers and
# their modules' imports stay out of the plain hits' totals): (stage, module, attribute path).
# The packages the plain hits imported (tvm_ffi, ...) are imported first, each timed.
HIT_STAGES = (
    ("request key", "tilelang.jit.request_key", "request_key"),
    ("cache lookups (request index, entry integrity)", "tilelang.cache", "KernelCache.lookup"),
    ("artifact (json)", "tilelang.jit.kernel", "load_artifact"),
    ("TVM runtime library (libtvm_runtime)", "tilelang.jit.adapter.tvm_ffi.runtime", "_runtime_library"),
    ("TVM runtime sidecars (device module loaders)", "tilelang.jit.adapter.tvm_ffi.runtime", "_load_sidecars"),
    ("module load (tvm_ffi.load_module)", "tvm_ffi", "load_module"),
    ("launcher (argument binder)", "tilelang.jit.adapter.tvm_ffi.backend", "TVMFFILauncher"),
    ("execution backend load (other)", "tilelang.jit.kernel", "JITKernel._load_hit"),
)


def new_packages(before: set[str]) -> list[str]:
    """Top-level packages imported since ``before``, in import order, the standard
    library's left out."""
    found: dict[str, None] = {}
    for name in list(sys.modules):
        top = name.partition(".")[0]
        if name not in before and top not in sys.stdlib_module_names:
            found.setdefault(top)
    return list(found)


class StageProbe:
    """Wraps the JIT's steps to time them (exclusive: a device compile inside a build counts
    as device compile only). The wrappers change no cache or request key."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._stack: list[float] = []
        self._wrapped: set[object] = set()
        self.outermost_s = 0.0  # seconds in timed calls that no other timed call encloses

    def timed(self, name: str, fn):
        def wrapper(*args, **kwargs):
            self._stack.append(0.0)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                nested = self._stack.pop()
                self.times[name] = self.times.get(name, 0.0) + elapsed - nested
                if self._stack:
                    self._stack[-1] += elapsed
                else:
                    self.outermost_s += elapsed
        return wrapper

    def install(self) -> None:
        import importlib

        module = importlib.import_module("tilelang.backend.module")
        engine = importlib.import_module("tilelang.engine.lower")
        jit = importlib.import_module("tilelang.jit")  # `tilelang.jit` the attribute is the decorator
        kernel = importlib.import_module("tilelang.jit.kernel")
        lower = engine.lower_with_context

        def lower_with_timings(*args, **kwargs):
            kwargs.setdefault("timings", EngineStages(self))  # the engine's own stage clock
            return lower(*args, **kwargs)

        engine.lower_with_context = lower_with_timings
        jit.JITFunction.get_tir = self.timed("build IR (TVMScript)", jit.JITFunction.get_tir)
        create = self.create_backend_context = module.create_backend_context

        def create_and_wrap(*args, **kwargs):
            context = self.timed("backend context", create)(*args, **kwargs)
            self._wrap_context(context)
            return context

        module.create_backend_context = kernel.create_backend_context = create_and_wrap
        for stage, home, name in ONCE_PER_PROCESS:
            try:
                owner = importlib.import_module(home)
            except ImportError:  # that backend is not installed
                continue
            setattr(owner, name, self.timed(stage, getattr(owner, name)))

    def install_hit(self) -> None:
        """Wrap HIT_STAGES (those whose module is installed)."""
        for stage, home, path in HIT_STAGES:
            if not home.startswith("tilelang.") and home not in sys.modules:
                continue  # another execution backend's library: not imported to be timed
            try:
                owner = importlib.import_module(home)
            except ImportError:
                continue
            *parents, name = path.split(".")
            for parent in parents:
                owner = getattr(owner, parent)
            setattr(owner, name, self.timed(stage, getattr(owner, name)))

    def _wrap_context(self, context) -> None:
        from tilelang.backend import refs
        from tilelang.backend.toolchain import declared_toolchain

        backend = context.execution_backend
        if backend is not None and type(backend) not in self._wrapped:
            self._wrapped.add(type(backend))
            kind = type(backend)
            kind.build = self.timed("execution backend build", kind.build)
            kind.load = self.timed("load", kind.load)
        toolchain = declared_toolchain(context.module)
        if toolchain is None or toolchain in self._wrapped:
            return
        self._wrapped.add(toolchain)
        compile_fn = refs.resolve(toolchain.compile)
        home = sys.modules[compile_fn.__module__]
        # CUDA's toolchain: compile_cubin is what every path calls, TVM's runtime callback
        # (tvm_ffi's load) included; another toolchain is timed where core calls it
        if hasattr(home, "compile_cubin"):
            home.compile_cubin = self.timed("device compile", home.compile_cubin)
        else:
            object.__setattr__(toolchain, "compile", self.timed("device compile", compile_fn))


class EngineStages(dict):
    """What the engine's stage clock writes into (it adds each stage's seconds when the
    stage ends): the probe's stages timed meanwhile (a device compile inside "device
    codegen") are taken out and the rest goes to the probe's table, so no second counts twice."""

    def __init__(self, probe: StageProbe) -> None:
        super().__init__()
        self.probe, self.seen = probe, probe.outermost_s

    def __setitem__(self, stage: str, total: float) -> None:
        nested, self.seen = self.probe.outermost_s - self.seen, self.probe.outermost_s
        times = self.probe.times
        times[stage] = times.get(stage, 0.0) + total - self.get(stage, 0.0) - nested
        super().__setitem__(stage, total)

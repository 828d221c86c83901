"""The cutedsl execution backend: Build keeps the generated CuTe DSL source in the kernel's
cache entry (checked by the kernel cache like any file); Load imports it from there;
the first call compiles ``launch`` with ``cute.compile`` (CuTe DSL's own disk cache lives
under TileLang's cache root, ``<root>/cutedsl``), later calls launch the compiled function
on the caller's stream, through CuTe DSL's TVM-FFI calling convention (pointers and the
stream as integers) where it compiles, else with each tensor as a typed pointer."""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tilelang.plugin import (
    ArgumentBinder,
    BackendContext,
    CompiledArtifact,
    CompileError,
    ExecutionBackend,
    KernelLauncher,
    LaunchError,
    cache_subdir,
)

from . import target

log = logging.getLogger("tilelang.cutedsl")
SOURCE = "kernel_cute.py"
CUDA_DEVICE = 2  # DLPack kDLCUDA
# CuTe DSL's TVM-FFI calling convention: the compiled launch takes pointers and the stream as
# plain integers through one tvm_ffi call, instead of CuTe DSL's Python argument adapters
# (make_ptr per tensor and the JIT executor's conversion, most of the ~28 us a small kernel
# took per call on the H200: docs/benchmarks/routing-h200-2026-12-01.md)
TVM_FFI_OPTION = "--enable-tvm-ffi"
#: "0" keeps CuTe DSL's own calling convention (make_ptr pointers, a CUstream)
TVM_FFI_ENV = "TILELANG_CUTEDSL_TVM_FFI"
_PYTHON_SCALARS = {"Boolean": bool, "Float16": float, "BFloat16": float, "Float32": float, "Float64": float}


def launch_indices(artifact: CompiledArtifact) -> list[int]:
    return sorted({int(a.split(":")[1]) for launch in artifact.launches for a in launch.args
                   if a.startswith("param:")})


class CuTeDSLExecutionBackend(ExecutionBackend):
    name = "cutedsl"
    description = "CuTe DSL source compiled by cute.compile, launched on the caller's stream"

    def unavailable_reason(self) -> str | None:
        return target.unavailable_reason()

    def build(self, artifact: CompiledArtifact, context: BackendContext) -> Mapping[str, bytes]:
        source = artifact.device_source
        if not source or not artifact.launches:
            raise CompileError(f"kernel {artifact.kernel_name!r}: the cutedsl execution backend runs CuTe DSL "
                               f"source; target backend {artifact.target_backend!r} produced none")
        try:
            ast.parse(source)
        except SyntaxError as err:  # our printer's bug: say so before anything imports it
            raise CompileError(f"kernel {artifact.kernel_name!r}: generated CuTe DSL source does not parse: "
                               f"{err}") from err
        return {SOURCE: source.encode()}

    def load(self, artifact: CompiledArtifact, directory: Path, context: BackendContext) -> KernelLauncher:
        return CuTeDSLLauncher(artifact, directory / SOURCE)


def import_source(path: Path, kernel: str) -> Any:
    """Import generated source as a module: CuTe DSL reads a kernel's source through
    ``inspect``, so it must come from a file."""
    name = f"_tilelang_cutedsl_{kernel}_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CompileError(f"kernel {kernel!r}: cannot import generated CuTe DSL source {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _use_tilelang_cache() -> None:
    """CuTe DSL's compile cache under TileLang's cache root (read when cutlass is imported)."""
    if "CUTE_DSL_CACHE_DIR" not in os.environ and "cutlass" not in sys.modules:
        folder = cache_subdir("cutedsl")
        if folder is not None:
            os.environ["CUTE_DSL_CACHE_DIR"] = str(folder)


class CuTeDSLLauncher(KernelLauncher):
    def __init__(self, artifact: CompiledArtifact, source: Path, device_type: int = CUDA_DEVICE) -> None:
        _use_tilelang_cache()
        import cutlass

        self.kernel = artifact.kernel_name
        self._binder = ArgumentBinder(artifact, device_type)
        self._indices = launch_indices(artifact)
        self._dtypes = [getattr(cutlass, _DSL_TYPES[artifact.params[i].dtype]) for i in self._indices]
        self._single = len(artifact.out_idx) == 1
        self._module = import_source(source, self.kernel)
        # the scalars launch takes after the pointers (launch_source.py): a scalar parameter's
        # value, or a symbolic dimension's, as the CuTe DSL type the module names
        by_name = {p.name: i for i, p in enumerate(artifact.params) if not p.is_tensor}
        self._scalars = [(name, by_name.get(name), getattr(cutlass, dsl), _PYTHON_SCALARS.get(dsl, int))
                         for name, dsl in getattr(self._module, "LAUNCH_SCALARS", ())]
        self._compiled: Any = None
        self._ffi = os.environ.get(TVM_FFI_ENV, "1") != "0"  # until a TVM-FFI compile fails
        self._lock = threading.Lock()

    def _pointers(self, call: list[Any]) -> list[Any]:
        from cutlass import cute
        from cutlass.cute.runtime import make_ptr

        return [make_ptr(dtype, call[i].data_ptr(), cute.AddressSpace.gmem, assumed_align=max(1, dtype.width // 8))
                for i, dtype in zip(self._indices, self._dtypes)]

    def _typed(self, call: list[Any], scalars: list[Any]) -> list[Any]:
        """The launch's arguments as CuTe DSL values: typed pointers, then typed scalars."""
        return self._pointers(call) + [dsl(v) for v, (_, _, dsl, _) in zip(scalars, self._scalars)]

    def _compile(self, call: list[Any], scalars: list[Any], handle: Any) -> None:
        """``cute.compile`` of the launch, for the TVM-FFI calling convention where CuTe DSL
        offers it here; else (or with TILELANG_CUTEDSL_TVM_FFI=0) for its own."""
        from cutlass import cute

        typed = self._typed(call, scalars)
        if self._ffi:
            try:
                self._compiled = cute.compile(self._module.launch, *typed, handle, options=TVM_FFI_OPTION)
                return
            except Exception as err:  # noqa: BLE001 - CuTe DSL's own convention still works
                log.debug("kernel %r: CuTe DSL's TVM-FFI compile failed (%s: %s); using its own calling "
                          "convention", self.kernel, type(err).__name__, err)
                self._ffi = False
        self._compiled = cute.compile(self._module.launch, *typed, handle)

    def __call__(self, *args: Any, stream: Any = None) -> Any:
        import cuda.bindings.driver as cuda

        call, outputs, symbols = self._binder.bind(args)
        if stream is None:
            import torch

            anchor = call[self._indices[0]] if self._indices else None
            stream = torch.cuda.current_stream(anchor.device if anchor is not None else None).cuda_stream
        stream_handle = int(getattr(stream, "cuda_stream", stream))
        scalars = [call[i] if i is not None else symbols[name] for name, i, _, _ in self._scalars]
        try:
            if self._compiled is None:
                with self._lock:
                    if self._compiled is None:
                        self._compile(call, scalars, cuda.CUstream(stream_handle))
            if self._ffi:
                self._compiled(*[call[i].data_ptr() for i in self._indices],
                               *[py(v) for v, (_, _, _, py) in zip(scalars, self._scalars)], stream_handle)
            else:
                self._compiled(*self._typed(call, scalars), cuda.CUstream(stream_handle))
        except Exception as err:  # CuTe DSL's own errors: name the kernel and the stage
            stage = "compile" if self._compiled is None else "launch"
            raise LaunchError(f"kernel {self.kernel!r}: cutedsl {stage} failed: {type(err).__name__}: {err}") from err
        if not outputs:
            return None
        return outputs[0] if self._single else list(outputs)


_DSL_TYPES = {
    "float16": "Float16", "bfloat16": "BFloat16", "float32": "Float32", "float64": "Float64",
    "int8": "Int8", "int16": "Int16", "int32": "Int32", "int64": "Int64", "uint8": "Uint8",
    "uint16": "Uint16", "uint32": "Uint32", "uint64": "Uint64", "bool": "Boolean",
}

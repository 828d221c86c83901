"""tvm_ffi: Build = export the TVM runtime module (host code with the device module
imported) as a shared library; Load = tvm_ffi.load_module; Launch = call the packed
function through tvm_ffi, with arguments checked first by the shared ArgumentBinder.

Loading a kernel does not import the ``tvm`` package (1-5 s): the library needs only
tvm_ffi, TVM's runtime library and, for a device kernel, the runtime sidecar that
deserializes its embedded device module, whose kind the build records beside the library
(``runtime.py`` says how they are loaded). A device kernel imports ``tvm`` when its entry
has no record (an older one) or its device module embeds source (``_load_without_tvm``).
In a process that has not imported tvm_ffi either, a hit loads and calls the library
through libtvm_ffi's C ABI (``direct.py``), without the tvm_ffi package.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ....backend import BackendContext, ExecutionBackend, KernelLauncher
from ....backend.execution_backend import UnrunnableLauncher
from ....backend.streams import as_current_stream
from ....backend.toolchain import device_mismatch, prepare_device_runtime
from ....engine.artifact import CompiledArtifact
from ....errors import CompileError, LaunchError, TileLangError
from ...arguments import ArgumentBinder
from ...fastbind import MISS, build_fast_binder
from .runtime import load_module_loaders, load_tvm_runtime_library

LIBRARY = "kernel.so"
MODULES = "modules.json"  # {"embedded": [the kinds of the modules the library embeds]}
HOST_DEVICE = 1  # DLPack kDLCPU


def embedded_kinds(directory: Path) -> list[str] | None:
    """The module kinds a built library embeds, from its record; None for an entry
    written before the record existed."""
    path = directory / MODULES
    if not path.exists():
        return None
    kinds = json.loads(path.read_text()).get("embedded")
    if not isinstance(kinds, list) or not all(isinstance(kind, str) for kind in kinds):
        raise CompileError(f"{path}: 'embedded' is not a list of module kinds (a damaged cache entry)")
    return kinds


class TVMFFILauncher(KernelLauncher):
    def __init__(self, module: Any, artifact: CompiledArtifact, device_type: int) -> None:
        """``module``: a tvm_ffi Module, or a DirectFunction (a hit before tvm_ffi's import:
        its ``launch`` takes the fast binder's calls, and any other goes through tvm_ffi)."""
        self.module = module  # keeps the library loaded for the launcher's lifetime
        direct = type(module).__name__ == "DirectFunction"  # direct.py loads on a hit only
        self.function = module if direct else module[artifact.kernel_name]
        self.binder = ArgumentBinder(artifact, device_type)
        self.addresses = [i for i, p in enumerate(artifact.params) if p.dtype == "handle"]  # `T.ptr` parameters
        self.single = len(artifact.out_idx) == 1
        self.on_host = device_type == 1
        # checks, output allocation and the call in one generated function (see fastbind)
        self.fast_call = build_fast_binder(artifact, device_type,
                                           launch=module.launch if direct else self.function)
        self.arity = len(self.binder.inputs)
        if direct:
            module.on_many_calls = lambda: self._through_tvm_ffi(artifact, device_type)

    def _through_tvm_ffi(self, artifact: CompiledArtifact, device_type: int) -> None:
        """A kernel loaded through the C ABI, called many times: on through tvm_ffi's call,
        which costs less per call (direct.SWITCH_AFTER_CALLS). Where tvm_ffi cannot load it,
        the calls stay direct: they are correct either way."""
        try:
            function = self.module.tvm_ffi_function()
            fast_call = build_fast_binder(artifact, device_type, launch=function)
        except Exception:  # noqa: BLE001 - a cheaper call is not worth a failed one
            return
        self.function, self.fast_call = function, fast_call

    def __call__(self, *args: Any, stream: Any = None) -> Any:
        try:
            if stream is None and self.fast_call is not None and len(args) == self.arity:
                result = self.fast_call(*args)
                if result is not MISS:
                    return result
            call, outputs, _ = self.binder.bind(args)
            for i in self.addresses:  # the packed function takes an address as an opaque pointer
                call[i] = ctypes.c_void_p(call[i])
            # tvm_ffi launches on the caller's current torch stream (it reads it from the
            # first device tensor); an explicit stream= becomes the current one for the call
            if stream is None or self.on_host:
                self.function(*call)
            else:
                with as_current_stream(stream, self.binder.kernel):
                    self.function(*call)
        except TileLangError:
            raise
        except Exception as err:  # the packed function's own checks, or a runtime failure
            raise LaunchError(f"kernel {self.binder.kernel!r} failed: {err}") from err
        if not outputs:
            return None
        return outputs[0] if self.single else list(outputs)


class TVMFFIExecutionBackend(ExecutionBackend):
    name = "tvm_ffi"
    description = "TVM runtime modules called through tvm_ffi (DLPack tensors)"

    def build(self, artifact: CompiledArtifact, context: BackendContext) -> Mapping[str, bytes]:
        module = artifact.host_module
        if module is None:
            raise CompileError(f"kernel {artifact.kernel_name!r}: tvm_ffi needs host code, none was generated")
        if artifact.device_module is not None:
            module.import_module(artifact.device_module)
        with tempfile.TemporaryDirectory(prefix="tilelang-tvm-ffi-") as tmp:
            path = Path(tmp) / LIBRARY
            try:
                module.export_library(str(path))
            except Exception as err:
                raise CompileError(
                    f"kernel {artifact.kernel_name!r}: linking the shared library failed: {err}"
                ) from err
            library = path.read_bytes()
        kinds = [] if artifact.device_module is None else [str(artifact.device_module.kind)]
        return {LIBRARY: library, MODULES: json.dumps({"embedded": kinds}).encode()}

    def load(self, artifact: CompiledArtifact, directory: Path, context: BackendContext) -> KernelLauncher:
        device_type = artifact.device_type or int(context.target.get_target_device_type())
        mismatch = device_mismatch(artifact, context)  # TVM's runtime would stop the process on it
        if mismatch is not None:
            return UnrunnableLauncher(artifact.kernel_name, mismatch)
        path = str((directory / LIBRARY).resolve())
        kinds = embedded_kinds(directory)
        if kinds is not None and "tvm" not in sys.modules:
            module = _load_without_tvm(path, kinds, artifact, device_type)
            if module is not None:
                return TVMFFILauncher(module, artifact, device_type)
        return TVMFFILauncher(_load_with_tvm(path, context, device_type), artifact, device_type)


def _load_with_tvm(path: str, context: BackendContext, device_type: int) -> Any:
    """The library through tvm_ffi, after what ``import tvm`` registers."""
    if device_type == HOST_DEVICE:
        load_tvm_runtime_library()
    else:
        import tvm  # noqa: F401 - its package loads the device runtimes

    # a target backend may need to hook the runtime first (CUDA: route the load-time
    # compile of embedded device source to its toolchain and cubin cache)
    prepare_device_runtime(context)
    import tvm_ffi

    return tvm_ffi.load_module(path)


def _load_without_tvm(path: str, kinds: list[str], artifact: CompiledArtifact, device_type: int) -> Any:
    """The library loaded with TVM's runtime libraries alone, or None where that is not
    enough. A device module that embeds source (built where TVM's CUDA runtime was not
    loaded, so TVM's module factory kept the source) compiles at load through the target
    backend's runtime hook, which has to come after ``import tvm``: tvm.support.nvcc
    registers its compile callback without ``override``, so a hook registered first would
    make every later ``import tvm`` in the process fail.

    Before tvm_ffi's import, the library is loaded and called through libtvm_ffi's C ABI
    (``direct.py``), and tvm_ffi is imported only for a call the fast binder did not check."""
    load_module_loaders(kinds)
    from .direct import CUDA, DirectFunction, ffi_library

    lib = ffi_library() if "tvm_ffi" not in sys.modules and device_type in (HOST_DEVICE, CUDA) else None
    if lib is not None:
        def through_tvm_ffi() -> Any:
            import tvm_ffi

            return tvm_ffi.load_module(path)[artifact.kernel_name]

        # a library it cannot load: tvm_ffi's way below raises the real error
        with contextlib.suppress(Exception):
            return DirectFunction(lib, path, artifact.kernel_name, artifact.params, device_type, through_tvm_ffi)
    import tvm_ffi

    try:
        return tvm_ffi.load_module(path)
    except Exception:  # noqa: BLE001 - no hook, no loader: the full path raises the real error
        return None

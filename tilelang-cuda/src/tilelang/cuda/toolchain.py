"""CUDA toolchain primitives: CUDA source -> cubin with NVRTC (cuda-bindings) or nvcc.

Owned by the target backend and declared in its manifest (``TOOLCHAIN``), so that execution
backends (tvm_ffi, nvrtc, cython) compile through it without importing this package. Cubins are
cached on disk by the hash of (source, arch, options, toolchain version): a second process
loads the kernel without compiling.

TILELANG_CUDA_TOOLCHAIN=nvrtc|nvcc|auto (default auto: NVRTC when its library loads, else nvcc)
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tilelang.errors import BackendUnavailableError, CompileError
from tilelang.plugin import DeviceToolchain

TOOLCHAIN_ENV = "TILELANG_CUDA_TOOLCHAIN"
OPTIONS = ("-O3", "--use_fast_math", "-std=c++17")
#: source with #line directives (tl.emit_line_directives) also gets a line table, which maps
#: the machine code to those lines (compute-sanitizer's reports, Nsight's source view)
_LINE_DIRECTIVE = re.compile(r'^#line \d+ "', re.MULTILINE)
#: upstream's ``compile_flags=`` (tilelang.compile, @tilelang.jit, T.annotate_compile_flags),
#: which arrive as this pass config: the codegen writes them on the source's first line, so
#: that every execution backend compiles the kernel with them and the cubin cache's key has them
COMPILE_FLAGS_CONFIG = "tl.device_compile_flags"
_FLAGS_LINE = "// tl.device_compile_flags: "
#: nvcc options NVRTC refuses that change nothing NVRTC makes: the optimization level (ptxas
#: optimizes fully by default), host-compiler warnings and options, nvcc's own switches
_NOT_FOR_NVRTC = re.compile(r"^(-O[0-3]|-W.*|--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda"
                            r"|-Xcompiler.*|--compiler-options.*|-ccbin.*|--keep.*|-keep.*)$")


def with_compile_flags(source: str, flags: Any) -> str:
    """``source`` with the kernel's extra compiler flags (a list, or one string as a shell
    would split it) on its first line; ``source`` itself when there are none."""
    if not flags:
        return source
    flags = shlex.split(flags) if isinstance(flags, str) else [str(f) for f in flags]
    return _FLAGS_LINE + json.dumps(flags) + "\n" + source


def compile_flags(source: str) -> list[str]:
    """The extra compiler flags ``source`` carries (with_compile_flags)."""
    if not source.startswith(_FLAGS_LINE):
        return []
    return list(json.loads(source[len(_FLAGS_LINE):source.index("\n")]))


def options_for(source: str) -> tuple[str, ...]:
    """nvcc's options for ``source``: OPTIONS, ``-lineinfo`` where it has ``#line``s, then the
    kernel's own compile flags."""
    lines = ("-lineinfo",) if _LINE_DIRECTIVE.search(source) else ()
    return (*OPTIONS, *lines, *compile_flags(source))


def nvrtc_options(options: tuple[str, ...]) -> list[str]:
    """nvcc's options as NVRTC takes them: ``--ptxas-options=a,b`` (and ``-Xptxas a,b``) as
    one option per ptxas option (NVRTC hands the value to ptxas whole), and the options in
    _NOT_FOR_NVRTC left out."""
    out: list[str] = []
    items = iter(options)
    for option in items:
        ptxas = re.fullmatch(r"(?:--ptxas-options|-Xptxas)(?:=(.*))?", option)
        if ptxas is not None:
            value = ptxas.group(1) if ptxas.group(1) is not None else next(items, "")
            out += [f"--ptxas-options={v}" for v in value.split(",") if v]
        elif not _NOT_FOR_NVRTC.match(option):
            out.append(option)
    return out


def cubin_cache_dir() -> Path:
    """Where cubins are cached (``<cache root>/cubin``; no I/O)."""
    from tilelang.plugin import cache_path

    return cache_path("cubin")


@functools.cache
def include_dirs() -> tuple[str, ...]:
    """CCCL (libcu++ for <cuda/std/...>), the cudart headers (cuda_fp16.h ...) and, where
    installed, cuRAND's (curand_kernel.h, for tl_curand.h)."""
    dirs: list[str] = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        for name in ("cccl", "cudart", "curand"):
            found = find_nvidia_header_directory(name)
            if found and str(found) not in dirs:
                dirs.append(str(found))
    except ImportError:
        pass
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    root = Path(nvcc).resolve().parent.parent
    for candidate in (root / "include" / "cccl", root / "include"):
        if candidate.is_dir() and str(candidate) not in dirs:
            dirs.append(str(candidate))
    return tuple(dirs)


CURAND_INCLUDE = "#include <curand_kernel.h>"


def curand_include_dir() -> str | None:
    """The include folder that holds cuRAND's curand_kernel.h, or None."""
    return next((d for d in include_dirs() if (Path(d) / "curand_kernel.h").is_file()), None)


def check_headers(source: str, name: str) -> None:
    """A CompileError saying how to install what ``source`` includes beyond the CUDA
    runtime's headers, where no include folder has it (cuRAND's curand_kernel.h, for
    T.rng_init's XORWOW and MRG32k3a generators)."""
    if CURAND_INCLUDE in source and curand_include_dir() is None:
        raise CompileError(f"kernel {name!r} draws from cuRAND's XORWOW or MRG32k3a generator "
                           "(T.rng_init(..., generator=...)), which needs cuRAND's headers, and none were found: "
                           "pip install 'tilelang-cuda[curand]' (the nvidia-curand wheel), or install the CUDA "
                           "toolkit's cuRAND; the default generator, Philox, needs none")


@functools.cache
def nvrtc_unavailable_reason() -> str | None:
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        return "cuda-bindings is not installed (pip install cuda-bindings)"
    try:
        err, _major, _minor = nvrtc.nvrtcVersion()
    except Exception as exc:  # noqa: BLE001 - the shared library itself is missing
        return f"the NVRTC library cannot be loaded: {exc}"
    return None if int(err) == 0 else f"nvrtcVersion failed: {err}"


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    default = "/usr/local/cuda/bin/nvcc"
    return default if os.access(default, os.X_OK) else None


def choose_toolchain() -> str:
    wanted = os.environ.get(TOOLCHAIN_ENV, "auto").strip().lower() or "auto"
    if wanted not in ("auto", "nvrtc", "nvcc"):
        raise CompileError(f"{TOOLCHAIN_ENV}={wanted!r}: use nvrtc, nvcc or auto")
    if wanted in ("auto", "nvrtc") and nvrtc_unavailable_reason() is None:
        return "nvrtc"
    if wanted in ("auto", "nvcc") and nvcc_path():
        return "nvcc"
    raise BackendUnavailableError(
        "no CUDA compiler here: NVRTC "
        f"({nvrtc_unavailable_reason() or 'not chosen'}) and nvcc (not on PATH); "
        "install cuda-bindings and nvidia-cuda-nvrtc, or the CUDA toolkit"
    )


def unavailable_reason() -> str | None:
    try:
        choose_toolchain()
    except BackendUnavailableError as err:
        return str(err)
    return None


# NVRTC compiles without cuda.h, which declares CUtensorMap (128 bytes, 64-byte aligned):
# the type of TMA kernels' __grid_constant__ tensor-map parameters (transform/tma.py)
_TENSOR_MAP_TYPE = ("struct alignas(64) CUtensorMap_st { unsigned long long opaque[16]; };\n"
                    "typedef struct CUtensorMap_st CUtensorMap;\n")


# TVM's CUDA prelude re-exports eight type traits into std for NVRTC (`#include
# <cuda/std/type_traits>` then `namespace std { using cuda::std::is_same; ... }`). Parsing that
# header is most of an NVRTC compile: 0.40 s of the canonical GEMM's 0.49 s (NVRTC 13.0,
# sm_90a; <cuda/std/cstdint> alone costs 6 ms). A kernel that names none of the traits compiles
# without it to the same machine code: .text, shared and parameter sections byte-identical;
# only libcu++'s unused constants (integral_constant<...>::value) leave the data sections.
_STD_TRAITS = re.compile(r"[ \t]*#include <cuda/std/type_traits>\n[ \t]*namespace std \{\n"
                         r"(?:[ \t]*using cuda::std::\w+;\n)+[ \t]*\}\n")
#: what the rest of a source may say of libcu++ for the block to go: its integer types
_CUDA_STD_INTEGERS = re.compile(r"cuda::std::u?int(?:8|16|32|64)_t\b")


def trim_for_nvrtc(source: str) -> str:
    """``source`` without the prelude's std type-trait block when nothing else uses it (a
    ``std::<trait>`` or ``cuda::std::`` name other than the integer types, or a ``using
    namespace``); else ``source`` unchanged."""
    found = _STD_TRAITS.search(source)
    if found is None:
        return source
    rest = source[:found.start()] + source[found.end():]
    traits = "|".join(re.findall(r"using cuda::std::(\w+);", found.group()))
    if (re.search(rf"(?<!cuda::)\bstd::(?:{traits})\b", rest) or "using namespace" in rest
            or "cuda::std::" in _CUDA_STD_INTEGERS.sub("", rest)):
        return source
    return rest


def _compile_nvrtc(source: str, arch: str, name: str) -> bytes:
    from cuda.bindings import nvrtc

    options = [f"-arch={arch}".encode(), b"-default-device", *[o.encode() for o in nvrtc_options(options_for(source))]]
    flags = compile_flags(source)
    source = trim_for_nvrtc(source)
    if "CUtensorMap" in source and "CUtensorMap_st {" not in source:
        source = _TENSOR_MAP_TYPE + source

    def check(result: Any, what: str, program: Any = None) -> Any:
        err = result[0]
        if int(err) != 0:
            log = ""
            if program is not None:
                _, size = nvrtc.nvrtcGetProgramLogSize(program)
                buf = b" " * size
                nvrtc.nvrtcGetProgramLog(program, buf)
                log = buf.decode(errors="replace")
            hint = ""
            if "unrecognized option" in log and flags:
                hint = (f"\n(the kernel's compile flags {flags} go to NVRTC; drop the one it "
                        f"does not know, or compile with nvcc: {TOOLCHAIN_ENV}=nvcc)")
            raise CompileError(f"NVRTC {what} failed for kernel {name!r} ({arch}): {err}\n{log}{hint}")
        return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)

    program = check(nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []), "create")
    options += [f"-I{d}".encode() for d in include_dirs()]
    try:
        check(nvrtc.nvrtcCompileProgram(program, len(options), options), "compile", program)
        size = check(nvrtc.nvrtcGetCUBINSize(program), "cubin size")
        cubin = b" " * size
        check(nvrtc.nvrtcGetCUBIN(program, cubin), "get cubin")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(program)


def _compile_nvcc(source: str, arch: str, name: str) -> bytes:
    nvcc = nvcc_path()
    assert nvcc is not None
    with tempfile.TemporaryDirectory(prefix="tilelang-nvcc-") as tmp:
        src, out = Path(tmp) / f"{name}.cu", Path(tmp) / f"{name}.cubin"
        src.write_text(source)
        cmd = [nvcc, "-cubin", f"-arch={arch}", *options_for(source), *[f"-I{d}" for d in include_dirs()],
               "-o", str(out), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"nvcc failed for kernel {name!r} ({arch}):\n$ {' '.join(cmd)}\n"
                               f"{proc.stderr}{proc.stdout}")
        return out.read_bytes()


#: what only sm_90a (not sm_90) compiles: wgmma, and a call of setmaxnreg (T.set_max_nreg),
#: which tl_device.h emits only under the architecture-specific feature macro (its
#: definition, tl_setmaxnreg_inc(n), comes with other families and does not count)
_SM90A_ONLY = re.compile(r"wgmma\.mma_async|tl_setmaxnreg_(?:inc|dec)\(\d+\)")


def arch_for_source(source: str, arch: str) -> str:
    """The arch to compile ``source`` for: sm_90's architecture-specific variant sm_90a
    when the kernel uses what exists only there (the cubin then runs on sm_90 GPUs alone,
    which is what an sm_90 target asked for)."""
    return arch + "a" if arch == "sm_90" and _SM90A_ONLY.search(source) else arch


def compile_cubin(source: str, arch: str, name: str = "kernel") -> bytes:
    """CUDA source -> cubin for ``arch`` (e.g. "sm_90"), through the disk cache."""
    arch = arch_for_source(source, arch)
    toolchain = choose_toolchain()
    key = hashlib.sha256("\0".join([toolchain, arch, *options_for(source), source]).encode()).hexdigest()
    # tilelang.cache: a folder only its owner may write (None: cache disabled or unusable),
    # and a digest checked before the bytes are used (a truncated cubin is rebuilt)
    from tilelang.plugin import cache_subdir, read_file, remove_stale, write_file

    directory = cache_subdir("cubin")
    path = None if directory is None else directory / f"{key}.cubin"
    cached = None if path is None else read_file(path, repair=True)
    if cached is not None:
        return cached
    check_headers(source, name)
    compile_fn = _compile_nvrtc if toolchain == "nvrtc" else _compile_nvcc
    cubin = compile_fn(source, arch, name)
    if directory is not None and path is not None:
        remove_stale(directory)  # temporaries of killed writers
        try:
            write_file(path, cubin)  # atomic: concurrent compilers of one kernel agree on the bytes
        except OSError as err:
            from tilelang.plugin import warn_unavailable

            warn_unavailable(directory, err)
    return cubin


def compile_for_target(source: str, target: Any, name: str = "kernel") -> bytes:
    """The toolchain's compile step: source + normalized target -> cubin."""
    from .target import arch_of

    return compile_cubin(source, arch_of(target), name)


def _tvm_callback_cuda_compile(code: str, *_: Any) -> bytes:
    from .target import DEFAULT_ARCH, device_arch

    return compile_cubin(code, device_arch() or DEFAULT_ARCH)


def prepare_tvm_runtime() -> None:
    """The toolchain's runtime hook: TVM's CUDA runtime module compiles embedded source
    when it is loaded, through the global ``tvm_callback_cuda_compile``; route that to this
    toolchain (and its cubin cache) for the GPU the process runs on. Registered again before
    every load, since importing tvm.support.nvcc installs TVM's own callback."""
    import tvm_ffi

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", _tvm_callback_cuda_compile, override=True)


TOOLCHAIN = DeviceToolchain("NVRTC/nvcc", compile=compile_for_target, unavailable_reason=unavailable_reason,
                            prepare_runtime=prepare_tvm_runtime, cannot_run_here="tilelang.cuda.target:cannot_run_here")

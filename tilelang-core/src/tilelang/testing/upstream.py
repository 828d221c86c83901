"""Upstream TileLang's test helpers (``tilelang.testing.requires_cuda``, ``main``, ...), so
that upstream's test files run here unchanged.

Each ``requires_*`` is a pytest ``skipif`` mark decided when the decorator is applied (test
collection), from what is installed and present: a device the driver (or torch) reports,
and an installed target backend that compiles for it. Nothing here imports torch until a
helper that needs it runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import importlib.util
import inspect
import random
import sys
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from ..backend.hints import TARGET_EXTRAS, install_hint
from ..backend.registry import REGISTRY


class Requirement:
    """A named precondition usable as ``@requirement`` (on a test function or class) and,
    as upstream's TVM-derived helpers allow, ``requirement.marks()``."""

    def __init__(self, name: str, why_not: Callable[[], str | None]) -> None:
        self.name = name
        self._why_not = why_not

    @property
    def reason(self) -> str | None:
        """None when met, else why not. The probes behind it (driver, torch) run once per
        process; asking again only re-reads the backend registry."""
        return self._why_not()

    def marks(self) -> list[pytest.MarkDecorator]:
        return [pytest.mark.skipif(self.reason is not None, reason=f"{self.name}: {self.reason}")]

    def __call__(self, func: Any) -> Any:
        return _apply(func, self.marks())

    def __bool__(self) -> bool:
        return self.reason is None

    def __repr__(self) -> str:
        return f"<Requirement {self.name}: {'met' if self else self.reason}>"


def _apply(func: Any, marks: Sequence[pytest.MarkDecorator]) -> Any:
    for mark in marks:
        func = mark(func)
    return func


def _backend_missing(*kinds: str) -> str | None:
    """None when an installed target backend compiles for one of these TVM target kinds."""
    if any(kind in m.target_kinds for m in REGISTRY.backends.values() for kind in kinds):
        return None
    return f"no installed target backend compiles for {'/'.join(kinds)} ({install_hint(kinds[0], TARGET_EXTRAS)})"


# -- CUDA ---------------------------------------------------------------------------------
# CUDA driver API (cuda.h): cuInit, cuDeviceGetCount, cuDeviceGet, cuDeviceGetAttribute;
# attributes 75/76 are CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR.
_CC_MAJOR, _CC_MINOR = 75, 76


@functools.cache
def cuda_compute_versions() -> tuple[tuple[int, int], ...]:
    """(major, minor) of every CUDA GPU here: from the driver, else from torch if installed;
    () when there is none."""
    versions = _driver_compute_versions()
    if versions is None and importlib.util.find_spec("torch") is not None:
        import torch

        if torch.cuda.is_available() and torch.version.hip is None:
            versions = tuple(torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count()))
    return versions or ()


def _driver_compute_versions() -> tuple[tuple[int, int], ...] | None:
    """None when the driver library cannot be loaded or initialized."""
    name = "nvcuda.dll" if sys.platform.startswith("win32") else "libcuda.so.1"
    try:
        lib = ctypes.CDLL(name)
    except OSError:
        found = ctypes.util.find_library("cuda")
        if found is None:
            return None
        try:
            lib = ctypes.CDLL(found)
        except OSError:
            return None
    if lib.cuInit(0) != 0:
        return None
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    versions = []
    for ordinal in range(count.value):
        device, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
        if (lib.cuDeviceGet(ctypes.byref(device), ordinal) != 0
                or lib.cuDeviceGetAttribute(ctypes.byref(major), _CC_MAJOR, device) != 0
                or lib.cuDeviceGetAttribute(ctypes.byref(minor), _CC_MINOR, device) != 0):
            return None
        versions.append((major.value, minor.value))
    return tuple(versions)


def _why_no_cuda() -> str | None:
    if not cuda_compute_versions():
        return "no CUDA GPU here (neither the CUDA driver nor torch reports one)"
    return _backend_missing("cuda")


requires_cuda = Requirement("requires_cuda", _why_no_cuda)

_COMPARISONS: dict[str, Callable[[tuple[int, int], tuple[int, int]], bool]] = {
    "ge": lambda have, want: have >= want,
    "gt": lambda have, want: have > want,
    "le": lambda have, want: have <= want,
    "lt": lambda have, want: have < want,
    "eq": lambda have, want: have == want,
}


def requires_cuda_compute_version(major_version: int, minor_version: int = 0,
                                  mode: str = "ge") -> Callable[[Any], Any]:
    """Run only where GPU 0's compute capability compares to (major, minor) by ``mode``
    (ge, gt, le, lt, eq); implies requires_cuda."""
    if mode not in _COMPARISONS:
        raise ValueError(f"requires_cuda_compute_version: mode {mode!r} is not one of {sorted(_COMPARISONS)}")
    want = (major_version, minor_version)
    versions = cuda_compute_versions()
    have = versions[0] if versions else (0, 0)
    marks = [
        pytest.mark.skipif(
            not _COMPARISONS[mode](have, want),
            reason=f"needs CUDA compute capability {mode} {want[0]}.{want[1]}; "
                   f"this machine has {have[0]}.{have[1]}",
        ),
        *requires_cuda.marks(),
    ]
    return lambda func: _apply(func, marks)


def requires_cuda_compute_version_ge(major_version: int, minor_version: int = 0) -> Callable[[Any], Any]:
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version: int, minor_version: int = 0) -> Callable[[Any], Any]:
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_le(major_version: int, minor_version: int = 0) -> Callable[[Any], Any]:
    return requires_cuda_compute_version(major_version, minor_version, "le")


def requires_cuda_compute_version_lt(major_version: int, minor_version: int = 0) -> Callable[[Any], Any]:
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_eq(major_version: int, minor_version: int = 0) -> Callable[[Any], Any]:
    return requires_cuda_compute_version(major_version, minor_version, "eq")


# -- ROCm, Metal, LLVM, packages ----------------------------------------------------------
@functools.cache
def rocm_arch() -> str | None:
    """gfx name of ROCm GPU 0 as torch (a ROCm build) reports it, or None."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    if torch.version.hip is None or not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_properties(0).gcnArchName).split(":")[0]


def _why_no_rocm() -> str | None:
    if rocm_arch() is None:
        return "no ROCm GPU here (needs a ROCm build of torch that sees one)"
    return _backend_missing("rocm", "hip")


def _is_cdna(arch: str | None) -> bool:
    # CDNA 1-4: gfx908 (MI100), gfx90a (MI200), gfx94x (MI300), gfx950 (MI350)
    return arch is not None and (arch in ("gfx908", "gfx90a") or arch.startswith(("gfx94", "gfx95")))


def _why_no_metal() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (Metal devices are found through torch.backends.mps)"
    import torch

    if not torch.backends.mps.is_available():
        return "no Metal (MPS) device here"
    return _backend_missing("metal")


def _why_no_llvm() -> str | None:
    import tvm

    if not tvm.runtime.enabled("llvm"):
        return "this TVM was built without LLVM"
    return _backend_missing("llvm")


requires_rocm = Requirement("requires_rocm", _why_no_rocm)
requires_metal = Requirement("requires_metal", _why_no_metal)
requires_llvm = Requirement("requires_llvm", _why_no_llvm)
requires_cdna = Requirement(
    "requires_cdna", lambda: _why_no_rocm() or (None if _is_cdna(rocm_arch()) else f"GPU {rocm_arch()} is not CDNA"))
requires_gfx950 = Requirement(
    "requires_gfx950", lambda: _why_no_rocm() or (None if rocm_arch() == "gfx950" else f"GPU {rocm_arch()} is not gfx950"))
requires_cuda_or_cdna = Requirement(
    "requires_cuda_or_cdna",
    lambda: None if (requires_cuda or requires_cdna) else f"{requires_cuda.reason}; {requires_cdna.reason}")


def requires_package(*packages: str) -> Callable[[Any], Any]:
    """Run only where every named package can be imported."""
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    mark = pytest.mark.skipif(bool(missing), reason=f"needs package(s) {missing} (not installed)")
    return lambda func: mark(func)


# -- running and comparing ----------------------------------------------------------------
def main() -> None:
    """``if __name__ == "__main__": tilelang.testing.main()``: run pytest on the calling
    file, with this script's command-line arguments."""
    caller = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([str(caller), *sys.argv[1:]]))


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, numpy's and (when installed) torch's generators."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.manual_seed(seed)  # seeds every CUDA device's generator too


def torch_assert_close(actual: Any, expected: Any, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False,
                       equal_nan: bool = True, check_device: bool = True, check_dtype: bool = True,
                       check_layout: bool = True, check_stride: bool = False,
                       base_name: str = "LHS", ref_name: str = "RHS") -> bool:
    """Like torch.testing.assert_close, but up to ``max_mismatched_ratio`` of the elements
    may lie outside |actual - expected| <= atol + rtol * |expected| (upstream's helper:
    low-precision kernels round a few elements differently). Raises AssertionError."""
    import numpy as np
    import torch

    for check, attr in ((check_device, "device"), (check_dtype, "dtype"), (check_layout, "layout")):
        if check and getattr(actual, attr) != getattr(expected, attr):
            raise AssertionError(f"{attr} differs: {base_name} {getattr(actual, attr)}, "
                                 f"{ref_name} {getattr(expected, attr)}")
    if check_stride and actual.stride() != expected.stride():
        raise AssertionError(f"stride differs: {base_name} {actual.stride()}, {ref_name} {expected.stride()}")
    if actual.shape != expected.shape:
        raise AssertionError(f"shape differs: {base_name} {tuple(actual.shape)}, {ref_name} {tuple(expected.shape)}")
    # compare in a common dtype, at least float32 (CPU half arithmetic is partial)
    common = torch.promote_types(torch.promote_types(actual.dtype, expected.dtype), torch.float32)
    a = actual.detach().to(device="cpu", dtype=common)
    b = expected.detach().to(device="cpu", dtype=common)
    mismatched = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    count, total = int(mismatched.sum()), a.numel()
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"mismatched elements: {count} / {total} (allowed: {allowed})")
    if count <= allowed:
        return True
    first = int(torch.nonzero(mismatched.reshape(-1))[0])
    index = [int(i) for i in np.unravel_index(first, tuple(a.shape))]
    diff = (a - b).abs()
    raise AssertionError(
        f"{count} of {total} elements differ ({100 * count / total:.2f}%), more than the "
        f"{allowed} allowed (max_mismatched_ratio={max_mismatched_ratio}, rtol={rtol}, atol={atol}); "
        f"first at {index}: {base_name}={a.reshape(-1)[first].item()}, "
        f"{ref_name}={b.reshape(-1)[first].item()}; largest absolute difference "
        f"{diff.nan_to_num().max().item()}"
    )


# -- upstream's perf-regression scripts (examples/*/regression_*.py) -----------------------
_RESULTS: list[tuple[str, float]] = []


def process_func(func: Callable[..., float], name: str | None = None, /, **kwargs: Any) -> None:
    """Run a benchmark function (it returns a latency) and record the result under ``name``
    (default: its module, without a ``regression_`` prefix)."""
    label = name if name is not None else getattr(func, "__module__", "<unknown>")
    label = label.removeprefix("regression_")
    _RESULTS.append((label, float(func(**kwargs))))


def regression(prefixes: Sequence[str] = ("regression_",), verbose: bool = True) -> list[tuple[str, float]]:
    """Run every function of the calling module whose name starts with one of ``prefixes``,
    then print (when verbose) and return what they recorded through process_func."""
    caller = sys._getframe(1).f_globals
    _RESULTS.clear()
    for fname, func in list(caller.items()):
        if inspect.isfunction(func) and fname.startswith(tuple(prefixes)):
            func()
    if verbose:
        for label, latency in _RESULTS:
            print(f"{label}: {latency}")
    return list(_RESULTS)


__all__ = [
    "Requirement",
    "cuda_compute_versions",
    "main",
    "process_func",
    "regression",
    "requires_cdna",
    "requires_cuda",
    "requires_cuda_compute_version",
    "requires_cuda_compute_version_eq",
    "requires_cuda_compute_version_ge",
    "requires_cuda_compute_version_gt",
    "requires_cuda_compute_version_le",
    "requires_cuda_compute_version_lt",
    "requires_cuda_or_cdna",
    "requires_gfx950",
    "requires_llvm",
    "requires_metal",
    "requires_package",
    "requires_rocm",
    "rocm_arch",
    "set_random_seed",
    "torch_assert_close",
]

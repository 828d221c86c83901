"""Names that belong to first-party distributions, and how the loader protects them.

ARCHITECTURE.md section 3: first-party names are reserved. A third-party plugin that
claims one of them (as a target or execution backend name, an alias, a detector or an
entry-point name) is refused and the first party keeps it, so no installed distribution
can switch off a built-in by taking its name. The table also covers distributions not
installed yet (ROCm, CuTeDSL): a vendor cannot squat a name a first-party release will use.
Data, not dispatch: nothing here selects behaviour by kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: every distribution this repository publishes (or will publish) as a tilelang plugin
FIRST_PARTY_DISTRIBUTIONS = frozenset({
    "tilelang-core",
    "tilelang-cuda",
    "tilelang-rocm",
    "tilelang-cutedsl",
    "tilelang-exec-nvrtc",
    "tilelang-exec-cython",
})

#: reserved name -> the first-party distribution it belongs to
RESERVED_NAMES: Mapping[str, str] = MappingProxyType({
    "cpu": "tilelang-core",
    "tvm_ffi": "tilelang-core",
    "cuda": "tilelang-cuda",
    "gpu": "tilelang-cuda",  # the CUDA backend's alias
    "rocm": "tilelang-rocm",
    "hip": "tilelang-rocm",
    "cutedsl": "tilelang-cutedsl",
    "nvrtc": "tilelang-exec-nvrtc",
    "cython": "tilelang-exec-cython",
})


def is_first_party(distribution: str) -> bool:
    return distribution in FIRST_PARTY_DISTRIBUTIONS


def normalized_distribution(name: str) -> str:
    """PEP 503 form, so that 'TileLang_Core' and 'tilelang-core' compare equal."""
    return name.lower().replace("_", "-").replace(".", "-")


def reserved_owner(name: str) -> str | None:
    """The first-party distribution a name is reserved for, or None."""
    return RESERVED_NAMES.get(name)

"""Install hints: which pip extra provides a first-party backend. Data, not dispatch."""

from __future__ import annotations

# target kind or backend name -> the pip requirement that installs its backend
TARGET_EXTRAS: dict[str, str] = {
    "cuda": "tilelang[cuda]",
    "hip": "tilelang[rocm]",
    "rocm": "tilelang[rocm]",
    "cutedsl": "tilelang[cutedsl]",
}
EXECUTION_EXTRAS: dict[str, str] = {
    "nvrtc": "tilelang[nvrtc]",
    "cython": "tilelang[cython]",
    "cutedsl": "tilelang[cutedsl]",
}
# names whose first-party distribution is not released yet: no extra can install them
PLANNED: dict[str, str] = {}


def install_hint(name: str, table: dict[str, str]) -> str:
    extra = table.get(name)
    if extra is not None:
        return f"pip install '{extra}'"
    if name in PLANNED:
        return f"no released distribution provides it yet ({PLANNED[name]} is planned)"
    return "install a distribution that registers it under the 'tilelang.plugins' entry points"

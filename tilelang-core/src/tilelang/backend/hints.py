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


def install_hint(name: str, table: dict[str, str]) -> str:
    extra = table.get(name)
    if extra is None:
        return "install a distribution that registers it under the 'tilelang.plugins' entry points"
    return f"pip install '{extra}'"

"""cutedsl targets: CUDA targets that carry the key ``cutedsl``.

Two manifests own the ``cuda`` kind: tilelang-cuda's predicate accepts targets without the
key, this one's accepts targets with it, so resolution never depends on registration
order (docs/architecture-notes.md item 27)."""

from __future__ import annotations

import importlib.util
from typing import Any

KEY = "cutedsl"


def is_cutedsl_target(target: Any) -> bool:
    return KEY in [str(k) for k in target.keys]


def default_target() -> dict[str, Any]:
    """``target="cutedsl"``: this machine's GPU (or the CUDA backend's default arch)."""
    from tilelang.cuda.target import default_cuda_target

    config = dict(default_cuda_target())
    config["keys"] = [KEY, "cuda", "gpu"]
    return config


def canonicalize(target: Any) -> Any:
    """A cuda target routed here (or asked for by alias): the CUDA arch rules, plus the key."""
    from tilelang.cuda.target import canonicalize as cuda_canonicalize
    from tvm.target import Target

    target = cuda_canonicalize(target)
    if is_cutedsl_target(target):
        return target
    config = dict(target.export())
    config["keys"] = [KEY, *[str(k) for k in config.get("keys", ())]]
    host = config.pop("host", None)
    return Target(config, host=host) if host else Target(config)


def dsl_unavailable_reason() -> str | None:
    """None when CuTe DSL can be imported (checked without importing it), else why not."""
    try:
        found = importlib.util.find_spec("cutlass") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return ("NVIDIA CuTe DSL is not installed (the 'cutlass' package); to fix: "
                "pip install 'tilelang-cutedsl[dsl]' (nvidia-cutlass-dsl 4.8)")
    return None


def unavailable_reason() -> str | None:
    """Why the cutedsl execution backend cannot run kernels here (no CuTe DSL, no GPU)."""
    from tilelang.cuda.target import driver_unavailable_reason

    return dsl_unavailable_reason() or driver_unavailable_reason()

"""ROCm targets: the ``gfx`` arch (TVM's ``mcpu``), AMD GPU detection without a ROCm SDK
import, and canonicalization.

TVM's ``rocm`` target kind carries the arch as ``mcpu`` (``{"kind": "rocm", "mcpu":
"gfx90a"}``) and a 64-lane wavefront (``thread_warp_size``); ``target="hip"`` is this
backend's alias for the same kind.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from typing import Any

from tilelang.errors import LanguageError

DEFAULT_ARCH = "gfx90a"
WAVEFRONT = 64  # lanes per wavefront on CDNA (gfx9); RDNA's wave32 is not targeted here
# CDNA2/CDNA3: the archs whose MFMA instructions the GEMM lowering emits
MFMA_ARCHS = ("gfx90a", "gfx940", "gfx941", "gfx942")
_GFX = re.compile(r"^gfx([0-9]{2,3}[0-9a-f])(:[a-z0-9+:-]+)?$")
_KFD = "/dev/kfd"


def parse_arch(text: str) -> str:
    """``gfx90a`` (target-ID features such as ``:xnack-`` are kept) or a LanguageError
    naming the expected form."""
    arch = str(text).strip().lower()
    if not _GFX.match(arch):
        raise LanguageError(
            f"ROCm arch {text!r} is not an AMD GPU processor name: write it as LLVM names it, "
            "e.g. 'gfx90a' (MI200), 'gfx942' (MI300) or 'gfx1030'"
        )
    return arch


def has_mfma(arch: str) -> bool:
    return arch.split(":")[0] in MFMA_ARCHS


def _agents_from_tools() -> list[str]:
    """The gfx names of this machine's GPU agents (rocm_agent_enumerator, else rocminfo);
    gfx000 is the CPU agent."""
    for tool, args in (("rocm_agent_enumerator", []), ("rocminfo", [])):
        path = shutil.which(tool) or (f"/opt/rocm/bin/{tool}" if os.access(f"/opt/rocm/bin/{tool}", os.X_OK)
                                      else None)
        if path is None:
            continue
        try:
            out = subprocess.run([path, *args], capture_output=True, text=True, timeout=20, check=False).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        found = [m for m in re.findall(r"\bgfx[0-9]{2,3}[0-9a-f]\b", out) if m != "gfx000"]
        if found:
            return found
    return []


@functools.cache
def _probe() -> tuple[str | None, str | None]:
    """(arch of the first AMD GPU, None) or (None, why there is none). Probed once."""
    if not os.path.exists(_KFD):
        return None, f"no AMD GPU on this machine ({_KFD}, the ROCm kernel driver's device, does not exist)"
    agents = _agents_from_tools()
    if not agents:
        return None, (f"{_KFD} exists but neither rocm_agent_enumerator nor rocminfo reports a GPU agent; "
                      "install rocminfo, or check that this user may open /dev/kfd (group 'render')")
    return agents[0], None


def gpu_unavailable_reason() -> str | None:
    """None when an AMD GPU is visible to this process, else why not."""
    return _probe()[1]


def detect() -> dict[str, Any] | None:
    """Target detector: the first AMD GPU's target, or None when there is none."""
    arch, _ = _probe()
    return {"kind": "rocm", "mcpu": arch} if arch else None


def default_rocm_target() -> dict[str, Any]:
    """``target="hip"``: this machine's GPU, or DEFAULT_ARCH for code generation (a TVM rocm
    target without ``mcpu`` gets TVM's own choice: rocminfo's answer, else gfx900)."""
    return detect() or {"kind": "rocm", "mcpu": DEFAULT_ARCH}


def canonicalize(target: Any) -> Any:
    """Give a rocm target without a gfx ``mcpu`` the detected (or default) arch; refuse an
    mcpu that is not a gfx name."""
    from tvm.target import Target

    config = dict(target.export())
    mcpu = str(config.get("mcpu", "") or "")
    if mcpu:
        parse_arch(mcpu)
        return target
    config["mcpu"] = _probe()[0] or DEFAULT_ARCH
    host = config.pop("host", None)
    return Target(config, host=host) if host else Target(config)


def arch_of(target: Any) -> str:
    return parse_arch(str(target.export().get("mcpu", "") or DEFAULT_ARCH))

"""``tilelang.language.fp8``: which 8-bit float dtype the current platform's kernels use.

NVIDIA GPUs (and torch builds without ROCm) use the OCP formats ``float8_e4m3fn`` /
``float8_e5m2``. AMD's CDNA3 (gfx94x) implements the "fnuz" variants (no negative zero,
one NaN encoding); gfx950 implements the OCP formats. The platform is read from torch
(``torch.version.hip`` and the device's ``gcnArchName``), as upstream does, since this is
about the tensors the caller will make, not about a compile target.
"""

from __future__ import annotations

from typing import Any

from ..errors import LanguageError
from .dtypes import dtype

_FORMATS = ("e4m3", "e5m2")
#: (OCP name, fnuz name) per format
_NAMES = {"e4m3": ("float8_e4m3fn", "float8_e4m3fnuz"), "e5m2": ("float8_e5m2", "float8_e5m2fnuz")}


def _uses_fnuz(torch: Any) -> bool:
    if getattr(torch.version, "hip", None) is None:
        return False
    if not torch.cuda.is_available():  # a ROCm build without a GPU: CDNA3's formats
        return True
    arch = getattr(torch.cuda.get_device_properties(0), "gcnArchName", "")
    # gfx950 (CDNA4) moved to the OCP encodings
    return not arch.startswith("gfx950")


def determine_fp8_type(fp8_format: str = "e4m3") -> dtype:
    """``T.float8_e4m3fn`` / ``T.float8_e5m2`` (or their ``fnuz`` forms on ROCm GPUs
    before gfx950) for ``fp8_format`` "e4m3" or "e5m2"."""
    if fp8_format not in _FORMATS:
        raise LanguageError(f"determine_fp8_type: unknown FP8 format {fp8_format!r}; use 'e4m3' or 'e5m2'")
    try:
        import torch
    except ImportError:  # no torch: no ROCm tensors either
        return dtype(_NAMES[fp8_format][0])
    ocp, fnuz = _NAMES[fp8_format]
    return dtype(fnuz if _uses_fnuz(torch) else ocp)


def determine_torch_fp8_type(fp8_format: str = "e4m3") -> Any:
    """The torch dtype matching ``determine_fp8_type(fp8_format)``."""
    import torch

    name = str(determine_fp8_type(fp8_format))
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise LanguageError(f"determine_torch_fp8_type: this torch ({torch.__version__}) has no dtype "
                            f"torch.{name}; upgrade torch to make {fp8_format} tensors")
    return value


__all__ = ["determine_fp8_type", "determine_torch_fp8_type"]

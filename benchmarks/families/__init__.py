"""Benchmark families (issue 14, item 2; the second seed's list plus elementwise, softmax
and rmsnorm): one module per family, each with ``cases(quick: bool) -> list[Case]``
(``common.Case``). ``benchmarks/families.py`` runs them; this package only names them."""

from __future__ import annotations

import importlib
from types import ModuleType

FAMILIES = ("matmul", "bmm", "linear_bias_act", "fmha", "mla_decoding", "rope", "elementwise", "softmax",
            "rmsnorm", "matmul_fp8")


def family_module(name: str) -> ModuleType:
    """The module of one family; an unknown name is refused with the list of known ones."""
    if name not in FAMILIES:
        raise ValueError(f"unknown benchmark family {name!r}; the families are: {', '.join(FAMILIES)}")
    return importlib.import_module(f"{__name__}.{name}")

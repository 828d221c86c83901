"""``GeneralReductionTemplate(structure="SSR", shape=, dtype=)``: the sum of a tensor over
its ``R`` axes (``structure`` names each axis S, spatial, or R, reduced)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import LanguageError
from .base import BaseTemplate, positive


@dataclass
class GeneralReductionTemplate(BaseTemplate):
    structure: str = ""
    shape: list[int] | None = None
    dtype: str = "float16"
    arch: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.shape or len(self.structure) != len(self.shape) or set(self.structure) - {"S", "R"}:
            raise LanguageError("GeneralReductionTemplate: structure is one letter per axis of shape, S "
                                f"(kept) or R (reduced); got structure={self.structure!r}, shape={self.shape!r}")
        if "S" not in self.structure:
            raise LanguageError(f"GeneralReductionTemplate: structure {self.structure!r} keeps no axis; "
                                "at least one must be S")
        positive("GeneralReductionTemplate", **{f"shape[{i}]": e for i, e in enumerate(self.shape)})
        self.dtype = str(self.dtype)

    def equivalent_function(self) -> Any:
        from tvm import te

        A = te.placeholder(tuple(self.shape), name="A", dtype=self.dtype)
        kept = [e for c, e in zip(self.structure, self.shape) if c == "S"]
        reduced = [te.reduce_axis((0, e), name=f"r{i}") for i, (c, e) in enumerate(zip(self.structure, self.shape))
                   if c == "R"]

        def body(*index: Any) -> Any:
            spatial, rs, full = iter(index), iter(reduced), []
            for c in self.structure:
                full.append(next(spatial) if c == "S" else next(rs))
            return te.sum(A[tuple(full)], axis=reduced) if reduced else A[tuple(full)]

        B = te.compute(tuple(kept), body, name="B")
        return te.create_prim_func([A, B])

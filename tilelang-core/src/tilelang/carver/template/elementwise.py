"""``ElementwiseTemplate(shape=, dtype=)``: C = A + B over a tensor of ``shape``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import LanguageError
from .base import BaseTemplate, positive


@dataclass
class ElementwiseTemplate(BaseTemplate):
    shape: list[int] | None = None
    dtype: str = "float16"
    arch: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.shape:
            raise LanguageError("ElementwiseTemplate: shape must be a non-empty list of positive ints, "
                                f"got {self.shape!r}")
        positive("ElementwiseTemplate", **{f"shape[{i}]": e for i, e in enumerate(self.shape)})
        self.dtype = str(self.dtype)

    def equivalent_function(self) -> Any:
        from tvm import te

        shape = tuple(self.shape)
        A = te.placeholder(shape, name="A", dtype=self.dtype)
        B = te.placeholder(shape, name="B", dtype=self.dtype)
        C = te.compute(shape, lambda *i: A[i] + B[i], name="C")
        return te.create_prim_func([A, B, C])

"""``GEMVTemplate(N=, K=, ...)``: C[n] = sum_k A[k] * B[n, k] (B stored (N, K)), accumulated
in ``accum_dtype``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .base import BaseTemplate, positive


@dataclass
class GEMVTemplate(BaseTemplate):
    N: int | None = None
    K: int | None = None
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False
    arch: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        positive("GEMVTemplate", N=self.N, K=self.K)
        self.in_dtype, self.out_dtype, self.accum_dtype = map(str, (self.in_dtype, self.out_dtype, self.accum_dtype))

    def equivalent_function(self) -> Any:
        from tvm import te

        A = te.placeholder((self.K,), name="A", dtype=self.in_dtype)
        B = te.placeholder((self.N, self.K), name="B", dtype=self.in_dtype)
        k = te.reduce_axis((0, self.K), name="k")
        acc = te.compute((self.N,), lambda n: te.sum(A[k].astype(self.accum_dtype) * B[n, k].astype(self.accum_dtype),
                                                     axis=[k]), name="acc")
        args = [A, B]
        if self.with_bias:
            bias = te.placeholder((self.N,), name="Bias", dtype=self.out_dtype)
            C = te.compute((self.N,), lambda n: acc[n].astype(self.out_dtype) + bias[n], name="C")
            args.append(bias)
        else:
            C = te.compute((self.N,), lambda n: acc[n].astype(self.out_dtype), name="C")
        return te.create_prim_func([*args, C])

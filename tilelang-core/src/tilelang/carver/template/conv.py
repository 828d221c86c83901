"""``ConvTemplate(N=, C=, H=, W=, F=, K=, S=, D=, P=, ...)``: a 2-d convolution, NHWC input
(N, H, W, C), weights (K, K, C, F), stride S, dilation D, padding P, NHWC output.

On a device with matrix units for ``in_dtype`` the hints are the GEMM search's for the
implicit GEMM (M = N * OH * OW output pixels, N = F filters, K = K * K * C taps), else the
default search over the convolution's own loop nest."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..roller.hint import Hint
from .base import BaseTemplate, positive


@dataclass
class ConvTemplate(BaseTemplate):
    N: int | None = None
    C: int | None = None
    H: int | None = None
    W: int | None = None
    F: int | None = None
    K: int | None = None
    S: int = 1
    D: int = 1
    P: int = 0
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False
    arch: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        positive("ConvTemplate", N=self.N, C=self.C, H=self.H, W=self.W, F=self.F, K=self.K, S=self.S, D=self.D)
        if isinstance(self.P, bool) or not isinstance(self.P, int) or self.P < 0:
            from ...errors import LanguageError

            raise LanguageError(f"ConvTemplate: P must be an int >= 0, got {self.P!r}")
        self.in_dtype, self.out_dtype, self.accum_dtype = map(str, (self.in_dtype, self.out_dtype, self.accum_dtype))

    @property
    def output_hw(self) -> tuple[int, int]:
        span = self.D * (self.K - 1) + 1
        return ((self.H + 2 * self.P - span) // self.S + 1, (self.W + 2 * self.P - span) // self.S + 1)

    def equivalent_function(self) -> Any:
        from tvm import te, tirx

        oh, ow = self.output_hw
        data = te.placeholder((self.N, self.H, self.W, self.C), name="data", dtype=self.in_dtype)
        weight = te.placeholder((self.K, self.K, self.C, self.F), name="weight", dtype=self.in_dtype)
        P, H, W = self.P, self.H, self.W
        pad = te.compute((self.N, H + 2 * P, W + 2 * P, self.C),
                         lambda n, h, w, c: tirx.if_then_else(
                             tirx.all(h >= P, h < H + P, w >= P, w < W + P), data[n, h - P, w - P, c],
                             tirx.const(0, self.in_dtype)), name="pad")
        kh, kw, c = (te.reduce_axis((0, e), name=n) for e, n in ((self.K, "kh"), (self.K, "kw"), (self.C, "c")))
        acc = self.accum_dtype
        out = te.compute(
            (self.N, oh, ow, self.F),
            lambda n, h, w, f: te.sum(pad[n, h * self.S + kh * self.D, w * self.S + kw * self.D, c].astype(acc)
                                      * weight[kh, kw, c, f].astype(acc), axis=[kh, kw, c]), name="conv")
        C = te.compute(out.shape, lambda *i: out[i].astype(self.out_dtype), name="C")
        return te.create_prim_func([data, weight, C])

    def _hints(self, topk: int) -> list[Hint]:
        from ..roller.policy.matmul import matmul_hints

        if self.arch.warp_size == 1 or (self.in_dtype, self.accum_dtype) not in self.arch.tensorcore_precisions():
            return super()._hints(topk)
        oh, ow = self.output_hw
        hints = matmul_hints(self.N * oh * ow, self.F, self.K * self.K * self.C, self.in_dtype, self.accum_dtype,
                             self.arch, topk)
        for hint in hints:
            hint.arch, hint.use_async = self.arch, hint.pipeline_stage > 1
        return hints

"""``MatmulTemplate(M=, N=, K=, ...).with_arch(arch).recommend_hints(topk=)``: GEMM tile
configurations for a device (``tilelang.carver.roller.policy``: a small search, not
upstream's roller)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..roller.hint import Hint
from ..roller.policy.default import Access, TileProblem, default_hints
from ..roller.policy.matmul import matmul_hints
from .base import BaseTemplate, positive


@dataclass
class MatmulTemplate(BaseTemplate):
    """C[M, N] = A[M, K] @ B[K, N] (``trans_A`` / ``trans_B``: stored transposed; B is
    (N, K) by default, as upstream's template has it), accumulated in ``accum_dtype``."""

    M: int | None = None
    N: int | None = None
    K: int | None = None
    trans_A: bool = False
    trans_B: bool = True
    in_dtype: str = "float16"
    out_dtype: str = "float16"
    accum_dtype: str = "float16"
    with_bias: bool = False
    arch: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        positive("MatmulTemplate", M=self.M, N=self.N, K=self.K)
        self.in_dtype, self.out_dtype, self.accum_dtype = map(str, (self.in_dtype, self.out_dtype,
                                                                    self.accum_dtype))

    def equivalent_function(self) -> Any:
        """The GEMM as a PrimFunc (A, B[, Bias], C): the computation the hints are for."""
        import tilelang.language as T

        M, N, K = self.M, self.N, self.K
        a_shape = (K, M) if self.trans_A else (M, K)
        b_shape = (N, K) if self.trans_B else (K, N)
        in_dtype, out_dtype, accum_dtype = self.in_dtype, self.out_dtype, self.accum_dtype
        trans_A, trans_B = self.trans_A, self.trans_B

        @T.prim_func
        def matmul(A: T.Tensor(a_shape, in_dtype), B: T.Tensor(b_shape, in_dtype),
                   C: T.Tensor((M, N), out_dtype)):
            for i, j in T.grid(M, N):
                acc = T.alloc_var(accum_dtype)
                for k in T.serial(K):
                    a = A[k, i] if trans_A else A[i, k]
                    b = B[j, k] if trans_B else B[k, j]
                    acc += T.Cast(accum_dtype, a) * T.Cast(accum_dtype, b)
                C[i, j] = T.Cast(out_dtype, acc)

        return matmul

    def _hints(self, topk: int) -> list[Hint]:
        if self.arch.warp_size > 1:
            return matmul_hints(self.M, self.N, self.K, self.in_dtype, self.accum_dtype, self.arch, topk)
        # a CPU: the default search over the GEMM's nest (axes i, j, k)
        a_dims = ((2,), (0,)) if self.trans_A else ((0,), (2,))
        b_dims = ((1,), (2,)) if self.trans_B else ((2,), (1,))
        problem = TileProblem(spatial=(self.M, self.N), reduce=(self.K,),
                              reads=(Access("A", self.in_dtype, a_dims), Access("B", self.in_dtype, b_dims)),
                              writes=(Access("C", self.out_dtype, ((0,), (1,))),), name="matmul")
        return default_hints(problem, self.arch, topk)

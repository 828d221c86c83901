"""Which fragments take a tensor-core accumulator layout, for the tensor-core pass: the
GEMMs that qualify (operand types, majorness, arch: ``k_depth``), and the fragments that
follow a GEMM's C layout — C itself and the fragments T.Parallel nests update beside it.
Mixed into the pass's kernel state; uses its ``func``, ``arch``, ``threads``, ``analyzer``
and ``_find``."""

from __future__ import annotations

from typing import Any

import tvm
from tilelang.plugin import (
    FRAGMENT_SCOPE,
    buffer_accesses,
    gemm_mnk,
    is_full_region,
    pass_config,
    static_ints,
)

from ..target import arch_number
from .cp_async import SHARED_SCOPES
from .mma_layout import WARP, MMALayout, choose_layout
from .operands import addressed_buffers, matrix_slice
from .partial_copies import copied_part
from .shifted_nests import accessed_by_shifted_nests

MIN_ARCH = 80  # mma.sync m16n8k16 / m16n8k32 and cp.async
MMA_INTRINSICS = {"float16": "tl_mma_m16n8k16_f16_f32", "bfloat16": "tl_mma_m16n8k16_bf16_f32"}
# Operands other than 16-bit: 32 bytes of K per step; the intrinsic and the oldest arch
# that has it. 8-bit: m16n8k32 (fp8 from sm_89; int8 into int32 C), A and B K-major (ldmatrix
# has no .trans for bytes). float32 into float32 C: m16n8k8 on TF32 tensor cores, as
# upstream's T.gemm computes it (tl.disable_tf32 keeps such GEMMs in float32 on the SIMT
# path); MN-major float32 operands are read an element at a time. The fragments of all of
# them hold the bytes of the m16n8k16 ones' places. Not in row families (their fragment A
# operands are 16-bit)
MMA_K_MAJOR_INTRINSICS = {"float8_e4m3fn": ("tl_mma_m16n8k32_e4m3_f32", 89),
                          "float8_e5m2": ("tl_mma_m16n8k32_e5m2_f32", 89),
                          "int8": ("tl_mma_m16n8k32_s8_s32", MIN_ARCH),
                          "float32": ("tl_mma_m16n8k8_tf32_f32", MIN_ARCH)}
DISABLE_TF32_CONFIG = "tl.disable_tf32"


class AccumulatorLayouts:
    """The accumulator half of the tensor-core pass's analysis (see the module docstring)."""

    def _gemm_layout(self, args: Any) -> MMALayout | None:
        a, b, c = args[0], args[1], args[2]
        trans_a, trans_b = bool(args[3].value), bool(args[4].value)
        if not is_full_region(c) or not all(matrix_slice(r, self.analyzer) for r in (a, b)):
            return None
        if a.source.scope() not in SHARED_SCOPES or b.source.scope() not in SHARED_SCOPES:
            return None
        dtype = str(a.source.dtype)
        if str(b.source.dtype) != dtype or str(c.source.dtype) != ("int32" if dtype == "int8" else "float32"):
            return None
        depth = self.k_depth(dtype, trans_a, trans_b)
        mnk = gemm_mnk(a, b, c, trans_a, trans_b, slices=True)
        if depth is None or mnk is None or mnk[2] % depth:
            return None
        m, n, _ = mnk
        return choose_layout(m, n, self.threads // WARP)

    def k_depth(self, dtype: str, trans_a: bool, trans_b: bool) -> int | None:
        """The k step of a tensor-core GEMM of ``dtype`` operands (16 for 16-bit types; 32
        bytes of K for the others: 32 for 8-bit floats, which need sm_89, and for int8 into
        int32, those with A and B K-major; 8 for float32 on TF32), or None: not on tensor
        cores."""
        if dtype in MMA_INTRINSICS:
            return 16
        if dtype not in MMA_K_MAJOR_INTRINSICS or arch_number(self.arch) < MMA_K_MAJOR_INTRINSICS[dtype][1]:
            return None
        if dtype == "float32":
            return None if pass_config(DISABLE_TF32_CONFIG) else 8
        return 32 if not trans_a and trans_b else None

    def _accumulator_layouts(self, fragments: list[Any], ops: list[tuple[str, Any]],
                             nests: list[tuple[list[Any], Any]]) -> dict[Any, MMALayout]:
        """The fragments that take a GEMM's C layout: T.Parallel nests follow it only at
        their own indices, and every fragment a nest touches must follow it too. So the
        fragments that nests touch together form groups; a group takes the layout of its
        GEMMs (all alike) when each member can follow it (a nest may reach the group a
        fixed distance from its own indices: shifted_nests.py) — C, and fragments no GEMM
        writes but nests update beside it (deepgemm's scaled sum of each k block's C). A
        fragment that a view reads (T.reshape) cannot: the view keeps the declared places."""
        viewed = addressed_buffers(self.func.body)  # (T.reshape/T.view: another buffer on its storage)
        plans = {f: (False, None) if any(f.same_as(v) for v in viewed) else self._fragment_plan(f, ops)
                 for f in fragments}
        group_of = {f: [f] for f in fragments}
        for _, inner in nests:
            touched = [f for f in fragments if any(b.same_as(f) for b, _, _ in buffer_accesses(inner))]
            for other in touched[1:]:
                if group_of[other] is not group_of[touched[0]]:
                    merged = group_of[touched[0]] + group_of[other]
                    for f in merged:
                        group_of[f] = merged
        found: dict[Any, MMALayout] = {}
        for group in {id(g): g for g in group_of.values()}.values():
            if not all(plans[f][0] for f in group):
                continue
            layouts = {plans[f][1] for f in group} - {None}
            if len(layouts) != 1:
                continue
            layout = layouts.pop()
            if all(static_ints(f.shape) == [layout.m, layout.n] for f in group) and \
                    accessed_by_shifted_nests(self.func.body, nests, group, self.analyzer):
                found.update({f: layout for f in group})
        return found

    def _fragment_plan(self, fragment: Any, ops: list[tuple[str, Any]]) -> tuple[bool, MMALayout | None]:
        """(whether every tile op on ``fragment`` can follow a GEMM's C layout, the layout
        of the GEMMs that write it or None)."""
        layout = None
        for name, args in ops:
            regions = [a for a in args if isinstance(a, tvm.ir.TensorRegion)]
            if not any(r.source.same_as(fragment) for r in regions):
                continue
            if name == "gemm":
                if not args[2].source.same_as(fragment) or any(r.source.same_as(fragment) for r in regions[:2]):
                    return False, None
                candidate = self._gemm_layout(args)
                if candidate is None or (layout is not None and candidate != layout):
                    return False, None
                layout = candidate
            elif name in ("fill", "copy", "atomic_add"):
                ours = [r for r in regions if r.source.same_as(fragment)]
                others = [r for r in regions if not r.source.same_as(fragment)]
                if any(r.source.scope() == FRAGMENT_SCOPE for r in others) or \
                        not all(is_full_region(r) or (name == "copy" and copied_part(args, r)) for r in ours):
                    return False, None
            else:
                return False, None
        return True, layout

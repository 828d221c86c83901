"""LowerMfmaGemm: ``T.gemm`` of fp16/bf16 shared tiles into an fp32 tile on AMD's matrix
cores (MFMA), for the archs that have them (gfx90a, gfx940-942).

A GEMM qualifies when A and B are fp16 (or both bf16) tiles in shared memory, C is an
fp32 fragment or shared tile, M, N and K are multiples of 16, and the block's threads are
whole wavefronts. It becomes one call of ``tl_hip_mfma_gemm`` (hip_device.h): the block's
wavefronts take C's 16x16 tiles round robin, and each runs ``v_mfma_f32_16x16x16f16`` (or
``..bf16_1k``) over K, with the operand and accumulator layouts of AMD's "CDNA2 ISA"
matrix tables (lane l holds A[l % 16][4 (l / 16) + j], B[4 (l / 16) + j][l % 16] and
C[4 (l / 16) + j][l % 16], j = 0..3).

C lives in shared memory (a fragment C is moved there): the helper reads and writes it
through a pointer, so no register layout has to be followed through the rest of the
kernel. That is correct everywhere and leaves the register-resident accumulator to later
performance work. Barriers go before the call (A, B and C were written by other threads)
and after it (others read C). Any other GEMM is left to the SIMT lowering of LowerTileOps.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tilelang.plugin import (
    FRAGMENT_SCOPE,
    TILE_OPS,
    block_barrier,
    keeps_span,
    pass_config,
    prim_func_pass,
    seq,
    static_ints,
)
from tvm import tirx

from ..target import WAVEFRONT, has_mfma

_GEMM = TILE_OPS["gemm"]
_SHARED = ("shared", "shared.dyn")
_OPERAND_TYPES = ("float16", "bfloat16")
TILE = 16  # the M, N and K of v_mfma_f32_16x16x16{f16,bf16_1k}


def _arch(func: Any) -> str:
    target = func.attrs.get("target") if func.attrs else None
    return str(target.export().get("mcpu", "")) if target is not None else ""


def _threads(body: Any) -> int | None:
    """The block's thread count, when every threadIdx extent is a constant."""
    extents: dict[str, int] = {}
    dynamic = False

    def visit(stmt: Any) -> None:
        nonlocal dynamic
        if stmt.attr_key == "thread_extent" and stmt.node.thread_tag.startswith("threadIdx"):
            if isinstance(stmt.value, tirx.IntImm):
                extents[stmt.node.thread_tag] = int(stmt.value.value)
            else:
                dynamic = True

    tvm_ffi.structural_walk(body, (tirx.AttrStmt, visit))
    if dynamic:
        return None
    count = 1
    for extent in extents.values():
        count *= extent
    return count


class _Gemm:
    """A typed view of a ``tl.gemm`` call: operands A, B, C (TensorRegions) and flags."""

    def __init__(self, call: Any) -> None:
        self.a, self.b, self.c = call.args[0], call.args[1], call.args[2]
        self.trans_a, self.trans_b = bool(call.args[3].value), bool(call.args[4].value)
        self.clear = bool(call.args[5].value)

    def shape(self) -> tuple[int, int, int] | None:
        a, b, c = (static_ints([r.extent for r in x.region]) for x in (self.a, self.b, self.c))
        if a is None or b is None or c is None or not (len(a) == len(b) == len(c) == 2):
            return None
        m, k = (a[1], a[0]) if self.trans_a else (a[0], a[1])
        n = b[0] if self.trans_b else b[1]
        return m, n, k

    def why_not(self, threads: int | None) -> str | None:
        """None when the GEMM maps onto MFMA, else the reason (for debugging)."""
        a, b, c = self.a.source, self.b.source, self.c.source
        if a.scope() not in _SHARED or b.scope() not in _SHARED:
            return "A and B must be shared tiles"
        if str(a.dtype) not in _OPERAND_TYPES or str(a.dtype) != str(b.dtype):
            return "A and B must both be float16 or both bfloat16"
        if str(c.dtype) != "float32" or c.scope() not in (*_SHARED, FRAGMENT_SCOPE):
            return "C must be a float32 fragment or shared tile"
        shape = self.shape()
        if shape is None or any(d % TILE for d in shape):
            return f"M, N and K must be constant multiples of {TILE}"
        if threads is None or threads % WAVEFRONT:
            return f"the block's threads must be whole {WAVEFRONT}-lane wavefronts"
        for buffer in (a, b, c):
            if static_ints(list(buffer.shape)) is None:
                return "tiles must have constant shapes"
        return None

    def call(self, c_buffer: Any, threads: int) -> Any:
        m, n, k = self.shape() or (0, 0, 0)
        bf16 = str(self.a.source.dtype) == "bfloat16"

        def corner(region: Any, buffer: Any) -> Any:
            return tirx.address_of(tirx.BufferLoad(buffer, [r.min for r in region.region]))

        def stride(buffer: Any) -> Any:
            return tirx.IntImm("int32", int(buffer.shape[-1].value))

        flags = ", ".join("true" if f else "false" for f in (self.trans_a, self.trans_b, bf16, self.clear))
        name = f"tl_hip_mfma_gemm<{m}, {n}, {k}, {threads}, {flags}>"
        return tirx.Evaluate(tirx.call_extern(
            "int32", name, corner(self.a, self.a.source), stride(self.a.source),
            corner(self.b, self.b.source), stride(self.b.source), corner(self.c, c_buffer), stride(c_buffer)))


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    if pass_config("tl.disable_mfma", False) or not has_mfma(_arch(func)):
        return func
    threads = _threads(func.body)
    gemms: list[tuple[Any, _Gemm]] = []

    def collect(stmt: Any) -> None:
        if getattr(getattr(stmt.value, "op", None), "name", None) == _GEMM:
            gemm = _Gemm(stmt.value)
            if gemm.why_not(threads) is None:
                gemms.append((stmt, gemm))

    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, collect))
    if not gemms or threads is None:
        return func
    # fragment accumulators move to shared memory, where the helper reads and writes them
    moved: list[tuple[Any, Any]] = []
    for _, gemm in gemms:
        c = gemm.c.source
        if c.scope() == FRAGMENT_SCOPE and not any(old.same_as(c) for old, _ in moved):
            moved.append((c, tirx.decl_buffer(c.shape, c.dtype, name=c.name, scope="shared.dyn")))

    def shared_of(buffer: Any) -> Any:
        for old, new in moved:
            if buffer.same_as(old):
                return new
        return buffer

    def on_evaluate(stmt: Any) -> Any:
        for old, gemm in gemms:
            if stmt.same_as(old):
                return seq([block_barrier(), gemm.call(shared_of(gemm.c.source), threads), block_barrier()])
        return stmt

    body = tvm_ffi.structural_map(func.body, (tirx.Evaluate, keeps_span(on_evaluate)), order="pre")
    if moved:
        body = tvm_ffi.structural_map(body, (tirx.Buffer, shared_of), order="post")
    return func.with_body(body)


def LowerMfmaGemm() -> Any:
    return prim_func_pass(_run, "tl.rocm.LowerMfmaGemm")

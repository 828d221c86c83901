"""LowerGemmToMicroKernels (CPU): ``T.gemm`` as register-blocked, vectorized micro-kernels.

Core's LowerTileOps writes a GEMM as one dot product per C element: a scalar chain that
LLVM cannot vectorize without reassociating the sum (1-2 GFLOP/s on a core that does
~100). This pass runs before it in the CPU pipeline and writes the product the way BLIS
micro-kernels do (Van Zee & van de Geijn, "BLIS", ACM TOMS 41(3), 2015):

* C is cut into MR x NR blocks. A block's accumulators are MR local rows of NR lanes
  that stay live across the whole k loop; each row is its own small stack buffer, accessed
  only as a whole vector at constant offsets, so LLVM's SROA promotes it to vector
  registers (8 x 32 float32 on AVX-512: 16 zmm accumulators).
* Each k step loads NR contiguous elements of B once (converted to the accumulator type)
  and, for each of the MR rows, broadcasts one element of A and adds the product to the
  row: MR x NR/lanes independent FMAs. TVM's LLVM codegen writes ``acc + a * b`` as
  ``llvm.fmuladd``, which LLVM emits as one FMA (one rounding instead of two). No
  fast-math flag is set and nothing is reassociated: each C element still adds its k
  products in order, as LowerTileOps' loop does, so results match numpy's within float32
  rounding of a length-k sum (tests/test_cpu_gemm.py states the tolerance).
* The N loop of each row is T.vectorized, so the vector width is explicit in the IR
  (ramp loads of B, broadcasts of A) instead of left to LLVM's loop vectorizer.
* Edge blocks (a tile extent that MR or NR does not divide) run the same kernel with
  smaller constants: no scalar remainder loop.
* With transpose_B, a tile of B is packed into a k x n panel first, so the NR-lane loads
  stay contiguous (packing reads B once; the product reads it m / MR times).

MR and NR come from the target's vector width (``target_vector_bits``: 512 bits on AVX-512
CPUs, 256 on AVX2): NR is two vectors, MR fills the register file with accumulators while
leaving room for B's vectors and A's broadcast. The ``c`` kind is compiled by the C
compiler the execution backend chooses, with no vector extension assumed: there the rows
are plain loops, written for its auto-vectorizer.

A GEMM whose C tile extents are symbolic is left to LowerTileOps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tvm_ffi
from tvm import tirx

from ...backend.pass_pipeline import prim_func_pass
from ...language.ops import TILE_OPS
from ...transform.lower_tile_ops import TileOpLowering
from ..target import is_c_target

_GEMM = TILE_OPS["gemm"]
#: largest transpose_B panel packed (bytes): bigger B operands (a GEMM of whole global
#: tensors) are read in place rather than copied into a per-block buffer
MAX_PACKED_BYTES = 64 * 1024
#: vector registers of x86-64 by vector width: 32 zmm with AVX-512, else 16 ymm/xmm
#: (Intel SDM vol. 1, the AVX and AVX-512 programming chapters)
_REGISTERS = {512: 32, 256: 16, 128: 16}


@dataclass(frozen=True)
class GemmOperands:
    """A typed view of a ``tl.gemm`` call (see tilelang.language.tile.gemm)."""

    a: Any
    b: Any
    c: Any
    trans_a: bool
    trans_b: bool
    clear: bool

    @classmethod
    def of(cls, call: Any) -> GemmOperands:
        a, b, c, trans_a, trans_b, clear = list(call.args)[:6]
        return cls(a, b, c, bool(trans_a.value), bool(trans_b.value), bool(clear.value))


@dataclass(frozen=True)
class MicroKernelShape:
    """MR x NR accumulator block and whether rows are explicit vectors (T.vectorized)."""

    mr: int
    nr: int
    vectorize: bool

    @classmethod
    def for_target(cls, target: Any, acc_bits: int) -> MicroKernelShape:
        if is_c_target(target):
            return cls(mr=4, nr=16, vectorize=False)
        vector_bits = target_vector_bits(target)
        lanes = max(vector_bits // acc_bits, 1)
        registers = _REGISTERS.get(vector_bits, 16)
        # two vectors of B and one broadcast of A stay live beside the accumulators
        mr = min(8, (registers - 3) // 2)
        return cls(mr=mr, nr=2 * lanes, vectorize=True)


def target_vector_bits(target: Any) -> int:
    """The widest vector register of the target's CPU, in bits. On x86 from its features
    (AVX-512F: 512, AVX: 256, else SSE's 128): TVM 0.27's ``llvm_get_vector_width`` answers
    512 for every x86-64 CPU name, AVX2-only ones (haswell, znver3) included, and micro-kernels
    sized for 32 zmm registers then spill on 16 ymm ones (22 GFLOP/s instead of about 100 on
    a 2-core znver3). Other architectures keep TVM's answer."""
    from tvm.target import codegen

    triple = str(target.attrs.get("mtriple") or codegen.llvm_get_system_triple())
    if not triple.startswith(("x86_64", "i386", "i686")):
        return int(codegen.llvm_get_vector_width(target))
    if codegen.target_has_features("avx512f", target):
        return 512
    return 256 if codegen.target_has_features("avx", target) else 128


def _static(expr: Any) -> int | None:
    return int(expr.value) if isinstance(expr, tirx.IntImm) else None


def _cast(dtype: str, value: Any) -> Any:
    return value if str(value.ty.dtype) == dtype else tirx.Cast(dtype, value)


class _GemmLowering:
    def __init__(self, func: Any, target: Any) -> None:
        self.target = target
        # the analyzer that knows every block index and loop range, as LowerTileOps' does
        self.analyzer = TileOpLowering(func, "").analyzer
        self.counter = 0

    def fresh(self, name: str) -> Any:
        self.counter += 1
        return tirx.Var(f"{name}{self.counter}", "int32")

    def local(self, name: str, shape: tuple[int, ...], dtype: str) -> Any:
        """A per-call scratch buffer. Scope "global": TVM's LowerTVMBuiltin leaves a global
        allocation of constant size under kMaxStackAlloca (1 KiB) as an LLVM alloca, which
        SROA promotes to registers; in "local" scope each accumulator row became a
        TVMBackendAllocWorkspace call and lived in memory (apache-tvm 0.27)."""
        self.counter += 1
        return tirx.decl_buffer(shape, dtype, name=f"{name}{self.counter}", scope="global")

    def lanes(self, extent: int, body_fn: Any, shape: MicroKernelShape) -> Any:
        var = self.fresh("j")
        # (TVM's vectors have two lanes or more)
        kind = tirx.ForKind.VECTORIZED if shape.vectorize and extent > 1 else tirx.ForKind.SERIAL
        return tirx.For(var, 0, extent, kind, body_fn(var))

    def lower(self, call: Any) -> Any:
        """The micro-kernel nest of one GEMM, or None to leave it to LowerTileOps."""
        g = GemmOperands.of(call)
        a_ext = [r.extent for r in g.a.region]
        b_ext = [r.extent for r in g.b.region]
        c_ext = [r.extent for r in g.c.region]
        if not (len(a_ext) == len(b_ext) == len(c_ext) == 2):
            return None  # LowerTileOps says what is wrong
        m, n = _static(c_ext[0]), _static(c_ext[1])
        k = a_ext[0] if g.trans_a else a_ext[1]
        k_other = b_ext[1] if g.trans_b else b_ext[0]
        analyzer = self.analyzer
        m_a = a_ext[1] if g.trans_a else a_ext[0]
        n_b = b_ext[0] if g.trans_b else b_ext[1]
        if m is None or n is None or not (analyzer.can_prove_equal(k, k_other)
                                          and analyzer.can_prove_equal(m_a, m)
                                          and analyzer.can_prove_equal(n_b, n)):
            return None
        c_type = str(g.c.source.dtype)
        # as LowerTileOps: 16-bit float C sums in float32 and rounds once at the end
        acc_type = "float32" if c_type in ("float16", "bfloat16") else c_type
        shape = MicroKernelShape.for_target(self.target, tvm_ffi.dtype(acc_type).bits)
        b_load, prologue = self.b_operand(g, k, n, acc_type)
        body = self.blocks(g, m, n, k, acc_type, b_load, shape)
        return tirx.SeqStmt([*prologue, body]) if prologue else body

    def b_operand(self, g: GemmOperands, k: Any, n: int, acc_type: str) -> tuple[Any, list[Any]]:
        """(kk, j) -> B's element as op(B)[kk, j], and statements that pack it first."""
        b_buf, b_min = g.b.source, [r.min for r in g.b.region]
        k_static = _static(k)
        nbytes = (k_static or 0) * n * tvm_ffi.dtype(acc_type).bits // 8
        if not g.trans_b:
            return (lambda kk, j: _cast(acc_type, tirx.BufferLoad(b_buf, [b_min[0] + kk, b_min[1] + j]))), []
        if k_static is None or nbytes > MAX_PACKED_BYTES:
            return (lambda kk, j: _cast(acc_type, tirx.BufferLoad(b_buf, [b_min[0] + j, b_min[1] + kk]))), []
        panel = self.local("b_panel", (k_static, n), acc_type)
        kk, j = self.fresh("k"), self.fresh("j")
        # walk B's rows (its contiguous axis innermost): the panel is written with stride n
        pack = tirx.For(j, 0, n, tirx.ForKind.SERIAL, tirx.For(
            kk, 0, k_static, tirx.ForKind.SERIAL,
            tirx.BufferStore(panel, _cast(acc_type, tirx.BufferLoad(b_buf, [b_min[0] + j, b_min[1] + kk])),
                             [kk, j])))
        return (lambda kk, j: tirx.BufferLoad(panel, [kk, j])), [tirx.AllocBuffer(panel), pack]

    def blocks(self, g: GemmOperands, m: int, n: int, k: Any, acc_type: str, b_load: Any,
               shape: MicroKernelShape) -> Any:
        """Full MR x NR blocks in loops, then the edge row and column of smaller blocks."""
        mr, nr = min(shape.mr, m), min(shape.nr, n)
        m_full, n_full = m // mr, n // nr
        m_edge, n_edge = m - m_full * mr, n - n_full * nr
        io = self.fresh("io")

        def row_of_blocks(i0: Any, rows: int) -> list[Any]:
            out, jo = [], self.fresh("jo")
            if n_full:
                out.append(tirx.For(jo, 0, n_full, tirx.ForKind.SERIAL,
                                    self.micro_kernel(g, i0, rows, jo * nr, nr, k, acc_type, b_load, shape)))
            if n_edge:
                out.append(self.micro_kernel(g, i0, rows, n_full * nr, n_edge, k, acc_type, b_load, shape))
            return out

        stmts = []
        if m_full:
            stmts.append(tirx.For(io, 0, m_full, tirx.ForKind.SERIAL, _seq(row_of_blocks(io * mr, mr))))
        if m_edge:
            stmts.extend(row_of_blocks(tirx.IntImm("int32", m_full * mr), m_edge))
        return _seq(stmts)

    def micro_kernel(self, g: GemmOperands, i0: Any, rows: int, j0: Any, cols: int, k: Any,
                     acc_type: str, b_load: Any, shape: MicroKernelShape) -> Any:
        """C[i0:i0+rows, j0:j0+cols] (+)= op(A)[i0:, :] @ op(B)[:, j0:], accumulated in
        ``rows`` local vectors of ``cols`` lanes."""
        a_buf, a_min = g.a.source, [r.min for r in g.a.region]
        c_buf, c_min = g.c.source, [r.min for r in g.c.region]
        c_type = str(c_buf.dtype)
        acc = [self.local("acc", (cols,), acc_type) for _ in range(rows)]
        b_vec = self.local("b_vec", (cols,), acc_type)
        kk = self.fresh("k")

        def c_index(r: int, j: Any) -> list[Any]:
            return [c_min[0] + i0 + r, c_min[1] + j0 + j]

        def a_load(r: int) -> Any:
            index = [a_min[0] + kk, a_min[1] + i0 + r] if g.trans_a else [a_min[0] + i0 + r, a_min[1] + kk]
            return _cast(acc_type, tirx.BufferLoad(a_buf, index))

        def init(r: int) -> Any:
            def body(j: Any) -> Any:
                value = tirx.const(0, acc_type) if g.clear else _cast(acc_type, tirx.BufferLoad(c_buf, c_index(r, j)))
                return tirx.BufferStore(acc[r], value, [j])
            return self.lanes(cols, body, shape)

        def update(r: int) -> Any:
            a_value = a_load(r)
            return self.lanes(cols, lambda j: tirx.BufferStore(
                acc[r], tirx.BufferLoad(acc[r], [j]) + a_value * tirx.BufferLoad(b_vec, [j]), [j]), shape)

        def store(r: int) -> Any:
            return self.lanes(cols, lambda j: tirx.BufferStore(
                c_buf, _cast(c_type, tirx.BufferLoad(acc[r], [j])), c_index(r, j)), shape)

        load_b = self.lanes(cols, lambda j: tirx.BufferStore(b_vec, b_load(kk, j0 + j), [j]), shape)
        k_loop = tirx.For(kk, 0, k, tirx.ForKind.SERIAL, _seq([load_b, *[update(r) for r in range(rows)]]))
        return _seq([
            *[tirx.AllocBuffer(buf) for buf in (*acc, b_vec)],
            *[init(r) for r in range(rows)],
            k_loop,
            *[store(r) for r in range(rows)],
        ])


def _seq(stmts: list[Any]) -> Any:
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def _run(func: Any, mod: Any, ctx: Any) -> Any:
    target = func.attrs.get("target") if func.attrs else None
    if target is None:
        return func  # BindTarget always runs first; without a target LowerTileOps decides
    lowering = _GemmLowering(func, target)

    def on_evaluate(stmt: Any) -> Any:
        if getattr(getattr(stmt.value, "op", None), "name", None) != _GEMM:
            return stmt
        out = lowering.lower(stmt.value)
        return stmt if out is None else out

    return func.with_body(tvm_ffi.structural_map(func.body, (tirx.Evaluate, on_evaluate), order="post"))


def LowerGemmToMicroKernels() -> Any:
    return prim_func_pass(_run, "tl.cpu.LowerGemmToMicroKernels")

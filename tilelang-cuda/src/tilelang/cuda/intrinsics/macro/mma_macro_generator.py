"""``TensorCoreIntrinEmitter``: upstream TileLang's emitter of warp-level tensor-core code,
for kernels that schedule ``ldmatrix`` and ``mma.sync`` themselves instead of calling
``T.gemm`` (upstream's ``examples/gemm/example_gemm_intrinsics.py``).

A block of ``block_row_warps x block_col_warps`` warps computes a tile; each warp a
``warp_row_tiles x warp_col_tiles`` piece of it, as ``warp_rows x warp_cols`` atoms of
16 x ``n_dim`` (``n_dim`` 16, or 8 where the warp's columns are not a multiple of 16). The
kernel allocates the per-thread fragments with ``T.alloc_local``:

* ``A_local``: ``warp_rows * local_size_a`` elements (8 per atom for 16-bit types, 16 for
  int8), each atom's in the register order of the PTX ISA's ``mma.m16n8k{16,32}`` A
  fragment ("Matrix fragments for mma.m16n8k16");
* ``B_local``: ``warp_cols * local_size_b``: per atom the B fragment of its first 8
  columns, then that of the next 8;
* ``C_local``: ``warp_rows * warp_cols * local_size_out`` accumulators, atom (i, j) at
  ``(i * warp_cols + j) * local_size_out``, each 16 x 8 piece in the C fragment's order.

These are the fragments the instructions themselves define, so a kernel that writes
``B_local`` by hand (dequantizing into it) gets the same layout as upstream's. The methods
emit per-thread TIR through the CUDA backend's inline-PTX helpers (``tl_device.h``):
``ldmatrix_a`` / ``ldmatrix_b`` load a k step of fragments from shared tiles (through
``T.access_ptr``, so the barrier pass sees the shared reads), ``mma`` multiplies them,
``stmatrix`` stores the accumulators to a shared or global tile.

Supported: float16 and bfloat16 operands with float32 accumulators (and float16 with
float16), int8 with int32 (``mma.m16n8k32``; A stored [M, K] and B [N, K], as ldmatrix
needs). Other types, and upstream's ladder-transform and fp64 variants, raise a
LanguageError that says so.
"""

from __future__ import annotations

from typing import Any

import tilelang.language as T
from tilelang.errors import LanguageError

_WARP = 32
#: (operand dtype, accumulator dtype) -> (mma helper of tl_device.h, k of the instruction)
_MMA = {
    ("float16", "float32"): ("tl_mma_m16n8k16_f16_f32", 16),
    ("bfloat16", "float32"): ("tl_mma_m16n8k16_bf16_f32", 16),
    ("float16", "float16"): ("tl_mma_m16n8k16_f16_f16", 16),
    ("int8", "int32"): ("tl_mma_m16n8k32_s8_s32", 32),
}


def _name(dtype: Any) -> str:
    return str(dtype.dtype if hasattr(dtype, "dtype") and not isinstance(dtype, str) else dtype)


class TensorCoreIntrinEmitter:
    """Emits one warp's share of a block GEMM with ldmatrix + mma.sync (module docstring)."""

    M_DIM = 16
    WARP_SIZE = _WARP

    def __init__(self, a_dtype: Any = "float16", b_dtype: Any = "float16", accum_dtype: Any = "float16",
                 a_transposed: bool = False, b_transposed: bool = False, block_row_warps: int = 2,
                 block_col_warps: int = 2, warp_row_tiles: int = 8, warp_col_tiles: int = 8, chunk: int = 16,
                 reduce_k: int = 1, num_elems_per_byte: int = 1, is_m_first: bool | None = False,
                 thread_var: Any = None) -> None:
        self.a_dtype, self.b_dtype, self.accum_dtype = _name(a_dtype), _name(b_dtype), _name(accum_dtype)
        if self.a_dtype != self.b_dtype or (self.a_dtype, self.accum_dtype) not in _MMA:
            kinds = ", ".join(f"{a} x {a} -> {c}" for a, c in _MMA)
            raise LanguageError(f"TensorCoreIntrinEmitter: {self.a_dtype} x {self.b_dtype} -> {self.accum_dtype} "
                                f"is not supported here; supported: {kinds}")
        if reduce_k != 1 or num_elems_per_byte != 1:
            raise LanguageError("TensorCoreIntrinEmitter: reduce_k and num_elems_per_byte other than 1 are not "
                                "supported here; split K over blocks, or use T.gemm")
        self.intrinsic, k_inst = _MMA[(self.a_dtype, self.accum_dtype)]
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        if k_inst == 32 and (self.a_transposed or not self.b_transposed):
            raise LanguageError("TensorCoreIntrinEmitter: int8 operands need A stored [M, K] and B stored [N, K] "
                                "(a_transposed=False, b_transposed=True): ldmatrix moves 16-bit elements")
        self.block_row_warps, self.block_col_warps = int(block_row_warps), int(block_col_warps)
        self.warp_row_tiles, self.warp_col_tiles, self.chunk = int(warp_row_tiles), int(warp_col_tiles), int(chunk)
        if self.warp_row_tiles % 16 or self.warp_col_tiles % 8 or self.warp_row_tiles <= 0 or self.warp_col_tiles <= 0:
            raise LanguageError(f"TensorCoreIntrinEmitter: a warp's tile must be a multiple of 16 x 8, got "
                                f"{self.warp_row_tiles} x {self.warp_col_tiles}")
        self.k_dim = min(k_inst, self.chunk)
        if self.k_dim != k_inst:
            raise LanguageError(f"TensorCoreIntrinEmitter: chunk {self.chunk} is less than one {self.a_dtype} mma "
                                f"k step ({k_inst})")
        self.n_dim = 16 if self.warp_col_tiles % 16 == 0 else 8
        self.micro_size_x, self.micro_size_y, self.micro_size_k = self.M_DIM, self.n_dim, self.k_dim
        self.warp_rows, self.warp_cols = self.warp_row_tiles // 16, self.warp_col_tiles // self.n_dim
        self.local_size_a = self.M_DIM * self.k_dim // _WARP
        self.local_size_b = self.n_dim * self.k_dim // _WARP
        self.local_size_out = self.M_DIM * self.n_dim // _WARP
        self.is_m_first = bool(is_m_first)
        self.thread_var = thread_var
        self.threads = _WARP * self.block_row_warps * self.block_col_warps
        bits = 8 if k_inst == 32 else 16
        self._chunk_elems = 128 // bits  # elements in one 16-byte ldmatrix row

    # -- threads ------------------------------------------------------------------------------
    def get_thread_binding(self) -> Any:
        return self.thread_var if self.thread_var is not None else T.get_thread_binding(0)

    def extract_thread_binding(self, thread_id: Any, is_m_first: bool | None = None) -> tuple[Any, Any, Any]:
        """(lane, warp_n, warp_m) of a thread. ``is_m_first``: consecutive warps walk N
        first (warp_n = warp % block_col_warps), else M first."""
        m_first = self.is_m_first if is_m_first is None else is_m_first
        lane, warp = thread_id % _WARP, thread_id // _WARP
        if m_first:
            return lane, warp % self.block_col_warps, (warp // self.block_col_warps) % self.block_row_warps
        return lane, (warp // self.block_row_warps) % self.block_col_warps, warp % self.block_row_warps

    # -- operands -----------------------------------------------------------------------------
    @staticmethod
    def _tile(operand: Any) -> tuple[Any, list[Any]]:
        """(buffer, the origin of the 2-d tile in it) of a shared buffer, a region of one
        (``A_shared[stage, :, :]``) or an element (its corner)."""
        from tvm import tirx
        from tvm.ir import TensorLoad, TensorRegion

        if isinstance(operand, tirx.Buffer):
            return operand, [0] * len(operand.shape)
        if isinstance(operand, TensorRegion):
            return operand.source, [r.min for r in operand.region]
        if isinstance(operand, TensorLoad):
            return operand.source, list(operand.indices)
        raise LanguageError(f"TensorCoreIntrinEmitter: expected a shared buffer or a region of one, got "
                            f"{type(operand).__name__}")

    @staticmethod
    def _at(buf: Any, other: list[Any]) -> Any:
        """(row, column) -> the address of that element of the tile, as ``T.access_ptr``
        (a read of the 16-byte row ldmatrix takes from there)."""
        def at(row: Any, col: Any) -> Any:
            return T.access_ptr(buf[(*other, row, col)], "r", extent=8)

        return at

    def ldmatrix_a(self, A_local_buf: Any, A_shared_buf: Any, ki: Any, rk: Any = 0) -> Any:
        """Load the warp's A fragments of k step ``ki`` (of this ``chunk``; ``rk``: which
        chunk) from the shared tile: one ldmatrix.x4 per 16-row atom."""
        buf, origin = self._tile(A_shared_buf)
        lane, _, warp_m = self.extract_thread_binding(self.get_thread_binding())
        base_r, base_c = origin[-2], origin[-1]
        warp_rows, local_size, chunk_elems = self.warp_rows, self.local_size_a, self._chunk_elems
        k0 = rk * self.chunk + ki * self.k_dim
        m0 = warp_m * self.warp_row_tiles
        if self.a_transposed:  # [K, M]: matrix q holds rows k of 8 m; .trans gives the A fragment
            r_off, c_off, helper = (lane // 16) * 8 + lane % 8, ((lane // 8) % 2) * 8, "tl_ldmatrix_x4_trans"
        else:  # [M, K]: lane l gives row l % 16, the (l // 16)-th 16 bytes of k
            r_off, c_off, helper = lane % 16, (lane // 16) * chunk_elems, "tl_ldmatrix_x4"
        at = self._at(buf, origin[:-2])
        if self.a_transposed:
            def source(i: Any) -> Any:
                return at(base_r + k0 + r_off, base_c + m0 + i * 16 + c_off)
        else:
            def source(i: Any) -> Any:
                return at(base_r + m0 + i * 16 + r_off, base_c + k0 + c_off)

        @T.macro
        def _load(A_local: Any, ki: Any) -> None:
            for i in T.unroll(warp_rows):
                T.call_extern("int32", helper, T.address_of(A_local[i * local_size]), source(i))

        return _load(A_local_buf, ki)

    def ldmatrix_b(self, B_local_buf: Any, B_shared_buf: Any, ki: Any, rk: Any = 0) -> Any:
        """Load the warp's B fragments of k step ``ki``: per atom, ldmatrix.x4 (16 columns:
        the first 8 columns' fragment, then the next 8's) or .x2 (8 columns)."""
        buf, origin = self._tile(B_shared_buf)
        lane, warp_n, _ = self.extract_thread_binding(self.get_thread_binding())
        base_r, base_c = origin[-2], origin[-1]
        warp_cols, local_size, chunk_elems, n_dim = self.warp_cols, self.local_size_b, self._chunk_elems, self.n_dim
        k0 = rk * self.chunk + ki * self.k_dim
        n0 = warp_n * self.warp_col_tiles
        x = "x4" if n_dim == 16 else "x2"
        if self.b_transposed:  # [N, K]: matrix q = (8 n, 16 bytes of k); lanes 8q.. give its rows
            r_off, c_off, helper = (lane // 16) * 8 + lane % 8, ((lane // 8) % 2) * chunk_elems, f"tl_ldmatrix_{x}"
        else:  # [K, N]: matrix q holds rows k of 8 n; .trans gives the B fragment
            r_off, c_off, helper = ((lane // 8) % 2) * 8 + lane % 8, (lane // 16) * 8, f"tl_ldmatrix_{x}_trans"
        at = self._at(buf, origin[:-2])
        if self.b_transposed:
            def source(j: Any) -> Any:
                return at(base_r + n0 + j * n_dim + r_off, base_c + k0 + c_off)
        else:
            def source(j: Any) -> Any:
                return at(base_r + k0 + r_off, base_c + n0 + j * n_dim + c_off)

        @T.macro
        def _load(B_local: Any, ki: Any) -> None:
            for j in T.unroll(warp_cols):
                T.call_extern("int32", helper, T.address_of(B_local[j * local_size]), source(j))

        return _load(B_local_buf, ki)

    # -- the product ----------------------------------------------------------------------------
    def mma(self, A_local_buf: Any, B_local_buf: Any, C_local_buf: Any, k_inner: Any = 0) -> Any:
        """C += A @ B over the fragments of one k step: one mma per 16 x 8 piece."""
        warp_rows, warp_cols, pieces = self.warp_rows, self.warp_cols, self.n_dim // 8
        la, lb, lc = self.local_size_a, self.local_size_b, self.local_size_out
        helper = self.intrinsic

        @T.macro
        def _mma(A_local: Any, B_local: Any, C_local: Any) -> None:
            for i in T.unroll(warp_rows):
                for j in T.unroll(warp_cols):
                    for p in T.unroll(pieces):
                        T.call_extern("int32", helper, T.address_of(C_local[(i * warp_cols + j) * lc + p * (lc // pieces)]),
                                      T.address_of(A_local[i * la]), T.address_of(B_local[j * lb + p * (lb // pieces)]))

        return _mma(A_local_buf, B_local_buf, C_local_buf)

    def mma_atom(self, A_local_buf: Any, B_local_buf: Any, C_local_buf: Any, inst_m_idx: Any, inst_n_idx: Any,
                 k_inner: Any = 0) -> Any:
        """The mma of atom (inst_m_idx, inst_n_idx) alone: ``mma`` is every atom's."""
        warp_cols, pieces = self.warp_cols, self.n_dim // 8
        la, lb, lc = self.local_size_a, self.local_size_b, self.local_size_out
        helper = self.intrinsic

        @T.macro
        def _atom(A_local: Any, B_local: Any, C_local: Any) -> None:
            for p in T.unroll(pieces):
                T.call_extern("int32", helper,
                              T.address_of(C_local[(inst_m_idx * warp_cols + inst_n_idx) * lc + p * (lc // pieces)]),
                              T.address_of(A_local[inst_m_idx * la]),
                              T.address_of(B_local[inst_n_idx * lb + p * (lb // pieces)]))

        return _atom(A_local_buf, B_local_buf, C_local_buf)

    @property
    def mma_num_inst_m(self) -> int:
        return self.warp_rows

    @property
    def mma_num_inst_n(self) -> int:
        return self.warp_cols

    # -- the accumulators -------------------------------------------------------------------------
    def store_index(self, lane: Any, local_id: Any) -> tuple[Any, Any]:
        """(row, column) in its 16 x n_dim atom of accumulator ``local_id`` of ``lane``: the
        C fragment of mma.m16n8 (c0, c1 in row lane // 4, c2, c3 eight rows down), one 8-column
        piece after the other."""
        per_piece = 4
        piece, r = local_id // per_piece, local_id % per_piece
        return lane // 4 + (r // 2) * 8, piece * 8 + (lane % 4) * 2 + r % 2

    def stmatrix(self, C_local_buf: Any, C_buf: Any, pid_m: Any = None, pid_n: Any = None) -> Any:
        """Store the accumulators: into a shared tile ([block M, block N], or [M atoms, N
        atoms, 16, n_dim]), or, with ``pid_m``/``pid_n``, into global C at that block."""
        lane, warp_n, warp_m = self.extract_thread_binding(self.get_thread_binding())
        warp_rows, warp_cols, lc, n_dim = self.warp_rows, self.warp_cols, self.local_size_out, self.n_dim
        block_rows, block_cols = self.block_row_warps * warp_rows, self.block_col_warps * warp_cols
        dims = len(C_buf.shape)
        if dims not in (2, 4):
            raise LanguageError(f"TensorCoreIntrinEmitter.stmatrix: C must be 2-d or 4-d, got {dims} dimensions")
        row_of = self.store_index
        if pid_m is not None and pid_n is not None:
            def target(i: Any, j: Any, e: Any) -> tuple[Any, ...]:
                row, col = row_of(lane, e)
                return ((pid_m * block_rows + warp_m * warp_rows + i) * 16 + row,
                        (pid_n * block_cols + warp_n * warp_cols + j) * n_dim + col)
        elif dims == 2:
            def target(i: Any, j: Any, e: Any) -> tuple[Any, ...]:
                row, col = row_of(lane, e)
                return (warp_m * warp_rows + i) * 16 + row, (warp_n * warp_cols + j) * n_dim + col
        else:
            def target(i: Any, j: Any, e: Any) -> tuple[Any, ...]:
                row, col = row_of(lane, e)
                return warp_m * warp_rows + i, warp_n * warp_cols + j, row, col

        @T.macro
        def _store(C_local: Any, C: Any) -> None:
            for i in T.unroll(warp_rows):
                for j in T.unroll(warp_cols):
                    for e in T.unroll(lc):
                        C[target(i, j, e)] = C_local[(i * warp_cols + j) * lc + e]

        return _store(C_local_buf, C_buf)

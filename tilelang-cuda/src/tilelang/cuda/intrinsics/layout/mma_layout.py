"""mma.sync's operand layouts and bank-conflict-free shared tiles, in upstream TileLang's
spelling (``tilelang.cuda.intrinsics.layout.mma_layout``).

**Fragments.** ``shared_RxC_to_mma_a_32xN_layout(i, j)`` gives ``(lane, register)``: which
of a warp's 32 lanes holds element (i, j) of an operand tile of one mma.sync, and at which
of its N elements. A is stored M x K (rows i, reduction j), B as N x K (two 8-column n
blocks); ``_trans`` takes the tile stored the other way round (K x M, K x N). The PTX ISA's
"Matrix Fragments for mma.m16n8k*" tables define them: lane ``4 * group + t`` holds, per
32-bit register, the ``32 / bits`` consecutive k of row ``group`` (and ``group + 8``) at k
offset ``t * 32 / bits`` (and the next 4 x that), so a 16-bit m16n8k16 A fragment is
``lane = 4 * (i % 8) + (j % 8) // 2``, ``register = 4 * (j // 8) + 2 * (i // 8) + j % 2``.
``mma_load_a_32xN_to_shared_RxC_layout(lane, register)`` is the inverse. The ``_sr_a``/
``_rs_a`` names (spatial-reduction order, and its transpose) are upstream's aliases.
``mma_store_32x8_to_shared_16x16_layout`` is the accumulator of two m16n8 mmas side by side.

**Swizzles.** Shared memory has 32 banks of 4 bytes; a warp reading one 16-byte chunk per lane from the
same column of 8 consecutive 128-byte rows would hit the same banks 8 times. XOR-ing the
chunk index with the row (mod the number of chunks per swizzle span) spreads those rows
over all banks — the 32/64/128-byte swizzles of the PTX ISA ("Shared memory matrix
layouts", tensor-map swizzle modes).
"""

from __future__ import annotations

from typing import Any

from tilelang.errors import LanguageError
from tilelang.plugin import Layout, make_swizzled_layout

_CHUNK_BYTES = 16  # one ldmatrix row / one 128-bit access
_ROWS = 8  # rows per swizzle pattern: 8 x 16 bytes = the 128-byte span of 32 banks


def _bits(dtype: Any) -> int:
    from tvm import DataType

    return int(DataType(str(dtype)).bits)


def get_swizzle_layout(row_idx: Any, col_idx: Any, row_size: int, dtype: Any,
                       swizzle_bytes: int | None = None) -> tuple[Any, Any, Any]:
    """Where element (row_idx, col_idx) of a row-major tile with ``row_size`` elements per
    row is stored under a ``swizzle_bytes`` (32, 64 or 128; default: the row's bytes up to
    128) XOR swizzle: ``(column_tile, row, swizzled_column)``. Works on ints and on TIR
    expressions."""
    bits = _bits(dtype)
    row_bytes = bits * int(row_size) // 8
    if row_bytes % 32 != 0:
        raise LanguageError(f"get_swizzle_layout: a row of {row_size} x {dtype} is {row_bytes} bytes; "
                            "swizzling needs a multiple of 32 bytes")
    span = min(128, row_bytes) if swizzle_bytes is None else int(swizzle_bytes)
    if span not in (32, 64, 128):
        raise LanguageError(f"get_swizzle_layout: swizzle_bytes must be 32, 64 or 128, got {swizzle_bytes}")
    per_chunk = _CHUNK_BYTES * 8 // bits
    chunks = span // _CHUNK_BYTES  # chunks per swizzle span: 2, 4 or 8
    chunk, within = col_idx // per_chunk, col_idx % per_chunk
    # rows share a pattern in groups of 8 / chunks, so that the XOR key stays below chunks
    key = (row_idx % _ROWS) // (_ROWS // chunks)
    return chunk // chunks, row_idx, ((chunk % chunks) ^ key) * per_chunk + within


def make_mma_swizzle_layout(shared_buf: Any, is_smooth: bool = False) -> Any:
    """The layout to give ``shared_buf`` with ``T.annotate_layout`` so that tensor-core
    loads from it are bank-conflict free. A tile whose rows are not a multiple of 64 bytes
    (or ``is_smooth``) keeps its row-major layout; otherwise the request is core's
    ``make_swizzled_layout``, for which this backend chooses its swizzle (the layout never
    changes results, only bank conflicts)."""
    shape = list(shared_buf.shape)
    row_bits = int(shape[-1]) * _bits(shared_buf.dtype)
    if is_smooth or row_bits % 512 != 0:
        return Layout(shape, lambda *indices: list(indices))
    return make_swizzled_layout(shared_buf)


# --- fragments ---------------------------------------------------------------------------
_GROUPS = 8  # lane groups of 4: "groupID" of the PTX tables
_PER_GROUP = 4  # lanes in a group: "threadID_in_group"


def _a_fragment(i: Any, j: Any, bits: int) -> tuple[Any, Any]:
    """(lane, register) of element (row i, k j) of a 16 x (256 / bits) A operand."""
    word = 32 // bits  # elements in one 32-bit register
    span = _PER_GROUP * word  # k one row of a group's 4 lanes covers
    return (i % _GROUPS) * _PER_GROUP + (j % span) // word, (j // span) * 2 * word + (i // _GROUPS) * word + j % word


def _b_fragment(i: Any, j: Any, bits: int) -> tuple[Any, Any]:
    """(lane, register) of element (column n = i, k = j) of two side-by-side n8 B operands
    (16 x (256 / bits), stored N x K)."""
    word = 32 // bits
    span = _PER_GROUP * word
    per_block = 2 * word  # registers of one n8 block: two k halves
    return (i % _GROUPS) * _PER_GROUP + (j % span) // word, (i // _GROUPS) * per_block + (j // span) * word + j % word


def _a_element(lane: Any, register: Any, bits: int) -> tuple[Any, Any]:
    """The inverse of _a_fragment: (row, k) of ``register`` of ``lane``."""
    word = 32 // bits
    span = _PER_GROUP * word
    return (lane // _PER_GROUP) + ((register // word) % 2) * _GROUPS, \
        (register // (2 * word)) * span + (lane % _PER_GROUP) * word + register % word


def _b_element(lane: Any, register: Any, bits: int) -> tuple[Any, Any]:
    """The inverse of _b_fragment: (n, k) of ``register`` of ``lane``."""
    word = 32 // bits
    span = _PER_GROUP * word
    per_block = 2 * word
    return (lane // _PER_GROUP) + (register // per_block) * _GROUPS, \
        ((register % per_block) // word) * span + (lane % _PER_GROUP) * word + register % word


def shared_16x8_to_mma_a_32x4_layout(i: Any, j: Any) -> tuple[Any, Any]:
    return _a_fragment(i, j, 32)


def shared_16x16_to_mma_a_32x8_layout(i: Any, j: Any) -> tuple[Any, Any]:
    return _a_fragment(i, j, 16)


def shared_16x32_to_mma_a_32x16_layout(i: Any, j: Any) -> tuple[Any, Any]:
    return _a_fragment(i, j, 8)


def shared_16x64_to_mma_a_32x32_layout(i: Any, j: Any) -> tuple[Any, Any]:
    return _a_fragment(i, j, 4)


def shared_16x8_to_mma_b_32x4_layout(i: Any, j: Any) -> tuple[Any, Any]:
    return _b_fragment(i, j, 32)


def shared_16x16_to_mma_b_32x8_layout(i: Any, j: Any) -> tuple[Any, Any]:
    return _b_fragment(i, j, 16)


def shared_16x32_to_mma_b_32x16_layout(i: Any, j: Any) -> tuple[Any, Any]:
    return _b_fragment(i, j, 8)


def shared_16x8_to_mma_a_32x4_layout_trans(i: Any, j: Any) -> tuple[Any, Any]:
    return _a_fragment(j, i, 32)


def shared_16x16_to_mma_a_32x8_layout_trans(i: Any, j: Any) -> tuple[Any, Any]:
    return _a_fragment(j, i, 16)


def shared_32x16_to_mma_a_32x16_layout_trans(i: Any, j: Any) -> tuple[Any, Any]:
    return _a_fragment(j, i, 8)


def shared_16x8_to_mma_b_32x4_layout_trans(i: Any, j: Any) -> tuple[Any, Any]:
    return _b_fragment(j, i, 32)


def shared_16x16_to_mma_b_32x8_layout_trans(i: Any, j: Any) -> tuple[Any, Any]:
    return _b_fragment(j, i, 16)


def shared_32x16_to_mma_b_32x16_layout_trans(i: Any, j: Any) -> tuple[Any, Any]:
    return _b_fragment(j, i, 8)


def mma_load_a_32x4_to_shared_16x8_layout(lane: Any, register: Any) -> tuple[Any, Any]:
    return _a_element(lane, register, 32)


def mma_load_a_32x8_to_shared_16x16_layout(lane: Any, register: Any) -> tuple[Any, Any]:
    return _a_element(lane, register, 16)


def mma_load_a_32x16_to_shared_16x32_layout(lane: Any, register: Any) -> tuple[Any, Any]:
    return _a_element(lane, register, 8)


def mma_load_a_32x32_to_shared_16x64_layout(lane: Any, register: Any) -> tuple[Any, Any]:
    return _a_element(lane, register, 4)


def mma_load_b_32x4_to_shared_16x8_layout(lane: Any, register: Any) -> tuple[Any, Any]:
    return _b_element(lane, register, 32)


def mma_load_b_32x8_to_shared_16x16_layout(lane: Any, register: Any) -> tuple[Any, Any]:
    return _b_element(lane, register, 16)


def mma_load_b_32x16_to_shared_16x32_layout(lane: Any, register: Any) -> tuple[Any, Any]:
    return _b_element(lane, register, 8)


def mma_store_32x8_to_shared_16x16_layout(lane: Any, register: Any) -> tuple[Any, Any]:
    """(row, column) of accumulator ``register`` of ``lane`` for two m16n8 mmas side by
    side: c0, c1 in row lane // 4 at columns 2 (lane % 4) + (0, 1), c2, c3 eight rows down;
    registers 4-7 the second n8 block."""
    return lane // _PER_GROUP + ((register // 2) % 2) * _GROUPS, \
        (register // 4) * 8 + (lane % _PER_GROUP) * 2 + register % 2


# upstream's names by axis order: sr = (spatial, reduction) as stored, rs = transposed
shared_16x8_to_mma_32x4_layout_sr_a = shared_16x8_to_mma_a_32x4_layout
shared_16x16_to_mma_32x8_layout_sr_a = shared_16x16_to_mma_a_32x8_layout
shared_16x32_to_mma_32x16_layout_sr_a = shared_16x32_to_mma_a_32x16_layout
shared_16x64_to_mma_32x32_layout_sr_a = shared_16x64_to_mma_a_32x32_layout
shared_16x8_to_mma_32x4_layout_sr_b = shared_16x8_to_mma_b_32x4_layout
shared_16x16_to_mma_32x8_layout_sr_b = shared_16x16_to_mma_b_32x8_layout
shared_16x32_to_mma_32x16_layout_sr_b = shared_16x32_to_mma_b_32x16_layout
shared_16x8_to_mma_32x4_layout_rs_a = shared_16x8_to_mma_a_32x4_layout_trans
shared_16x16_to_mma_32x8_layout_rs_a = shared_16x16_to_mma_a_32x8_layout_trans
shared_16x32_to_mma_32x16_layout_rs_a = shared_32x16_to_mma_a_32x16_layout_trans
shared_16x8_to_mma_32x4_layout_rs_b = shared_16x8_to_mma_b_32x4_layout_trans
shared_16x16_to_mma_32x8_layout_rs_b = shared_16x16_to_mma_b_32x8_layout_trans
shared_16x32_to_mma_32x16_layout_rs_b = shared_32x16_to_mma_b_32x16_layout_trans

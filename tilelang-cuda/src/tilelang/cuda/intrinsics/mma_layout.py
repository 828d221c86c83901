"""Bank-conflict-free layouts for shared tiles, in upstream TileLang's spelling.

Shared memory has 32 banks of 4 bytes; a warp reading one 16-byte chunk per lane from the
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

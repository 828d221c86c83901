"""Bank-conflict-free layouts of shared tiles, in upstream TileLang's spelling.

Shared memory serves 32 banks of 4 bytes, 128 bytes a cycle. A warp that reads one 16-byte
chunk per lane down a column of row-major 128-byte rows meets the same banks in every row.
The 32-, 64- and 128-byte swizzles of the PTX ISA (its shared-memory matrix layouts and
tensor-map swizzle modes) XOR the 16-byte chunk index of an address with the index of its
128-byte line, modulo the chunks in the swizzle's width (2, 4 or 8), which spreads such a
column over all banks.

``SwizzledLayout`` is both things a kernel means by it:

* for ``T.annotate_layout``, a request that the tile be stored bank-conflict free. The
  backend that compiles the kernel chooses the arrangement its instructions need (CUDA's
  tensor-core and TMA paths pick the widest swizzle a row fills); a backend without banked
  shared memory keeps its layout. Storage order never changes results.
* as a ``Layout``, the XOR swizzle it names, evaluated on the tile's row-major byte
  addresses (for printing, ``is_equal``, ``expand`` and tilelang.tools.plot_layout). The
  swizzle acts on the last two axes; leading axes index a stack of such tiles.
"""

from __future__ import annotations

from typing import Any

from .layout import Layout, _buffer_of

#: swizzle widths in bytes: quarter, half and full bank (32 banks x 4 bytes)
WIDTHS = (32, 64, 128)
_CHUNK_BYTES = 16
_LINE_BYTES = 128


class SwizzledLayout(Layout):
    """The ``width``-byte XOR swizzle of a tile of ``element_bits``-bit elements (``width``
    None: rows too narrow for any swizzle, so the map is row-major); ``buffer`` is the shared
    buffer it was made for (None when made from a shape)."""

    def __init__(self, buffer: Any, shape: list[Any], element_bits: int, width: int | None) -> None:
        self.buffer, self.element_bits, self.width = buffer, int(element_bits), width
        super().__init__(shape, self._swizzle)

    def _swizzle(self, *indices: Any) -> list[Any]:
        from tvm import tirx

        if self.width is None or len(indices) < 2:
            return list(indices)
        *lead, row, col = indices
        per_chunk = _CHUNK_BYTES * 8 // self.element_bits  # elements in a 16-byte chunk
        per_line = _LINE_BYTES * 8 // self.element_bits  # elements in a 128-byte line
        chunks = self.width // _CHUNK_BYTES
        line = tirx.floordiv(row * self.shape[-1] + col, per_line)
        key = tirx.floormod(line, chunks)
        return [*lead, row, tirx.bitwise_xor(col, key * per_chunk)]

    def get_output_shape(self) -> list[Any]:
        """The tile's own shape: a swizzle moves elements only within their row."""
        return list(self.shape)

    def __repr__(self) -> str:
        what = f"{self.width}-byte swizzle" if self.width else "no swizzle (rows under 32 bytes)"
        return f"SwizzledLayout({self.shape}, {self.element_bits}-bit elements, {what} -> {self.forward_index})"


def _element_bits(dtype: Any) -> int:
    from tvm import DataType

    return int(DataType(str(dtype)).bits)


def _row_bytes(shape: list[Any], bits: int) -> int:
    return int(shape[-1]) * bits // 8


def _widest(shape: list[Any], bits: int, limit: int = _LINE_BYTES) -> int | None:
    """The widest swizzle whose width divides a row (and is at most ``limit`` bytes)."""
    row = _row_bytes(shape, bits)
    return next((w for w in reversed(WIDTHS) if w <= limit and row % w == 0), None)


def _target(args: tuple[Any, ...], what: str) -> tuple[Any, list[Any], int]:
    """(buffer or None, shape, element bits) from upstream's two call forms: a buffer (or a
    load or region of one), or ``(stride, continuous, element_size_in_bits)``."""
    if len(args) == 1:
        buffer = _buffer_of(args[0])
        return buffer, list(buffer.shape), _element_bits(buffer.dtype)
    if len(args) == 3 and all(isinstance(a, int) and not isinstance(a, bool) and a > 0 for a in args):
        stride, continuous, bits = args
        return None, [stride, continuous], bits
    raise TypeError(f"{what}: expected a buffer, or (stride, continuous, element_size_in_bits) as positive "
                    f"ints, got {args!r}")


def _fixed(width: int, name: str, args: tuple[Any, ...]) -> SwizzledLayout:
    buffer, shape, bits = _target(args, name)
    if len(shape) < 2:
        raise ValueError(f"{name}: a swizzle needs rows and columns; the tile is {len(shape)}-d {shape}")
    if _row_bytes(shape, bits) % width:
        raise ValueError(f"{name}: a row of {shape[-1]} {bits}-bit elements is {_row_bytes(shape, bits)} bytes, "
                         f"not a multiple of the {width}-byte swizzle; use a narrower swizzle or "
                         "make_swizzled_layout, which picks the widest that fits")
    return SwizzledLayout(buffer, shape, bits, width)


def make_swizzled_layout(buffer: Any, k_major: bool = True, allow_pad: bool = True) -> SwizzledLayout:
    """Ask for a bank-conflict-free layout of shared tile ``buffer``; as a Layout, the
    widest swizzle (128, 64 or 32 bytes) whose width divides a row."""
    del k_major, allow_pad  # the backend chooses its arrangement (see the module doc)
    buffer, shape, bits = _target((buffer,), "make_swizzled_layout")
    return SwizzledLayout(buffer, shape, bits, _widest(shape, bits) if len(shape) >= 2 else None)


def make_wgmma_swizzled_layout(buffer: Any, continuity: int | None = None, k_major: bool = True) -> SwizzledLayout:
    """Upstream's layout for Hopper wgmma operands: the widest swizzle that both a row and
    ``continuity`` elements (default: a row) fill. On CUDA the tensor-core pass lays wgmma
    operands out this way itself."""
    del k_major
    buffer, shape, bits = _target((buffer,), "make_wgmma_swizzled_layout")
    limit = _LINE_BYTES if continuity is None else int(continuity) * bits // 8
    return SwizzledLayout(buffer, shape, bits, _widest(shape, bits, limit) if len(shape) >= 2 else None)


def make_full_bank_swizzled_layout(*args: Any) -> SwizzledLayout:
    """The 128-byte swizzle: ``(buffer)`` or ``(stride, continuous, element_size_in_bits)``."""
    return _fixed(128, "make_full_bank_swizzled_layout", args)


def make_half_bank_swizzled_layout(*args: Any) -> SwizzledLayout:
    """The 64-byte swizzle: ``(buffer)`` or ``(stride, continuous, element_size_in_bits)``."""
    return _fixed(64, "make_half_bank_swizzled_layout", args)


def make_quarter_bank_swizzled_layout(*args: Any) -> SwizzledLayout:
    """The 32-byte swizzle: ``(buffer)`` or ``(stride, continuous, element_size_in_bits)``."""
    return _fixed(32, "make_quarter_bank_swizzled_layout", args)


__all__ = ["SwizzledLayout", "make_full_bank_swizzled_layout", "make_half_bank_swizzled_layout",
           "make_quarter_bank_swizzled_layout", "make_swizzled_layout", "make_wgmma_swizzled_layout"]

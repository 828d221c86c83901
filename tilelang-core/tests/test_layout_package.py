"""Upstream's layout modules and tools: ``tilelang.layout.{layout,fragment,swizzle}``, the
bank swizzles, ``Layout.repeat``, ``Fragment.replicate`` and ``tilelang.tools.plot_layout``.

The swizzles are checked against the PTX ISA's definition, computed here on numpy byte
addresses: bits 4.. of a row-major address XOR bits 7.. (modulo the chunks in the width)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError
from tilelang.layout import (
    Fragment,
    Layout,
    make_fully_replicated_layout_fragment,
    make_gemm_fragment_8x8,
    make_linear_layout,
    make_swizzled_layout,
)
from tilelang.layout.layout import evaluate_indices
from tilelang.layout.swizzle import (
    make_full_bank_swizzled_layout,
    make_half_bank_swizzled_layout,
    make_quarter_bank_swizzled_layout,
)
from tvm import tirx

BANK_SWIZZLES = {128: make_full_bank_swizzled_layout, 64: make_half_bank_swizzled_layout,
                 32: make_quarter_bank_swizzled_layout}


def _ptx_swizzle(rows: int, cols: int, bits: int, width: int) -> np.ndarray:
    """Storage column of each element of a row-major rows x cols tile under the width-byte
    swizzle: the byte address with bits [4, 4 + log2(width / 16)) XOR bits [7, ...)."""
    chunks = width // 16
    element = np.arange(rows * cols, dtype=np.int64)
    address = element * bits // 8
    swizzled = address ^ (((address >> 7) % chunks) << 4)
    stored = swizzled * 8 // bits + element % max(1, 8 // bits)  # sub-byte: the element within its byte
    return (stored % cols).reshape(rows, cols)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
@pytest.mark.parametrize("width", [32, 64, 128])
def test_bank_swizzles_are_the_ptx_xor_swizzles(dtype: str, width: int) -> None:
    bits = tirx.decl_buffer((1,), dtype).dtype.bits
    cols = 2 * width * 8 // bits  # rows of two swizzle widths
    buffer = tirx.decl_buffer((16, cols), dtype, name="A_shared", scope="shared.dyn")
    layout = BANK_SWIZZLES[width](buffer)
    out = evaluate_indices(layout)
    assert (out[0].reshape(16, cols) == np.arange(16)[:, None]).all()  # rows stay
    assert (out[1].reshape(16, cols) == _ptx_swizzle(16, cols, bits, width)).all()
    assert layout.get_output_shape() == [16, cols]
    # the (stride, continuous, element bits) form is the same map
    assert BANK_SWIZZLES[width](16, cols, bits).is_equal(layout)


def test_full_bank_swizzle_spreads_a_column_of_chunks_over_all_banks() -> None:
    out = evaluate_indices(make_full_bank_swizzled_layout(8, 64, 16))[1].reshape(8, 64)
    # element 0 of chunk 0 of each of 8 rows: 8 different 16-byte chunks of the 128-byte line
    assert sorted(out[:, 0] // 8) == list(range(8))


def test_make_swizzled_layout_takes_the_widest_swizzle_a_row_fills() -> None:
    def width(cols: int, dtype: str = "float16") -> int | None:
        return make_swizzled_layout(tirx.decl_buffer((8, cols), dtype, scope="shared")).width

    assert (width(64), width(32), width(16), width(48), width(8)) == (128, 64, 32, 32, None)
    narrow = make_swizzled_layout(tirx.decl_buffer((8, 8), "float16", scope="shared"))
    assert narrow.is_identity_for([8, 8])  # 16-byte rows: no swizzle fits


def test_swizzles_of_a_stack_are_the_expanded_tile_swizzle() -> None:
    for make in BANK_SWIZZLES.values():
        tile = make(tirx.decl_buffer((8, 64), "float16", scope="shared"))
        assert make(tirx.decl_buffer((3, 2, 8, 64), "float16", scope="shared")).is_equal(tile.expand([3, 2]))


def test_bank_swizzle_refuses_rows_it_does_not_fill() -> None:
    with pytest.raises(ValueError, match=re.escape("make_full_bank_swizzled_layout: a row of 32 16-bit elements "
                                                   "is 64 bytes, not a multiple of the 128-byte swizzle")):
        make_full_bank_swizzled_layout(tirx.decl_buffer((8, 32), "float16", scope="shared"))
    with pytest.raises(TypeError, match="expected a buffer, or \\(stride, continuous, element_size_in_bits\\)"):
        make_half_bank_swizzled_layout(8, 32)


def _annotated_copy(make_layout):
    @T.prim_func
    def kernel(A: T.Tensor((32, 64), "float16"), B: T.Tensor((32, 64), "float16")):
        with T.Kernel(1, threads=128):
            A_shared = T.alloc_shared((32, 64), "float16")
            T.annotate_layout({A_shared: make_layout(A_shared)})
            T.copy(A, A_shared)
            T.copy(A_shared, B)

    return kernel


def test_annotated_bank_swizzle_compiles_and_keeps_results() -> None:
    kernel = tilelang.compile(_annotated_copy(make_full_bank_swizzled_layout), target="cpu")
    a = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float16)
    b = np.zeros_like(a)
    kernel(a, b)
    np.testing.assert_array_equal(b, a)  # a copy: exact


def test_annotation_with_a_layout_made_from_a_shape_names_the_fix() -> None:
    with pytest.raises(LanguageError, match=re.escape("the layout given for 'A_shared' was made for a shape, "
                                                      "not a buffer; make it from the buffer: "
                                                      "make_swizzled_layout(A_shared)")):
        tilelang.compile(_annotated_copy(lambda buf: make_full_bank_swizzled_layout(32, 64, 16)), target="cpu")


def test_layout_repeat_stacks_copies_along_one_axis() -> None:
    atom = Layout([8, 64], lambda i, j: i * 64 + j)
    assert atom.repeat(dim=0, factor=2).is_equal(Layout([16, 64], lambda i, j: [i // 8, (i % 8) * 64 + j]))
    assert atom.repeat(dim=-1, factor=3).is_equal(Layout([8, 192], lambda i, j: [j // 64, i * 64 + j % 64]))
    assert atom.repeat(dim=1, factor=3).get_output_shape() == [3, 512]
    assert atom.repeat(dim=0, factor=1) is atom
    with pytest.raises(ValueError, match="factor must be at least 1, got 0"):
        atom.repeat(dim=0, factor=0)
    with pytest.raises(ValueError, match=re.escape("dim 2 is outside the 2 input axes of [8, 64]")):
        atom.repeat(dim=2, factor=2)


def _holders(fragment: Fragment) -> np.ndarray:
    """Threads holding each element: (replicas, elements)."""
    exprs = [fragment.map_forward_thread(fragment.forward_vars, r) for r in range(fragment.replicate_size)]
    return evaluate_indices(fragment, exprs)


def test_fragment_replicate_gives_each_thread_group_a_whole_copy() -> None:
    base = make_gemm_fragment_8x8()  # 32 threads, 2 registers each
    twice = base.replicate(2)
    assert (twice.replicate_size, twice.get_thread_size()) == (2, 64)
    held = _holders(twice)
    np.testing.assert_array_equal(held[1], held[0] + 32)
    np.testing.assert_array_equal(held[0], _holders(base)[0])
    assert twice.replicate(2).replicate_size == 4 and twice.replicate(2).get_thread_size() == 128
    # repeating a replicated fragment keeps its replicas: 2 x 1 copies on the threads
    block = twice.repeat([2, 1], repeat_on_thread=True)
    held = _holders(block)
    assert block.get_thread_size() == 128 and sorted(set(held.ravel())) == list(range(128))
    with pytest.raises(ValueError, match="expected a count of at least 1, got 0"):
        base.replicate(0)


def test_fully_replicated_fragment_is_held_whole_by_every_thread() -> None:
    fragment = make_fully_replicated_layout_fragment(tirx.decl_buffer((4, 8), "float32"), 64)
    held = _holders(fragment)
    assert fragment.get_thread_size() == 64
    assert all(sorted(held[:, e]) == list(range(64)) for e in range(32))
    np.testing.assert_array_equal(evaluate_indices(fragment)[0], np.arange(32))


def test_linear_layout_is_row_major() -> None:
    assert make_linear_layout(tirx.decl_buffer((4, 8, 2), "float16")).is_identity_for([4, 8, 2])


def test_plot_layout_writes_each_format(tmp_path) -> None:
    pytest.importorskip("matplotlib")  # tilelang-core[vis]
    from tilelang.tools import plot_layout

    written = plot_layout(make_half_bank_swizzled_layout(8, 32, 16), save_directory=tmp_path, name="swizzle",
                          formats="png,svg", view="both")
    assert written == [tmp_path / "swizzle.png", tmp_path / "swizzle.svg"]
    assert (tmp_path / "swizzle.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fragment = make_gemm_fragment_8x8().repeat([2, 1], repeat_on_thread=True).replicate(2)
    (path,) = plot_layout(fragment, save_directory=tmp_path, name="fragment", formats=["pdf"])
    assert path.read_bytes()[:5] == b"%PDF-"
    svg = (tmp_path / "swizzle.svg").read_text()
    assert "storage [8, 32]" in svg.replace("&#x27;", "'")  # the storage panel's title


def test_plot_layout_refuses_unknown_formats_and_non_layouts(tmp_path) -> None:
    from tilelang.tools import plot_layout

    with pytest.raises(ValueError, match=re.escape("unknown format(s) ['jpg']; choose from pdf, png, svg or 'all'")):
        plot_layout(make_gemm_fragment_8x8(), save_directory=tmp_path, formats="png,jpg")
    with pytest.raises(TypeError, match="expected a tilelang.layout.Layout or Fragment, got dict"):
        plot_layout({}, save_directory=tmp_path)
    with pytest.raises(ValueError, match="view must be one of input, output, both, got 'side'"):
        plot_layout(make_gemm_fragment_8x8(), save_directory=tmp_path, view="side")
    pytest.importorskip("matplotlib")
    with pytest.raises(ValueError, match=re.escape("grid_shape (3, 5) must be (rows, columns) of 64 cells")):
        plot_layout(Layout([8, 8], lambda i, j: (j, i)), save_directory=tmp_path, grid_shape=(3, 5))
    (path,) = plot_layout(Layout([8, 8], lambda i, j: (j, i)), save_directory=tmp_path, name="t", formats="svg",
                          view="output", grid_shape=(4, 16))
    assert "storage [8, 8]" in path.read_text() and "logical" not in path.read_text()


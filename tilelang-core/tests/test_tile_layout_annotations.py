"""Upstream's Layout / Fragment annotations on on-chip tiles: maps evaluate as upstream's,
hints that change no result are accepted, a one-to-one shared layout is kept row-major
(with a warning) and a many-to-one one refused. CPU runs compare with numpy exactly."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang.language as T
from tilelang import LanguageError
from tilelang.layout import Fragment, Layout

from test_language_surface import cpu, cuda_source

rng = np.random.default_rng(7)

def test_layout_and_fragment_evaluate_their_maps():
    transpose = Layout((4, 8), lambda i, j: [j, i])
    assert [int(x) for x in transpose.get_output_shape()] == [8, 4]
    assert [int(x) for x in transpose.map_forward_index([1, 2])] == [2, 1]
    frag = Fragment((16, 8), forward_thread_fn=lambda i, j: i * 2 + j // 4, forward_index_fn=lambda i, j: j % 4)
    assert int(frag.get_thread_size()) == 32 and int(frag.map_forward_thread([3, 5])) == 7
    replicated = Fragment((16,), forward_fn=lambda i, rep: (i % 4 + rep * 4, i // 4), replicate=2)
    assert int(replicated.get_thread_size()) == 8 and int(replicated.map_forward_thread([5], 1)) == 5



def test_the_mma_8x8_fragments_and_their_repeats_hold_each_element_once():
    from tilelang.layout import make_gemm_fragment_8x8, make_gemm_fragment_8x8_transposed

    piece, transposed = make_gemm_fragment_8x8(), make_gemm_fragment_8x8_transposed()
    assert int(piece.map_forward_thread([3, 5])) == 14 and int(transposed.map_forward_thread([5, 3])) == 14
    for fragment, shape, threads, registers in [
        (transposed.repeat([2, 1], repeat_on_thread=False), (16, 8), 32, 4),  # upstream's stmatrix test
        (piece.repeat([2, 2], repeat_on_thread=True), (16, 16), 128, 2),
        (piece.repeat([1, 2], lower_dim_first=False), (8, 16), 32, 4),
    ]:
        assert fragment.shape == list(shape) and int(fragment.get_thread_size()) == threads
        places = {(int(fragment.map_forward_thread([i, j])), int(fragment.map_forward_index([i, j])[-1]))
                  for i in range(shape[0]) for j in range(shape[1])}
        assert len(places) == shape[0] * shape[1] and {r for _, r in places} == set(range(registers))
    # the copy in the second 8 rows keeps its threads and takes the next two registers
    assert int(transposed.repeat([2, 1]).map_forward_thread([9, 3])) == 12
    assert [int(x) for x in transposed.repeat([2, 1]).map_forward_index([9, 3])] == [3]
    with pytest.raises(ValueError, match="Fragment.repeat: expected a count of at least 1 per axis"):
        piece.repeat([0, 1])


def layout_kernel(layout_of):
    @T.prim_func
    def main(A: T.Tensor((16, 8), "float32"), B: T.Tensor((16, 8), "float32")):
        with T.Kernel(1, threads=32) as _:
            s = T.alloc_shared((16, 8), "float32")
            f = T.alloc_fragment((16, 8), "float32")
            T.annotate_layout(layout_of(s, f))
            T.copy(A, s)
            T.copy(s, f)
            for i, j in T.Parallel(16, 8):
                f[i, j] = f[i, j] + 1.0
            T.copy(f, B)
    return main


def test_row_major_layout_and_fragment_hint_are_accepted():
    frag = Fragment((16, 8), forward_thread_fn=lambda i, j: (i * 8 + j) % 32, forward_index_fn=lambda i, j: (i * 8 + j) // 32)
    func = layout_kernel(lambda s, f: {s: T.Layout((16, 8), lambda i, j: [i, j]), f: frag})
    a = rng.standard_normal((16, 8)).astype("float32")
    b = np.zeros((16, 8), "float32")
    cpu(func)(a, b)
    np.testing.assert_array_equal(b, a + 1)
    assert "B_ptr + " in cuda_source(func)  # lowers for CUDA too (the hint changes nothing)


def test_a_one_to_one_shared_layout_is_accepted_row_major_and_a_many_to_one_refused():
    # upstream's issue 2632: a transposed or permuted order is kept row-major here (results
    # cannot tell), with a warning; two elements on one address are refused
    with pytest.warns(UserWarning, match=r"'s' is stored row-major, not in the order the Layout gives"):
        func = layout_kernel(lambda s, f: {s: T.Layout((16, 8), lambda i, j: [j, i ^ 1])})
    a, b = rng.standard_normal((16, 8)).astype("float32"), np.zeros((16, 8), "float32")
    cpu(func)(a, b)
    np.testing.assert_array_equal(b, a + 1)
    # a Layout built from the buffer's own shape (its dims are IntImm), as upstream's
    # example_gemm_intrinsics writes its swizzle: enumerated all the same
    with pytest.warns(UserWarning, match=r"'s' is stored row-major"):
        layout_kernel(lambda s, f: {s: T.Layout(s.shape, lambda i, j: [j // 4, i, j % 4 ^ i % 4])})
    with pytest.raises(LanguageError, match=r"the Layout of shared buffer `s` must be injective: elements \(0, 0\) "
                                            r"and \(0, 4\) both map to physical coordinates \(0, 0\)"):
        layout_kernel(lambda s, f: {s: T.Layout((16, 8), lambda i, j: [i, j % 4])})


def test_layouts_that_cannot_be_honoured_are_refused():
    n = T.symbolic("n")  # a map the check cannot enumerate: refused as before
    with pytest.raises(LanguageError, match=r"order other than row-major is not implemented; use .*make_swizzled_layout"):
        layout_kernel(lambda s, f: {s: T.Layout((16, 8), lambda i, j: [j, (i * n) % 16])})
    frag = Fragment((16, 8), forward_thread_fn=lambda i, j: i, forward_index_fn=lambda i, j: j)
    with pytest.raises(LanguageError, match="a Fragment describes registers of a T.alloc_fragment buffer"):
        layout_kernel(lambda s, f: {s: frag})


def test_layout_expand_linearize_and_compare_as_upstream():
    """Upstream's Layout.expand (a stack of tiles), get_linearized_forward_index (one offset,
    row-major over the output shape) and is_equal; two layouts' indices compare directly."""
    from tvm.sym.analyzer import Analyzer

    base = Layout([16, 128], lambda j, k: j * 128 + k)
    stacked = base.expand([4])
    assert stacked.is_equal(Layout([4, 16, 128], lambda i, j, k: [i, j * 128 + k]))
    assert not stacked.is_equal(Layout([4, 16, 128], lambda i, j, k: [i, k * 16 + j]))
    assert [int(d) for d in stacked.get_output_shape()] == [4, 2048] and base.expand(()) is base
    assert stacked.map_forward_index([3, 2, 5]) == [3, 261]
    assert Layout([16, 128], lambda j, k: [j, k]).expand(4).is_equal(Layout([4, 16, 128], lambda i, j, k: [i, j, k]))
    analyzer = Analyzer()
    transposed = Layout([2, 32], lambda i, j: [j, i])
    assert analyzer.can_prove_equal(transposed.get_linearized_forward_index(),
                                    Layout([2, 32], lambda i, j: j * 2 + i).get_linearized_forward_index())
    assert analyzer.can_prove_equal(Layout([64], lambda i: [i // 32, i % 32]).get_linearized_forward_index(),
                                    Layout([64], lambda i: i).get_linearized_forward_index())
    with pytest.raises(ValueError, match=r"Layout.expand\(\[-1\]\): each leading extent is a positive int"):
        base.expand([-1])
    with pytest.raises(TypeError, match=r"Layout.expand\('4'\): the leading extents are an int or a list"):
        base.expand("4")
    frag = Fragment([16, 8], forward_fn=lambda i, j: (i * 2 + j // 4, j % 4))
    assert frag.is_equal(Fragment([16, 8], forward_fn=lambda i, j: (i * 2 + j // 4, j % 4)))
    assert not frag.is_equal(Fragment([16, 8], forward_fn=lambda i, j: (i * 2 + j // 4 + 1, j % 4)))
    with pytest.raises(TypeError, match="Fragment.expand"):
        frag.expand(2)

"""``T.gemm_sp``: a GEMM whose A is 2:4 structured-sparse, given compressed, as upstream
TileLang spells it.

A dense A of shape (M, K) keeps at most ``nonzeros`` of every ``group`` consecutive elements
along K (2 of 4 for 8- and 16-bit types; 1 of 2 for 32-bit types). Compressed, it is
``A_sparse`` (M, K / 2), the kept values of each group in order, and the metadata ``E``
(M, K / e_factor) of an integer type: each 4-bit chunk of an ``E`` element, lowest first,
describes one group -- bits 1:0 the position in the group of its first kept value, bits 3:2
that of the second (for 32-bit types the positions count 16-bit halves: 0b0100 keeps the
first element, 0b1110 the second). One ``E`` element covers ``e_factor = bits(E) / 4 * group``
elements of K. This is the layout upstream's ``compress`` (examples/gemm_sp) writes.

Here ``T.gemm_sp`` expands the tile of A where it is used: a dense tile of A's scope (shared
or fragment) is filled by a ``T.Parallel`` nest that reads each element's group chunk from
``E`` and takes the kept value or zero, and ``T.gemm`` multiplies it. Every backend runs it
as it runs a dense GEMM (the CUDA backend on mma.sync / wgmma): the result is the sparse
product's, the speed is the dense GEMM's (the sparse tensor-core instructions, mma.sp and
wgmma.sp, are not used).
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.script.ir_builder import tirx as _ib
from tvm.sym.analyzer import Analyzer

from ..errors import LanguageError
from .dtypes import dtype as as_dtype
from .loop import Parallel

BITS_PER_GROUP = 4  # one metadata chunk per group


def sparse_group(dtype: Any) -> tuple[int, int]:
    """(nonzeros, group) of a 2:4-sparse A of this element type: (1, 2) for 32-bit types,
    (2, 4) for 8- and 16-bit ones."""
    bits = as_dtype(dtype).bits
    if bits == 32:
        return 1, 2
    if bits in (8, 16):
        return 2, 4
    raise LanguageError(f"T.gemm_sp: A of {dtype} has no 2:4 sparse form (8-, 16- or 32-bit types have one)")


def e_factor(a_dtype: Any, meta_dtype: Any) -> int:
    """How many elements of A along K one metadata element describes."""
    meta = as_dtype(meta_dtype)
    if not str(meta).startswith(("int", "uint")) or meta.bits not in (8, 16, 32):
        raise LanguageError(f"T.gemm_sp: the metadata E must be an 8-, 16- or 32-bit integer tensor, got {meta_dtype}")
    return meta.bits // BITS_PER_GROUP * sparse_group(a_dtype)[1]


def _buffer(value: Any, what: str) -> Any:
    if not isinstance(value, tirx.Buffer) or len(value.shape) != 2:
        raise LanguageError(f"T.gemm_sp: {what} must be a 2-d tile (a T.alloc_shared or T.alloc_fragment buffer), "
                            f"got {value!r}")
    return value


def _check_shape(buffer: Any, want: tuple[Any, Any], what: str, how: str) -> None:
    got = tuple(buffer.shape)
    analyzer = Analyzer()
    if any(not analyzer.can_prove_equal(g, w) for g, w in zip(got, want)):
        raise LanguageError(f"T.gemm_sp: {what} {buffer.name} has shape {list(got)}, expected {list(want)} ({how})")


def gemm_sp(A_sparse: Any, E: Any, B: Any, C: Any, transpose_A: bool = False, transpose_E: bool = False,
            transpose_B: bool = False, policy: Any = None, clear_accum: bool = False, k_pack: int = 1,
            wg_wait: int = 0, annotations: Any = None) -> None:
    """C (+)= op(A) @ op(B), A given as ``A_sparse`` and its metadata ``E`` (see the module
    docstring); ``transpose_A`` / ``transpose_E``: A_sparse is (K / 2, M), E is
    (K / e_factor, M). ``policy``, ``k_pack``, ``wg_wait``, ``annotations``: as ``T.gemm``."""
    from .tile import gemm

    del annotations
    a, e, b = _buffer(A_sparse, "A_sparse"), _buffer(E, "E"), _buffer(B, "B")
    nonzeros, group = sparse_group(a.dtype)
    factor = e_factor(a.dtype, e.dtype)
    m_extent = a.shape[1] if transpose_A else a.shape[0]
    k_extent = b.shape[1] if transpose_B else b.shape[0]
    sparse = (k_extent // 2, m_extent) if transpose_A else (m_extent, k_extent // 2)
    _check_shape(a, sparse, "A_sparse", "half of B's K")
    if isinstance(k_extent, int) and k_extent % factor:
        raise LanguageError(f"T.gemm_sp: K = {k_extent} is not a multiple of {factor}, the elements of A one "
                            f"{e.dtype} metadata element describes")
    meta = (k_extent // factor, m_extent) if transpose_E else (m_extent, k_extent // factor)
    _check_shape(e, meta, "E", f"one {e.dtype} element per {factor} elements of K")
    scope = "shared.dyn" if a.scope().startswith("shared") else a.scope()
    dense_shape = [k_extent, m_extent] if transpose_A else [m_extent, k_extent]
    dense = _ib.alloc_buffer(dense_shape, str(a.dtype), scope=scope)
    half_positions = as_dtype(a.dtype).bits == 32  # 32-bit: chunk positions count halves
    zero = tirx.const(0, str(a.dtype))
    with Parallel(*dense_shape) as (i, j):
        m, k = (j, i) if transpose_A else (i, j)
        word = tirx.BufferLoad(e, [k // factor, m] if transpose_E else [m, k // factor])
        word = word if str(e.dtype) == "int32" else tirx.Cast("int32", word)
        chunk = tirx.shift_right(word, tirx.const(BITS_PER_GROUP, "int32") * ((k % factor) // group))
        position = k % group
        value = zero
        for kept in reversed(range(nonzeros)):  # the first kept value wins a (malformed) tie
            index = tirx.bitwise_and(tirx.shift_right(chunk, tirx.const(2 * kept, "int32")), tirx.const(3, "int32"))
            if half_positions:
                index = tirx.shift_right(index, tirx.const(1, "int32"))
            column = k // group * nonzeros + kept
            load = tirx.BufferLoad(a, [column, m] if transpose_A else [m, column])
            value = tirx.Select(index == position, load, value)
        _ib.buffer_store(dense, value, [i, j])
    gemm(dense, b, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait)


def wgmma_gemm_sp(A_sparse: Any, E: Any, B: Any, C: Any, transpose_A: bool = False, transpose_E: bool = False,
                  transpose_B: bool = False, policy: Any = None, clear_accum: bool = False,
                  annotations: Any = None) -> None:
    """Upstream's Hopper sparse GEMM that returns before the product is done: here
    ``T.gemm_sp`` (as ``T.wgmma_gemm`` is ``T.gemm``), done when the next statement runs."""
    gemm_sp(A_sparse, E, B, C, transpose_A, transpose_E, transpose_B, policy, clear_accum, annotations=annotations)

"""``Fragment``: a register layout — which thread holds each element of a tile and where
in its registers — with upstream TileLang's constructor forms and its ``repeat`` /
``replicate`` composition (how a warp's fragment becomes a block's). On a
``T.alloc_fragment`` buffer it is a hint (see tilelang.layout); it is also what
tilelang.tools.plot_layout draws."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .layout import Layout, _as_list


class Fragment(Layout):
    """A register layout: which thread holds each element of a tile, and where in its
    registers (upstream's constructor forms). See the module doc for how it is used."""

    def __init__(self, shape: Sequence[Any], forward_fn: Callable[..., Any] | None = None,
                 forward_thread_fn: Callable[..., Any] | None = None, replicate: int = 1,
                 forward_index_fn: Callable[..., Any] | None = None) -> None:
        from tvm import tirx

        if forward_fn is None and forward_thread_fn is None:
            raise ValueError("Fragment needs forward_fn (thread and index) or forward_thread_fn")
        self.replicate_size = int(replicate)
        if self.replicate_size < 1:
            raise ValueError(f"Fragment: replicate must be at least 1, got {replicate!r}")
        self.replicate_var = tirx.Var("rep", "int32") if self.replicate_size > 1 else None
        extra = [self.replicate_var] if self.replicate_var is not None else []
        if forward_fn is not None:
            self._thread_fn = lambda *args: forward_fn(*args)[0]
            index_fn = lambda *v: forward_fn(*v, *extra)[1]
        else:
            self._thread_fn = forward_thread_fn
            index_fn = forward_index_fn if forward_index_fn is not None else (lambda *v: [])
        super().__init__(shape, index_fn)
        self.forward_thread = self._thread_fn(*self.forward_vars, *extra)

    @property
    def thread(self) -> Any:
        return self.forward_thread

    def is_equal(self, other: Any) -> bool:
        """Same storage indices, replication and thread of every element (every replica)."""
        from tvm.sym.analyzer import Analyzer

        if not isinstance(other, Fragment) or other.replicate_size != self.replicate_size or not super().is_equal(other):
            return False
        analyzer = Analyzer()
        return all(analyzer.can_prove_equal(self.map_forward_thread(self.forward_vars, rep),
                                            other.map_forward_thread(self.forward_vars, rep))
                   for rep in range(self.replicate_size))

    def expand(self, leading: Any) -> Layout:
        raise TypeError("Fragment.expand: a stack of register tiles has no single thread map; expand the "
                        "shared-memory Layout, or build the larger Fragment itself")

    def map_forward_thread(self, indices: Sequence[Any], rep: Any = 0) -> Any:
        """The thread that holds the element at ``indices`` (replica ``rep``)."""
        from tvm import tirx
        from tvm.sym.analyzer import Analyzer

        extra = [tirx.const(rep, "int32") if isinstance(rep, int) else rep] if self.replicate_var is not None else []
        return Analyzer().simplify(self._thread_fn(*self._args(indices), *extra))

    def get_thread_size(self) -> Any:
        """How many threads hold the tile (the largest thread index, plus one)."""
        from tvm.ir import Range
        from tvm.sym.analyzer import Analyzer

        analyzer = Analyzer()
        for var, extent in zip(self.forward_vars, self.shape):
            analyzer.bind(var, Range.from_min_extent(0, extent))
        if self.replicate_var is not None:
            analyzer.bind(self.replicate_var, Range.from_min_extent(0, self.replicate_size))
        return analyzer.const_int_bound(self.forward_thread).max_value + 1

    def repeat(self, repeats: Any, repeat_on_thread: bool = False, lower_dim_first: bool = True) -> Fragment:
        """The tile ``repeats`` times (an int for the first axis, or one count per axis): copy
        ``r`` of the tile sits at block ``r`` (the first axis' block varying fastest with
        ``lower_dim_first``, else the last axis'), held by threads ``r * threads`` on (with
        ``repeat_on_thread``) or in registers ``r * registers`` on of the same threads."""
        from tvm import tirx

        counts = [int(r) for r in _as_list(repeats)]
        counts += [1] * (len(self.shape) - len(counts))
        if len(counts) != len(self.shape) or min(counts) < 1:
            raise ValueError(f"Fragment.repeat: expected a count of at least 1 per axis of {self.shape}, got {repeats!r}")
        shape = [extent * count for extent, count in zip(self.shape, counts)]
        # the registers a thread holds: the extent of the last register index
        registers = int(self.get_output_shape()[-1]) if self.forward_index else 1
        threads = self.get_thread_size()
        order = list(range(len(shape)))[:: 1 if lower_dim_first else -1]
        base = self

        def forward(*args: Any) -> tuple[Any, list[Any]]:
            indices, rep = args[:len(shape)], args[len(shape):]
            inner = [tirx.floormod(i, extent) for i, extent in zip(indices, base.shape)]
            copy, stride = tirx.const(0, "int32"), 1
            for axis in order:
                copy, stride = copy + tirx.floordiv(indices[axis], base.shape[axis]) * stride, stride * counts[axis]
            thread = base.map_forward_thread(inner, *rep)
            local = base.map_forward_index(inner)
            if repeat_on_thread:
                return thread + copy * threads, local
            return thread, [*local[:-1], local[-1] + copy * registers] if local else [copy]

        return Fragment(shape, forward_fn=forward, replicate=self.replicate_size)

    def replicate(self, repeats: int) -> Fragment:
        """The tile held ``repeats`` times over: replica ``r`` of an element is held by the
        thread replica ``r % replicate_size`` names, plus ``r // replicate_size`` times this
        fragment's threads (each group of threads holds a whole copy, in the same registers)."""
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"Fragment.replicate: expected a count of at least 1, got {repeats!r}")
        base, old, threads = self, self.replicate_size, self.get_thread_size()

        def forward(*args: Any) -> tuple[Any, list[Any]]:
            from tvm import tirx

            indices, rep = args[:len(base.shape)], args[len(base.shape):]
            rep = rep[0] if rep else tirx.const(0, "int32")
            inner_rep = [tirx.floormod(rep, old)] if old > 1 else []
            return (base.map_forward_thread(indices, *inner_rep) + tirx.floordiv(rep, old) * threads,
                    base.map_forward_index(indices))

        return Fragment(self.shape, forward_fn=forward, replicate=old * repeats)

    def __repr__(self) -> str:
        rep = f", replicate {self.replicate_size}" if self.replicate_var is not None else ""
        return f"Fragment({self.shape} -> thread {self.forward_thread}, index {self.forward_index}{rep})"


def make_gemm_fragment_8x8() -> Fragment:
    """An 8x8 piece of a tensor-core accumulator (mma.sync's m16n8 C fragment, one half):
    row ``i`` is held by threads ``4 i`` to ``4 i + 3``, two consecutive columns each."""
    return Fragment((8, 8), forward_fn=lambda i, j: (i * 4 + j // 2, [j % 2]))


def make_gemm_fragment_8x8_transposed() -> Fragment:
    """make_gemm_fragment_8x8 with rows and columns exchanged: column ``j`` is held by
    threads ``4 j`` to ``4 j + 3``, two consecutive rows each."""
    return Fragment((8, 8), forward_fn=lambda i, j: (j * 4 + i // 2, [i % 2]))


def make_fully_replicated_layout_fragment(buffer: Any, threads: int) -> Fragment:
    """Every element of ``buffer`` held by each of ``threads`` threads, at its row-major
    offset (upstream's layout for a fragment every thread reads whole)."""
    from .layout import _buffer_of

    shape = list(buffer) if isinstance(buffer, (list, tuple)) else list(_buffer_of(buffer).shape)

    def forward(*args: Any) -> tuple[Any, list[Any]]:
        offset: Any = 0
        for index, extent in zip(args[:len(shape)], shape):
            offset = offset * extent + index
        return (args[len(shape)] if len(args) > len(shape) else 0), [offset]

    return Fragment(shape, forward_fn=forward, replicate=int(threads))


__all__ = ["Fragment", "make_fully_replicated_layout_fragment", "make_gemm_fragment_8x8",
           "make_gemm_fragment_8x8_transposed"]

"""Layouts for ``T.annotate_layout``, with upstream TileLang's spelling:
``tilelang.layout.make_swizzled_layout(buffer)``, ``T.Layout(shape, forward_fn)`` and
``T.Fragment(shape, forward_thread_fn=..., forward_index_fn=...)``.

The compiler chooses layouts itself (fragments follow their instructions, shared tiles that
feed tensor cores are laid out bank-conflict free). What a kernel can ask for:

* ``make_swizzled_layout(A_shared)``: the bank-conflict-free layout of a shared tile the
  compiler would otherwise keep row-major; backends with banked shared memory (CUDA) give
  it one, others keep their layout, which never changes results.
* a ``Layout`` equal to the buffer's own row-major order (``lambda *i: i``): honoured as is.
  Another one-to-one map on an on-chip tile (``lambda i: i ^ 1``) is accepted and not
  followed, with a warning: the tile stays row-major, which never changes results (every
  access goes through the language). A many-to-one map is refused, naming two elements it
  sends to one address, as upstream refuses it. A map the check cannot enumerate (a symbolic
  shape, over 2**20 elements, an operation it does not evaluate) is refused as before:
  storing a tile in an arbitrary order is not implemented.
* a ``Fragment`` on a ``T.alloc_fragment`` buffer: accepted as a hint and not followed —
  each backend places fragment elements in the layout of the instructions that use them
  (the CPU keeps a fragment as an ordinary array), which never changes results.

``Layout`` and ``Fragment`` evaluate their maps (``map_forward_index``,
``map_forward_thread``, ``get_output_shape``), so kernels and tests can inspect them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SwizzledLayout:
    """A bank-conflict-free layout for one 2-d shared tile."""

    buffer: Any


def make_swizzled_layout(buffer: Any) -> SwizzledLayout:
    return SwizzledLayout(buffer)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) or type(value).__name__ == "Array" else [value]


_PLACEHOLDERS: list[Any] = []


def _placeholder(axis: int) -> Any:
    """Input axis ``axis``'s variable, one for every layout (as upstream's placeholders), so
    the index expressions of two layouts compare directly."""
    from tvm import tirx

    while len(_PLACEHOLDERS) <= axis:
        _PLACEHOLDERS.append(tirx.Var(f"i{len(_PLACEHOLDERS)}", "int32"))
    return _PLACEHOLDERS[axis]


class Layout:
    """An index map from a tile's logical indices to its storage indices:
    ``Layout((M, N), lambda i, j: [j, i])``."""

    def __init__(self, shape: Sequence[Any], forward_fn: Callable[..., Any]) -> None:
        self.shape = [int(d) if isinstance(d, int) else d for d in _as_list(shape)]
        self._index_fn = forward_fn
        self.forward_vars = [_placeholder(axis) for axis in range(len(self.shape))]
        self.forward_index = self._indices(forward_fn(*self.forward_vars))

    @staticmethod
    def _indices(value: Any) -> list[Any]:
        from tvm import tirx

        return [tirx.const(e, "int32") if isinstance(e, int) else e for e in _as_list(value)]

    # upstream's accessors
    @property
    def index(self) -> list[Any]:
        return list(self.forward_index)

    def get_input_shape(self) -> list[Any]:
        return list(self.shape)

    def get_forward_vars(self) -> list[Any]:
        return list(self.forward_vars)

    def get_forward_index(self) -> list[Any]:
        return self.index

    def _args(self, indices: Sequence[Any]) -> list[Any]:
        from tvm import tirx

        indices = list(indices)
        if len(indices) != len(self.forward_vars):
            raise ValueError(f"{type(self).__name__} of a {len(self.shape)}-d tile mapped with {len(indices)} indices")
        return [tirx.const(i, "int32") if isinstance(i, int) else i for i in indices]

    def map_forward_index(self, indices: Sequence[Any]) -> list[Any]:
        """The storage indices of the element at ``indices`` (simplified expressions)."""
        from tvm.sym.analyzer import Analyzer

        analyzer = Analyzer()
        return [analyzer.simplify(e) for e in self._indices(self._index_fn(*self._args(indices)))]

    def __call__(self, *indices: Any) -> list[Any]:
        return self.map_forward_index(indices)

    def get_output_shape(self) -> list[Any]:
        """The extent of each storage axis (the largest index the map reaches, plus one)."""
        from tvm.ir import Range
        from tvm.sym.analyzer import Analyzer

        analyzer = Analyzer()
        for var, extent in zip(self.forward_vars, self.shape):
            analyzer.bind(var, Range.from_min_extent(0, extent))
        return [analyzer.simplify(analyzer.const_int_bound(e).max_value + 1) for e in self.forward_index]

    def get_linearized_forward_index(self) -> Any:
        """The storage index as one offset: the output indices in row-major order of
        :meth:`get_output_shape`."""
        from tvm.sym.analyzer import Analyzer

        offset: Any = 0
        for index, extent in zip(self.forward_index, self.get_output_shape()):
            offset = offset * extent + index
        return Analyzer().simplify(self._indices([offset])[0])

    def is_equal(self, other: Any) -> bool:
        """Whether ``other`` maps a tile of the same shape to the same storage indices."""
        from tvm.sym.analyzer import Analyzer

        if not isinstance(other, Layout) or len(other.shape) != len(self.shape):
            return False
        analyzer = Analyzer()
        mine, theirs = self.map_forward_index(self.forward_vars), other.map_forward_index(self.forward_vars)
        return (all(analyzer.can_prove_equal(a, b) for a, b in zip(self.shape, other.shape)) and
                len(mine) == len(theirs) and all(analyzer.can_prove_equal(a, b) for a, b in zip(mine, theirs)))

    def expand(self, leading: Any) -> Layout:
        """Upstream's ``Layout.expand``: the layout of a stack of such tiles, ``leading`` extra
        outer input axes (an int or a sequence of them) kept as outer storage axes."""
        if isinstance(leading, (str, bytes)) or not isinstance(leading, (int, list, tuple)):
            raise TypeError(f"Layout.expand({leading!r}): the leading extents are an int or a list of ints")
        extents = [leading] if isinstance(leading, int) else list(leading)
        if not extents:
            return self
        if not all(isinstance(e, int) and not isinstance(e, bool) and e > 0 for e in extents):
            raise ValueError(f"Layout.expand({leading!r}): each leading extent is a positive int")
        count, inner = len(extents), self._index_fn
        return Layout([*extents, *self.shape], lambda *v: [*v[:count], *self._indices(inner(*v[count:]))])

    def is_identity_for(self, shape: Sequence[Any]) -> bool:
        """Whether the map is row-major order itself for a tile of ``shape``."""
        from tvm.sym.analyzer import Analyzer

        analyzer = Analyzer()
        shape = list(shape)
        if len(shape) != len(self.shape) or len(self.forward_index) != len(shape):
            return False
        same_shape = all(analyzer.can_prove_equal(a, b) for a, b in zip(shape, self.shape))
        return same_shape and all(analyzer.can_prove_equal(e, v) for e, v in zip(self.forward_index, self.forward_vars))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.shape} -> {self.forward_index})"


class Fragment(Layout):
    """A register layout: which thread holds each element of a tile, and where in its
    registers (upstream's constructor forms). See the module doc for how it is used."""

    def __init__(self, shape: Sequence[Any], forward_fn: Callable[..., Any] | None = None,
                 forward_thread_fn: Callable[..., Any] | None = None, replicate: int = 1,
                 forward_index_fn: Callable[..., Any] | None = None) -> None:
        from tvm import tirx

        if forward_fn is None and forward_thread_fn is None:
            raise ValueError("Fragment needs forward_fn (thread and index) or forward_thread_fn")
        self.replicate = int(replicate)
        self.replicate_var = tirx.Var("rep", "int32") if self.replicate > 1 else None
        extra = [self.replicate_var] if self.replicate_var is not None else []
        if forward_fn is not None:
            self._thread_fn = lambda *args: forward_fn(*args)[0]
            index_fn = lambda *v: forward_fn(*v, *extra)[1]  # noqa: E731
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

        if not isinstance(other, Fragment) or other.replicate != self.replicate or not super().is_equal(other):
            return False
        analyzer = Analyzer()
        return all(analyzer.can_prove_equal(self.map_forward_thread(self.forward_vars, rep),
                                            other.map_forward_thread(self.forward_vars, rep))
                   for rep in range(self.replicate))

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
            analyzer.bind(self.replicate_var, Range.from_min_extent(0, self.replicate))
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
        if self.replicate_var is not None:
            raise ValueError("Fragment.repeat of a replicated fragment is not supported")
        shape = [extent * count for extent, count in zip(self.shape, counts)]
        # the registers a thread holds: the extent of the last register index
        registers = int(self.get_output_shape()[-1]) if self.forward_index else 1
        threads = self.get_thread_size()
        order = list(range(len(shape)))[:: 1 if lower_dim_first else -1]
        base = self

        def forward(*indices: Any) -> tuple[Any, list[Any]]:
            inner = [tirx.floormod(i, extent) for i, extent in zip(indices, base.shape)]
            copy, stride = tirx.const(0, "int32"), 1
            for axis in order:
                copy, stride = copy + tirx.floordiv(indices[axis], base.shape[axis]) * stride, stride * counts[axis]
            thread = base.map_forward_thread(inner)
            local = base.map_forward_index(inner)
            if repeat_on_thread:
                return thread + copy * threads, local
            return thread, [*local[:-1], local[-1] + copy * registers] if local else [copy]

        return Fragment(shape, forward_fn=forward)


def make_gemm_fragment_8x8() -> Fragment:
    """An 8x8 piece of a tensor-core accumulator (mma.sync's m16n8 C fragment, one half):
    row ``i`` is held by threads ``4 i`` to ``4 i + 3``, two consecutive columns each."""
    return Fragment((8, 8), forward_fn=lambda i, j: (i * 4 + j // 2, [j % 2]))


def make_gemm_fragment_8x8_transposed() -> Fragment:
    """make_gemm_fragment_8x8 with rows and columns exchanged: column ``j`` is held by
    threads ``4 j`` to ``4 j + 3``, two consecutive rows each."""
    return Fragment((8, 8), forward_fn=lambda i, j: (j * 4 + i // 2, [i % 2]))


def accepted_as_is(buffer: Any, layout: Any) -> bool:
    """For ``T.annotate_layout``: True when ``layout`` needs nothing done to ``buffer`` (a
    row-major Layout, a Fragment hint on a fragment); False when it is not a Layout at all;
    a LanguageError with the reason when it is one that cannot be honoured."""
    from .errors import LanguageError

    if not isinstance(layout, Layout):
        return False
    where = f"T.annotate_layout: the {type(layout).__name__} given for {buffer.name!r}"
    scope = buffer.scope()
    if isinstance(layout, Fragment):
        if scope == "local.fragment":
            return True
        raise LanguageError(f"{where}: a Fragment describes registers of a T.alloc_fragment buffer, but "
                            f"{buffer.name!r} is a {scope} buffer; use a Layout, or drop the annotation")
    if layout.is_identity_for(buffer.shape):
        return True
    if scope != "global":
        collision = _first_collision(layout)
        if collision is not None and collision is not _UNKNOWN:
            a, b, at = collision
            raise LanguageError(f"{where}: the Layout of shared buffer `{buffer.name}` must be injective: elements "
                                f"{a} and {b} both map to physical coordinates {at}, so one would overwrite the "
                                "other; give each element its own storage index, or drop the annotation")
        if collision is None:
            import warnings

            warnings.warn(f"{where}: {buffer.name!r} is stored row-major, not in the order the Layout gives "
                          f"({layout.forward_index}); an on-chip tile's storage order never changes results "
                          "here, only its bank conflicts (tilelang.layout.make_swizzled_layout asks for a "
                          "bank-conflict-free one)", stacklevel=4)
            return True
    # (a global tensor's Layout is applied: language/tile.py, transform/global_layouts.py)
    advice = ("use tilelang.layout.make_swizzled_layout(buffer) for a bank-conflict-free shared tile, "
              "or drop the annotation: results never depend on an on-chip tile's storage order")
    raise LanguageError(f"{where} maps {layout.shape} to {layout.forward_index}; storing a {scope} buffer "
                        f"in an order other than row-major is not implemented; {advice}")


#: the most elements whose storage indices are enumerated to check that a Layout is injective
MAX_CHECKED_ELEMENTS = 1 << 20
_UNKNOWN = object()  # a map this check cannot evaluate


def _first_collision(layout: Layout) -> Any:
    """None when ``layout`` gives every element of its tile its own storage index, (first,
    second, shared index) for the first two elements that share one, ``_UNKNOWN`` when the
    map cannot be enumerated here (a symbolic shape, a large tile, an operation the numpy
    evaluation below does not know)."""
    import numpy as np
    from tvm import tirx

    shape = [int(d.value) if isinstance(d, tirx.IntImm) else d for d in layout.shape]  # a buffer's shape
    if not all(isinstance(d, int) for d in shape):
        return _UNKNOWN
    total = int(np.prod(shape)) if shape else 1
    if total > MAX_CHECKED_ELEMENTS:
        return _UNKNOWN
    grids = np.indices(shape, dtype=np.int64).reshape(len(layout.shape), -1)
    env = [(v, grids[axis]) for axis, v in enumerate(layout.forward_vars)]
    try:
        out = np.stack([np.broadcast_to(_evaluate(e, env), (total,)) for e in layout.forward_index])
    except _NotEvaluable:
        return _UNKNOWN
    _, first, counts = np.unique(out.T, axis=0, return_index=True, return_counts=True)
    if (counts == 1).all():
        return None
    shared = out.T[first[np.argmax(counts > 1)]]
    hits = np.flatnonzero((out.T == shared).all(axis=1))[:2]
    logical = [tuple(int(g[h]) for g in grids) for h in hits]
    return logical[0], logical[1], tuple(int(x) for x in shared)


class _NotEvaluable(Exception):
    pass


def _evaluate(expr: Any, env: list[tuple[Any, Any]]) -> Any:
    """An integer index expression over numpy arrays of the forward variables."""
    import numpy as np
    from tvm import tirx

    ops = {tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply, tirx.FloorDiv: np.floor_divide,
           tirx.FloorMod: np.mod, tirx.Min: np.minimum, tirx.Max: np.maximum, tirx.BitwiseXor: np.bitwise_xor,
           tirx.BitwiseAnd: np.bitwise_and, tirx.BitwiseOr: np.bitwise_or, tirx.LShift: np.left_shift,
           tirx.RShift: np.right_shift}
    if isinstance(expr, tirx.IntImm):
        return np.int64(expr.value)
    if isinstance(expr, tirx.Var):
        for var, values in env:
            if expr.same_as(var):
                return values
        raise _NotEvaluable(str(expr))
    for node, op in ops.items():
        if isinstance(expr, node):
            return op(_evaluate(expr.a, env), _evaluate(expr.b, env))
    if isinstance(expr, (tirx.Div, tirx.Mod)):  # C's truncation; indices here are >= 0
        a, b = _evaluate(expr.a, env), _evaluate(expr.b, env)
        return np.floor_divide(a, b) if isinstance(expr, tirx.Div) else np.mod(a, b)
    if isinstance(expr, tirx.Cast):
        return _evaluate(expr.value, env)
    raise _NotEvaluable(type(expr).__name__)


__all__ = ["Fragment", "Layout", "SwizzledLayout", "accepted_as_is", "make_gemm_fragment_8x8",
           "make_gemm_fragment_8x8_transposed", "make_swizzled_layout"]

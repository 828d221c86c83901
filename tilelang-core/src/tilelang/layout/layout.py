"""``Layout``: an index map from a tile's logical indices to its storage indices, with
upstream TileLang's accessors (``map_forward_index``, ``get_output_shape``, ``expand``,
``is_equal``), and the numpy evaluation that checks a map is one-to-one and draws it
(tilelang.tools.plot_layout)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


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

    def repeat(self, dim: int, factor: int) -> Layout:
        """Upstream's ``Layout.repeat``: ``factor`` copies of the tile along input axis ``dim``
        (negative counts from the end), copy ``k`` stored at index ``k`` of a new leading
        storage axis: ``L'(..., i, ...) = [i // extent, *L(..., i % extent, ...)]``."""
        from tvm import tirx

        for name, value in (("dim", dim), ("factor", factor)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Layout.repeat: {name} must be an int, got {type(value).__name__}")
        if factor < 1:
            raise ValueError(f"Layout.repeat: factor must be at least 1, got {factor}")
        rank = len(self.shape)
        if not -rank <= dim < rank:
            raise ValueError(f"Layout.repeat: dim {dim} is outside the {rank} input axes of {self.shape}")
        if factor == 1:
            return self
        axis, inner = dim % rank, self._index_fn
        extent = self.shape[axis]

        def forward(*v: Any) -> list[Any]:
            folded = [tirx.floormod(x, extent) if a == axis else x for a, x in enumerate(v)]
            return [tirx.floordiv(v[axis], extent), *self._indices(inner(*folded))]

        shape = [d * factor if a == axis else d for a, d in enumerate(self.shape)]
        return Layout(shape, forward)

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


#: the most elements whose storage indices are enumerated to check that a Layout is injective
MAX_CHECKED_ELEMENTS = 1 << 20
_UNKNOWN = object()  # a map this check cannot evaluate


def _first_collision(layout: Layout) -> Any:
    """None when ``layout`` gives every element of its tile its own storage index, (first,
    second, shared index) for the first two elements that share one, ``_UNKNOWN`` when the
    map cannot be enumerated here (a symbolic shape, a large tile, an operation the numpy
    evaluation below does not know)."""
    import numpy as np

    sizes = [d.value if hasattr(d, "value") else d for d in layout.shape]
    if all(isinstance(d, int) for d in sizes) and int(np.prod(sizes)) > MAX_CHECKED_ELEMENTS:
        return _UNKNOWN
    out = evaluate_indices(layout)
    if out is None:
        return _UNKNOWN
    _, first, counts = np.unique(out.T, axis=0, return_index=True, return_counts=True)
    if (counts == 1).all():
        return None
    shared = out.T[first[np.argmax(counts > 1)]]
    hits = np.flatnonzero((out.T == shared).all(axis=1))[:2]
    logical = [tuple(int(i) for i in np.unravel_index(h, sizes)) for h in hits]
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



def make_linear_layout(buffer: Any) -> Layout:
    """The row-major layout of ``buffer`` (a buffer, a region or a shape): every element
    stored at its own indices."""
    shape = buffer if isinstance(buffer, (list, tuple)) else _buffer_of(buffer).shape
    return Layout(list(shape), lambda *indices: list(indices))


def _buffer_of(value: Any) -> Any:
    """The buffer of a buffer, a BufferLoad or a BufferRegion (upstream's BufferLikeType)."""
    from tvm import tirx

    if isinstance(value, tirx.Buffer):
        return value
    if isinstance(value, (tirx.BufferLoad, tirx.BufferRegion)):
        return value.buffer
    raise TypeError(f"expected a buffer (or a load or region of one), got {type(value).__name__}")


def evaluate_indices(layout: Layout, exprs: Sequence[Any] | None = None) -> Any:
    """Every element's storage indices as a numpy array (one row per output axis, columns in
    row-major order of the tile), or None when the map cannot be evaluated here (a symbolic
    shape, an operation :func:`_evaluate` does not know)."""
    import numpy as np
    from tvm import tirx

    shape = [int(d.value) if isinstance(d, tirx.IntImm) else d for d in layout.shape]
    if not all(isinstance(d, int) for d in shape):
        return None
    total = int(np.prod(shape)) if shape else 1
    grids = np.indices(shape, dtype=np.int64).reshape(len(layout.shape), -1)
    env = [(v, grids[axis]) for axis, v in enumerate(layout.forward_vars)]
    try:
        return np.stack([np.broadcast_to(_evaluate(e, env), (total,))
                         for e in (layout.forward_index if exprs is None else exprs)])
    except _NotEvaluable:
        return None


__all__ = ["MAX_CHECKED_ELEMENTS", "Layout", "evaluate_indices", "make_linear_layout"]

"""``T.PersistentTileScheduler``: upstream TileLang's persistent tile scheduler object.

A persistent kernel launches a fixed number of *workers* (blocks, usually one per SM) and
each walks a share of a 2-D grid of output tiles: worker ``w`` takes the tiles with linear
numbers ``w, w + workers, w + 2 * workers, ...``. The scheduler turns a linear number into
tile coordinates ``(m, n)``; two spellings use it::

    sched = T.PersistentTileScheduler(m_blocks, n_blocks, swizzle_size=8)
    sched.init(block_id)                       # stateful: a while loop over the tiles
    while sched.valid():
        bx, by = sched.m_idx, sched.n_idx
        ...                                    # one tile; sched.current_iter counts them
        sched.next_tile()

    sched = T.PersistentTileScheduler(m_blocks, n_blocks, swizzle_size=8, stateful=False)
    for w in T.serial(waves):                  # stateless: the coordinates of a number
        bx, by = sched.coord(sm_num * w + block_id)
        if bx < m_blocks and by < n_blocks:
            ...

The order (the same as upstream's, for the same L2 reuse): tiles are numbered along the
*fast* axis (M when ``column_major``, the default; N otherwise) inside panels of
``swizzle_size`` lines of the slow axis; a panel is finished before the next begins, and the
last panel may be narrower. ``cluster_size`` (along M only) first merges that many M tiles
into one cluster row; ``m_idx`` is then the cluster row, and the kernel adds its rank in the
cluster. With ``swizzle_size=1`` the order is plain column-major (or row-major).

The stateful form keeps ``m_idx``, ``n_idx``, ``linear_idx`` and ``current_iter`` in
``T.alloc_var`` scalars (named ``{name}_m_idx`` ... when ``name`` is given): the methods
store into them where they are called, and the properties read them, so the object is a
Python value only while the kernel is parsed and nothing of it reaches the IR but plain
stores, loads and arithmetic — every backend runs it. The stateless form allocates nothing;
its ``coord`` is pure arithmetic of its argument.
"""

from __future__ import annotations

from typing import Any

from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.script.ir_builder import tirx as _ib

from ..errors import LanguageError
from .persistent import checked_integer

_DOC = "T.PersistentTileScheduler(num_m_tiles, num_n_tiles, num_workers=None, swizzle_size=1, ...)"
_STATE = ("m_idx", "n_idx", "linear_idx", "current_iter")


def _ceildiv(a: Any, b: int) -> Any:
    if b == 1:
        return a
    return -(-a // b) if isinstance(a, int) else tirx.ceildiv(a, b)


def _minimum(a: Any, b: Any) -> Any:
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else tirx.min(a, b)


def _maximum(a: Any, b: Any) -> Any:
    return max(a, b) if isinstance(a, int) and isinstance(b, int) else tirx.max(a, b)


def _default_workers(cluster_size: int) -> int:
    # the device's SM count, as upstream's default; without a GPU this raises a clear
    # BackendUnavailableError naming what is missing (pass num_workers= there)
    from ..carver.arch import driver

    return max(1, driver.get_num_sms() // cluster_size)


class PersistentTileScheduler:
    """Upstream's ``T.PersistentTileScheduler`` (see the module docstring for the order)."""

    # TVMScript's parser binds an instance of a class so marked as a plain Python value (an
    # assignment of any other object fails: it has no TIR type). The parser would also name
    # the buffers in the instance's fields after the assigned variable; the state is kept
    # under a ``_tirx_`` name, which that naming skips, so ``name=`` decides as upstream's.
    _is_meta_class = True

    def __init__(self, num_m_tiles: Any, num_n_tiles: Any, num_workers: Any = None, swizzle_size: int = 1,
                 column_major: bool = True, cluster_size: int = 1, stateful: bool = True,
                 name: str | None = None) -> None:
        for what, value in (("swizzle_size", swizzle_size), ("cluster_size", cluster_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LanguageError(f"{_DOC}: {what} must be a Python int of at least 1 (it shapes the "
                                    f"kernel's code), got {value!r}")
        if name is not None and (not isinstance(name, str) or not name.isidentifier()):
            raise LanguageError(f"{_DOC}: name must be an identifier (a prefix of the state's names), got {name!r}")
        m_tiles = checked_integer(num_m_tiles, "num_m_tiles", 0, _DOC)
        n_tiles = checked_integer(num_n_tiles, "num_n_tiles", 0, _DOC)
        workers = (_default_workers(cluster_size) if num_workers is None
                   else checked_integer(num_workers, "num_workers", 1, _DOC))
        self.num_workers = workers
        self.swizzle_size = swizzle_size
        self.cluster_size = cluster_size
        self.column_major = bool(column_major)
        self.stateful = bool(stateful)
        m_rows = _ceildiv(m_tiles, cluster_size)  # cluster rows
        self.total_tiles = m_rows * n_tiles
        self._fast, self._slow = (m_rows, n_tiles) if self.column_major else (n_tiles, m_rows)
        self._tirx_state: dict[str, Any] = {}
        self._tirx_name = name or "sched"
        # (worker, the builder's frames) of the last init(), while the scheduler stands on its tile
        self._tirx_start: tuple[Any, list[Any]] | None = None
        self._tirx_loop: tuple[Any, Any] | None = None  # (counter, linear number) in a tile loop
        self._tirx_advanced = 0  # next_tile() calls in the tile loop's body
        if self.stateful:
            for field in _STATE:
                buffer = _ib.alloc_buffer((1,), "int32", scope="local")
                IRBuilder.name(f"{self._tirx_name}_{field}", buffer)
                self._tirx_state[field] = buffer

    # -- the order ----------------------------------------------------------------------

    def coord(self, tile_id: Any) -> tuple[Any, Any]:
        """The tile coordinates ``(m, n)`` of linear tile number ``tile_id`` (expressions;
        ``m`` is the cluster row when ``cluster_size > 1``). Allocates and stores nothing."""
        tile_id = checked_integer(tile_id, "coord's tile_id", 0, _DOC)
        fast, slow, swizzle = self._fast, self._slow, self.swizzle_size
        if swizzle == 1:
            along, across = tile_id % fast, tile_id // fast
        else:
            panel = tile_id // (fast * swizzle)
            first = panel * swizzle
            # the last panel may be narrower; never 0, so a number past the end still decodes
            width = _maximum(1, _minimum(swizzle, slow - first))
            within = tile_id - panel * (fast * swizzle)
            along, across = within // width, first + within % width
        return (along, across) if self.column_major else (across, along)

    # -- the stateful form ----------------------------------------------------------------

    def _buffer(self, field: str, what: str) -> Any:
        if not self.stateful:
            raise LanguageError(f"T.PersistentTileScheduler(..., stateful=False) keeps no state, so {what} "
                                f"is not available; decode tile numbers with sched.coord(tile_id), or "
                                f"create the scheduler with stateful=True (the default)")
        return self._tirx_state[field]

    def _value(self, field: str) -> Any:
        """The field's value: inside a tile loop (see :func:`tile_loop`) an expression of the
        loop's counter, elsewhere a read of its scalar."""
        loop = self._tirx_loop
        buffer = self._buffer(field, f"sched.{field}")
        if loop is None:
            return buffer[0]
        counter, linear = loop
        if field == "current_iter":
            return counter
        if field == "linear_idx":
            return linear
        return self.coord(linear)[0 if field == "m_idx" else 1]

    def _store(self, field: str, value: Any, what: str) -> None:
        _ib.buffer_store(self._buffer(field, what), value, [0])

    @property
    def m_idx(self) -> Any:
        """The current tile's row (the cluster row when ``cluster_size > 1``)."""
        return self._value("m_idx")

    @property
    def n_idx(self) -> Any:
        """The current tile's column."""
        return self._value("n_idx")

    @property
    def linear_idx(self) -> Any:
        """The current tile's linear number."""
        return self._value("linear_idx")

    @property
    def current_iter(self) -> Any:
        """How many tiles this worker has finished (0 on the first)."""
        return self._value("current_iter")

    def _set(self, iteration: Any, linear: Any, what: str) -> None:
        self._store("current_iter", iteration, what)
        self._store("linear_idx", linear, what)
        m, n = self.coord(self._buffer("linear_idx", what)[0])
        self._store("m_idx", m, what)
        self._store("n_idx", n, what)

    def init(self, worker_id: Any) -> None:
        """Start worker ``worker_id`` (``0 <= worker_id < num_workers``) on its first tile."""
        worker = checked_integer(worker_id, "init's worker_id", 0, _DOC)
        if self._tirx_loop is not None:
            raise LanguageError("sched.init() inside `while sched.valid():` restarts the loop it is in; "
                                "call it once, before the loop")
        self._set(tirx.IntImm("int32", 0), worker, "sched.init()")
        self._tirx_start = (worker, list(IRBuilder.current().frames))

    def next_tile(self) -> None:
        """Move to this worker's next tile (``num_workers`` further on)."""
        if self._tirx_loop is not None:  # the tile loop advances itself (see tile_loop)
            self._tirx_advanced += 1
            return
        self._tirx_start = None  # no longer on the first tile init() chose
        linear = self._buffer("linear_idx", "sched.next_tile()")[0]
        self._set(self._buffer("current_iter", "sched.next_tile()")[0] + 1, linear + self.num_workers,
                  "sched.next_tile()")

    def valid(self) -> Any:
        """Whether the current tile exists (the while loop's condition)."""
        return self._value("linear_idx") < self.total_tiles


def _calls(body: list, method: str) -> int:
    from tvm.script.parser.core import doc

    return sum(isinstance(n, doc.Call) and isinstance(n.func, doc.Attribute) and n.func.attr == method
               for stmt in body for n in _walk(stmt))


def _walk(node: Any):
    """Every node of a doc AST (TVMScript's copy of Python's)."""
    from tvm.script.parser.core import doc

    stack = [node]
    while stack:
        item = stack.pop()
        yield item
        for field in getattr(item, "_FIELDS", ()):
            value = getattr(item, field, None)
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, doc.AST):
                    stack.append(child)


def tile_loop(parser: Any, node: Any) -> bool:
    """TVMScript's ``while`` for a scheduler's loop, as a counted loop; False (nothing done)
    for any other ``while``.

    ``sched.init(worker); while sched.valid(): ...; sched.next_tile()`` visits the tiles
    ``worker + i * num_workers`` for ``i`` below ``ceildiv(total - worker, num_workers)``.
    Where the loop has exactly that shape — its condition is ``sched.valid()`` of a stateful
    scheduler not moved since its last init() (nor in a loop or branch init() was not), its body ends in the loop's only ``sched.next_tile()`` and holds no ``break``,
    ``continue``, ``return`` or ``sched.init`` — it becomes a serial loop
    over ``i``, and inside it the scheduler's fields are expressions of ``i`` instead of reads
    of its scalars. A ``while`` loop cannot have barriers inserted in its body (TVM's
    ThreadSync refuses), and a tile whose coordinates are arithmetic of the block index and
    the loop counter is one the CUDA backend's producer warp can replay, as for T.Persistent.
    After the loop the scalars hold what the while loop leaves. Other shapes stay while loops.
    """
    from tvm.script.parser.core import doc

    test = node.test
    if not (isinstance(test, doc.Call) and isinstance(test.func, doc.Attribute) and test.func.attr == "valid"
            and not test.args and not test.keywords):
        return False
    sched = parser.eval_expr(test.func.value)
    if not (isinstance(sched, PersistentTileScheduler) and sched.stateful and sched._tirx_loop is None
            and sched._tirx_start is not None and _fresh_here(sched._tirx_start[1])):
        return False
    last = node.body[-1] if node.body else None
    ends_in_next = (isinstance(last, doc.Expr) and isinstance(last.value, doc.Call)
                    and isinstance(last.value.func, doc.Attribute) and last.value.func.attr == "next_tile"
                    and not last.value.args and not last.value.keywords)
    if (not ends_in_next or parser.eval_expr(last.value.func.value) is not sched
            or _calls(node.body, "next_tile") != 1 or _calls(node.body, "init")
            or any(isinstance(n, (doc.Break, doc.Continue, doc.Return)) for s in node.body for n in _walk(s))):
        return False
    worker = sched._tirx_start[0]
    remaining = sched.total_tiles - worker
    remaining = max(remaining, 0) if isinstance(remaining, int) else tirx.max(remaining, 0)
    workers = sched.num_workers
    count = -(-remaining // workers) if isinstance(remaining, int) and isinstance(workers, int) \
        else tirx.ceildiv(remaining, workers)
    with parser.var_table.with_frame(), _ib.serial(0, count) as counter:
        IRBuilder.name(f"{sched._tirx_name}_iter", counter)
        sched._tirx_loop = (counter, worker + counter * workers)
        sched._tirx_advanced = 0
        try:
            parser.visit_body(node.body)
        finally:
            sched._tirx_loop = None
        if sched._tirx_advanced != 1:
            raise LanguageError(f"`while sched.valid():` ran sched.next_tile() {sched._tirx_advanced} times per "
                                f"tile; call it once, as the loop body's last statement")
    sched._set(count, worker + count * workers, "sched.next_tile()")
    sched._tirx_start = None  # the loop has run to the end
    return True


def _fresh_here(started: list[Any]) -> bool:
    """Whether a scheduler that stood on init()'s tile when the builder had the frames
    ``started`` still does here: no loop lies between init() and this point (whose later turns
    would find the tiles already walked) nor a branch that init() was in and this point is not."""
    frames = list(IRBuilder.current().frames)
    if len(frames) < len(started) or not all(a.same_as(b) for a, b in zip(started, frames)):
        return False
    return not any(isinstance(f, (_ib.frame.ForFrame, _ib.frame.WhileFrame)) for f in frames[len(started):])

"""``tilelang.tools.plot_layout``: draw a ``Layout`` or a ``Fragment`` (upstream TileLang's
tool of that name; matplotlib, from ``pip install 'tilelang[vis]'``).

* A ``Fragment`` is drawn as its tile: one cell per element, coloured by the thread that
  holds it and labelled with that thread and its register (``T5`` / ``L2``); a replicated
  fragment lists every thread holding the element.
* A ``Layout`` is drawn as its logical tile, each element labelled with where it is stored
  (``view="input"``, the default), as its storage, each place labelled with the element
  stored there (``"output"``), or both side by side (``"both"``). An element has the colour
  of its logical column in both, so a swizzle shows as the columns' colours shuffled row by
  row.

Tiles of more than two axes are drawn with their leading axes folded into rows.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Sequence
from typing import Any

#: formats ``formats`` may name ("all" is every one)
FORMATS = ("pdf", "png", "svg")
#: what a Layout's drawing shows: its logical tile, its storage, or both
VIEWS = ("input", "output", "both")
#: cells above which labels are left off (the colours still show the map)
MAX_LABELLED_CELLS = 4096


def plot_layout(layout: Any, save_directory: str | pathlib.Path = "./tmp", name: str = "layout",
                colormap: str | None = None, verbose: bool = False, formats: str | Sequence[str] = "pdf",
                view: str = "input", grid_shape: Sequence[int] | None = None) -> list[pathlib.Path]:
    """Draw ``layout`` into ``save_directory/name.<format>`` for each of ``formats`` ("pdf",
    "png", "svg", "all", or several, comma-separated or as a list); return the paths
    written. ``colormap`` is a matplotlib colormap name (default "RdPu" for a Fragment,
    "Spectral" for a Layout); ``verbose`` also prints each element's mapping. A Layout is
    drawn as its logical tile (``view="input"``, on a ``grid_shape`` of (rows, columns) if
    given), its storage (``"output"``) or both side by side (``"both"``)."""
    from ..layout import Fragment, Layout

    if not isinstance(layout, Layout):
        raise TypeError(f"plot_layout: expected a tilelang.layout.Layout or Fragment, got {type(layout).__name__}")
    if view not in VIEWS:
        raise ValueError(f"plot_layout: view must be one of {', '.join(VIEWS)}, got {view!r}")
    kinds = _formats(formats)
    figure = _figure()
    if isinstance(layout, Fragment):
        _draw_fragment(figure, layout, colormap or "RdPu", verbose)
    else:
        _draw_layout(figure, layout, colormap or "Spectral", verbose, view, grid_shape)
    directory = pathlib.Path(save_directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in kinds:
        path = directory / f"{name}.{kind}"
        figure.savefig(path, bbox_inches="tight")
        print(f"Saved {kind} format into {path}")
        written.append(path)
    return written


def _formats(formats: str | Sequence[str]) -> list[str]:
    if isinstance(formats, str):
        wanted = list(FORMATS) if formats.strip().lower() == "all" else formats.split(",")
    elif isinstance(formats, Sequence):
        wanted = list(formats)
    else:
        raise TypeError(f"plot_layout: formats is a string ('png', 'pdf,svg', 'all') or a list of them, "
                        f"got {type(formats).__name__}")
    kinds = [str(f).strip().lower() for f in wanted]
    unknown = [k for k in kinds if k not in FORMATS]
    if unknown or not kinds:
        raise ValueError(f"plot_layout: unknown format(s) {unknown or formats!r}; choose from {', '.join(FORMATS)} "
                         "or 'all'")
    return list(dict.fromkeys(kinds))


def _figure() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # an optional dependency
        raise ImportError("tilelang.tools.plot_layout draws with matplotlib, which is not installed; "
                          "pip install 'tilelang[vis]' (or matplotlib)") from exc
    return Figure()


def _grid(layout: Any) -> tuple[int, int]:
    """(rows, cols) of the drawn tile: the last axis across, the others folded into rows."""
    shape = _ints(layout.shape, "its shape")
    cols = shape[-1] if shape else 1
    return (int(math.prod(shape[:-1])), cols)


def _ints(values: Sequence[Any], what: str) -> list[int]:
    out = []
    for v in values:
        v = getattr(v, "value", v)
        if not isinstance(v, int):
            raise ValueError(f"plot_layout: {what} must be constant to be drawn, got {list(values)}")  # noqa: TRY004
        out.append(v)
    return out


def _evaluate(layout: Any, exprs: Sequence[Any] | None, what: str) -> Any:
    from ..layout.layout import evaluate_indices

    values = evaluate_indices(layout, exprs)
    if values is None:
        raise ValueError(f"plot_layout: the {what} of {layout!r} cannot be evaluated here (an operation "
                         "outside integer arithmetic, shifts and bit operations)")
    return values


def _cells(axes: Any, rows: int, cols: int, colours: Any, labels: list[str] | None, cmap: Any, title: str) -> None:
    import numpy as np

    axes.imshow(np.asarray(colours, dtype=float).reshape(rows, cols), cmap=cmap, aspect="equal",
                interpolation="nearest")
    axes.set_title(title, fontsize=9)
    axes.set_xticks(range(cols))
    axes.set_yticks(range(rows))
    axes.tick_params(labelsize=max(3, 8 - max(rows, cols) // 16), length=0)
    axes.set_xticks([c - 0.5 for c in range(1, cols)], minor=True)
    axes.set_yticks([r - 0.5 for r in range(1, rows)], minor=True)
    axes.grid(which="minor", color="white", linewidth=0.5)
    if labels is None:
        return
    size = max(2.5, 7 - max(rows, cols) / 8)
    for cell, text in enumerate(labels):
        axes.text(cell % cols, cell // cols, text, ha="center", va="center", fontsize=size)


def _draw_fragment(figure: Any, fragment: Any, colormap: str, verbose: bool) -> None:
    rows, cols = _grid(fragment)
    replicas = fragment.replicate_size
    threads = _evaluate(fragment, [fragment.map_forward_thread(fragment.forward_vars, r) for r in range(replicas)],
                        "thread map")
    locals_ = _evaluate(fragment, [fragment.get_linearized_forward_index()], "register map")[0] \
        if fragment.forward_index else [0] * (rows * cols)
    size = int(threads.max()) + 1
    _size(figure, cols, rows)
    labels = None
    if rows * cols <= MAX_LABELLED_CELLS:
        labels = []
        for cell in range(rows * cols):
            held = "/".join(str(int(t)) for t in threads[:, cell][:4]) + ("/…" if replicas > 4 else "")
            labels.append(f"T{held}\nL{int(locals_[cell])}")
    axes = figure.add_subplot(1, 1, 1)
    what = f"{size} threads" + (f", each element held {replicas} times" if replicas > 1 else "")
    _cells(axes, rows, cols, threads[0], labels, colormap,
           f"Fragment {list(fragment.shape)}: {what}")
    if verbose:
        for cell in range(rows * cols):
            print(f"{_logical(fragment, cell)} -> thread {[int(t) for t in threads[:, cell]]}, "
                  f"register {int(locals_[cell])}")


def _draw_layout(figure: Any, layout: Any, colormap: str, verbose: bool, view: str,
                 grid_shape: Sequence[int] | None) -> None:
    import numpy as np

    rows, cols = _grid(layout)
    if grid_shape is not None:
        shape = [int(d) for d in grid_shape]
        if len(shape) != 2 or shape[0] * shape[1] != rows * cols:
            raise ValueError(f"plot_layout: grid_shape {tuple(grid_shape)} must be (rows, columns) of "
                             f"{rows * cols} cells, the tile's elements")
        rows, cols = shape
    stored = _evaluate(layout, None, "index map")  # (output axes, elements)
    if stored.size and stored.min() < 0:
        raise ValueError(f"plot_layout: {layout!r} maps an element to a negative storage index")
    out_shape = [int(axis.max()) + 1 for axis in stored]  # the extents the map reaches
    offsets = np.ravel_multi_index(tuple(stored), out_shape) if stored.shape[0] else np.zeros(rows * cols, int)
    out_cols = out_shape[-1] if out_shape else 1
    out_rows = -(-math.prod(out_shape) // out_cols)
    label = rows * cols <= MAX_LABELLED_CELLS
    panels = {"input": 1, "output": 1, "both": 2}[view]
    _size(figure, (cols if view != "output" else 0) + (out_cols if view != "input" else 0),
          max(rows if view != "output" else 0, out_rows if view != "input" else 0))
    column = np.arange(rows * cols) % cols  # an element's colour: its column in the drawn tile
    if view in ("input", "both"):
        left = figure.add_subplot(1, panels, 1)
        _cells(left, rows, cols, column, [_pair(stored[:, e]) for e in range(rows * cols)] if label
               else None, colormap, f"logical {list(layout.shape)}: where each element is stored")
    if view in ("output", "both"):
        inverse = np.full(out_rows * out_cols, -1, dtype=np.int64)
        inverse[offsets] = np.arange(rows * cols)
        right = figure.add_subplot(1, panels, panels)
        colours = np.where(inverse >= 0, inverse % cols, np.nan)
        labels = [_logical(layout, int(e)) if e >= 0 else "" for e in inverse] if label else None
        _cells(right, out_rows, out_cols, colours, labels, colormap,
               f"storage {out_shape}: the element stored at each place")
    if verbose:
        for e in range(rows * cols):
            print(f"{_logical(layout, e)} -> {_pair(stored[:, e])}")


def _size(figure: Any, cols: int, rows: int) -> None:
    """Half an inch a cell, within 3 to 24 inches a side."""
    figure.set_size_inches(min(24, max(4, cols * 0.5)), min(24, max(3, rows * 0.45)))


def _pair(values: Sequence[Any]) -> str:
    return "(" + ", ".join(str(int(v)) for v in values) + ")" if len(values) != 1 else str(int(values[0]))


def _logical(layout: Any, element: int) -> str:
    import numpy as np

    return _pair(np.unravel_index(element, _ints(layout.shape, "its shape")))


__all__ = ["plot_layout"]

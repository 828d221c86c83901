"""``tilelang.tools.pass_visualizer``: a kernel file's compilation, pass by pass, as an HTML
page and a text dump (upstream's pass visualizer; see ``viewer``)."""

from typing import Any

__all__ = ["build_pass_data", "emit_html", "emit_txt"]


def __getattr__(name: str) -> Any:
    # resolved on use, so that ``python -m tilelang.tools.pass_visualizer.viewer`` runs the
    # module once
    if name in __all__:
        from . import viewer

        return getattr(viewer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

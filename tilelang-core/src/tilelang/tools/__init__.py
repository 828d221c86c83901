"""``tilelang.tools``: upstream TileLang's kernel tools. ``Analyzer`` counts what a kernel's
tile operations compute and move (a roofline estimate); ``plot_layout`` draws a Layout or a
Fragment (matplotlib, ``pip install 'tilelang[vis]'``)."""

from .analyzer import AnalysisResult, Analyzer
from .plot_layout import plot_layout

__all__ = ["AnalysisResult", "Analyzer", "plot_layout"]

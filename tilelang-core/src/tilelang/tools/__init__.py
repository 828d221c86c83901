"""``tilelang.tools``: upstream TileLang's kernel tools. ``Analyzer`` counts what a kernel's
tile operations compute and move (a roofline estimate)."""

from .analyzer import AnalysisResult, Analyzer

__all__ = ["AnalysisResult", "Analyzer"]

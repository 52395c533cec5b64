"""``nbyoc.explain``: where each op runs, why not elsewhere, and what crosses between
regions (``collect``: the partition, step by step; ``report``: the plain data and its
table; ``svg``: the drawing)."""

from .collect import explain
from .report import Explanation, OpRow, RegionRow

__all__ = ["Explanation", "OpRow", "RegionRow", "explain"]

"""Nystrom column selection: oASIS (adaptive, Schur-complement scores with rank-1 updates),
greedy diagonally pivoted Cholesky, randomly pivoted Cholesky and uniform sampling, and the
landmarks of the Nystrom methods, through which they select (:mod:`hkern.oasis.landmarks`)."""
from .api import SELECTORS, ColumnSelection, oasis, select_columns

__all__ = ["oasis", "select_columns", "ColumnSelection", "SELECTORS"]

"""Data: the UCI regression sets (kin40k bundled) and synthetic generators."""
from ._synthetic import make_regression, standardize
from ._uci import BUNDLED, load_uci

__all__ = ["load_uci", "make_regression", "standardize", "BUNDLED"]

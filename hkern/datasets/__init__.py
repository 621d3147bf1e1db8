"""Data: the UCI regression sets (kin40k bundled) and synthetic generators."""
from ._synthetic import make_hypercube_clusters, make_regression, make_two_moons, standardize
from ._uci import BUNDLED, load_uci

__all__ = ["load_uci", "make_regression", "make_two_moons", "make_hypercube_clusters",
           "standardize", "BUNDLED"]

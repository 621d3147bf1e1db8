"""GP-GRIEF: Gaussian processes with grid-structured eigenfunctions (Evans & Nair, ICML 2018).

``fit_grief`` fits a GP whose kernel is spanned by the p leading product eigenfunctions of a
Cartesian grid of m = prod(mbar_i) inducing points; m never enters the cost.
"""
from ._basis import GriefBasis, make_grids
from .api import fit_grief
from .model import GriefGP

__all__ = ["GriefBasis", "GriefGP", "fit_grief", "make_grids"]

"""Hierarchically compositional kernels (HCK) and the independent-kernel baseline.

See :func:`fit_hierarchical`; the tree is in ``_tree`` (cimport hkern.hierarchical._tree), the
factors and algorithms in ``_hck`` (cimport hkern.hierarchical._hck for the nogil matvec/solve).
"""
# The preconditioner module registers the HCK preconditioner kind by its name, "hck", for
# fit_exact(solver="pcg", preconditioner="hck"), which sits below this package and finds it in
# the registry of hkern.solvers.preconditioners: importing hkern (or this package) fills it.
from . import preconditioner  # noqa: F401
from .api import fit_hierarchical, fit_independent
from .models import HierarchicalKRR, IndependentKRR
from .plan import tree_depth

__all__ = ["fit_hierarchical", "fit_independent", "HierarchicalKRR", "IndependentKRR",
           "tree_depth"]

"""Hierarchically compositional kernels (HCK) and the independent-kernel baseline.

See :func:`fit_hierarchical`; the tree is in ``_tree`` (cimport hkern.hierarchical._tree), the
factors and algorithms in ``_hck`` (cimport hkern.hierarchical._hck for the nogil matvec/solve).
"""
from .api import fit_hierarchical, fit_independent
from .models import HierarchicalKRR, IndependentKRR
from .plan import tree_depth

__all__ = ["fit_hierarchical", "fit_independent", "HierarchicalKRR", "IndependentKRR",
           "tree_depth"]

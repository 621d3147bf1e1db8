"""Building an HCK tree and factoring K_hier + lam I on it (fit_hierarchical, fit_independent
and the HCK preconditioner of fit_exact)."""
from __future__ import annotations

import numpy as np

from .._threads import blas_threads
from . import _tree
from ._hck import HCKOperator
from .plan import PCA_ITERATIONS, tree_centre, tree_depth

__all__ = ["build_tree", "factorize_hck"]


def build_tree(X, r, leaf_size, partition, rng, n_threads):
    """Centre X, build the tree and permute X into tree order (shared by both fits)."""
    n, d = X.shape
    depth = tree_depth(n, r, leaf_size)
    centre = tree_centre(X.max(axis=0), X.min(axis=0))
    Xc = np.ascontiguousarray(X - centre)   # kernels depend on x - y: centring only helps rounding
    start, count = _tree.node_ranges(n, depth)
    n_nonleaf = (1 << depth) - 1
    start_vectors = np.ascontiguousarray(rng.standard_normal((n_nonleaf, d)))
    perm, directions, thresholds = _tree.build_tree(Xc, depth, start_vectors,
                                                    _tree.PARTITIONS[partition], PCA_ITERATIONS,
                                                    n_threads)
    X_tree = np.ascontiguousarray(Xc[perm])
    tree = dict(centre=centre, perm=perm, depth=depth, directions=directions,
                thresholds=thresholds, start=start, count=count)
    return X_tree, tree


def factorize_hck(X, r, leaf_size, partition, rng, kind, bandwidth, lam, jitter, n_threads):
    """(HCKOperator, tree) for checked, scaled X: the tree, its landmarks and the factored
    K_hier + lam I (fit_hierarchical and the HCK preconditioner of fit_exact)."""
    X_tree, tree = build_tree(X, r, leaf_size, partition, rng, n_threads)
    depth = tree["depth"]
    uniforms = np.ascontiguousarray(rng.random(((1 << depth) - 1, r)))
    lm_off, lm = _tree.select_landmarks(tree["start"], tree["count"], depth, r, uniforms,
                                        n_threads)
    del uniforms
    with blas_threads(1):
        op = HCKOperator(X_tree, depth, tree["start"], tree["count"], lm_off, lm, kind,
                         bandwidth, lam, jitter, n_threads)
    return op, tree

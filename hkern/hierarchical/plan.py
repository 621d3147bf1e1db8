"""The plan of an HCK tree, shared by the serial and the sharded fits and the preconditioner:
its depth and node sizes, the memory a fit will take, the jitter, the centre of the data and the
checks of the tree's arguments (doc/specs/hck.md)."""
from __future__ import annotations

import math

from .._parameters import check_parameter
from .._validation import check_rank

__all__ = ["PCA_ITERATIONS", "check_tree_args", "default_jitter", "fix_for_fit",
           "hck_fit_bytes", "independent_fit_bytes", "tree_centre", "tree_depth", "tree_sizes"]

# Power iterations of the principal-direction split ("pca" partition) at every node.
PCA_ITERATIONS = 20


def tree_depth(n, r, leaf_size=None):
    """Depth J of the complete binary tree for n points.

    Default (``leaf_size=None``): J = floor(log2(n / r)), so leaves hold between r and 2r points
    and every non-leaf node has at least 2r points to draw its r landmarks from
    (doc/specs/hck.md, section 3 ties leaf size and rank, and its Corrections 2; leaves of
    about 2r points also minimise the stored factors, roughly n r + 4 n r^2 / n0 + n n0
    numbers for leaf size n0).  With ``leaf_size``: the
    smallest J whose leaves hold at most ``leaf_size`` points.
    """
    if leaf_size is None:
        return max(0, int(math.floor(math.log2(n / r))))
    depth = 0
    while -(-n // (1 << depth)) > leaf_size:
        depth += 1
    return depth


def _level_counts(n, t):
    """Node sizes at level t of the balanced tree: (q, n_small, n_big), i.e. n_small nodes of q
    points and n_big nodes of q + 1 (halving gives floor or ceil of n / 2^t, summing to n)."""
    q, big = divmod(n, 1 << t)
    return q, (1 << t) - big, big


def tree_sizes(n, r, depth):
    """Sizes of the HCK factors for n points, r landmarks per node and a tree of ``depth``,
    exactly as HCKOperator lays them out (rank_i = min(r, count_i)), in O(depth) time.

    Returns a dict of numbers of entries: ``sq`` (every Sigma_p, r_p^2 each: L and Sigma~),
    ``w`` (every W_i, r_i r_p: W and W~), ``u`` (every U_i, n_i r_p), ``b`` (every leaf block,
    n_i^2), ``ranks`` (sum of r_p, the length of the per-node vectors of solve / matvec per
    right-hand side is 2 ``ranks`` (c) and ``ranks`` (g)), ``n_nonleaf``, ``r_max``, ``leaf_max``.
    """
    sizes = dict(sq=0, w=0, u=0, b=0, ranks=0, n_nonleaf=(1 << depth) - 1,
                 r_max=min(r, n) if depth > 0 else 0)
    for t in range(depth):
        q, small, big = _level_counts(n, t)
        for c, nodes in ((q, small), (q + 1, big)):
            if nodes == 0:
                continue
            rc = min(r, c)
            sizes["sq"] += nodes * rc * rc
            sizes["ranks"] += nodes * rc
            if t + 1 < depth:       # its children are non-leaves: W of each child
                sizes["w"] += nodes * rc * (min(r, c // 2) + min(r, c - c // 2))
            else:                   # its children are leaves, of c points in all: U
                sizes["u"] += nodes * c * rc
    q, small, big = _level_counts(n, depth)
    sizes["b"] = small * q * q + big * (q + 1) * (q + 1)
    sizes["leaf_max"] = q + (big > 0)
    return sizes


def tree_phase_bytes(n, d):
    """Peak of build_tree: the centred copy and the tree-ordered copy of X, the permutation and
    the (projection, row) items of the nodes being split (16 bytes a point)."""
    return 8 * (2 * n * d + 3 * n)


def hck_fit_bytes(n, d, k, r, depth, n_threads):
    """Estimated peak bytes of fit_hierarchical beyond its inputs (8-byte numbers).

    Held from the factorisation on: the tree-ordered X (n d), perm and the squared norms (2 n),
    the encoded targets (n k), the landmark positions (sum r_p) and the
    factors L, Sigma~ (2 sq), W, W~ (2 w), U (u) and the leaf Cholesky factors (b).  On top, the
    largest of: the factorisation's per-thread workspace (hck._hck.work_alloc: 2(r d + r) + 3 r^2
    + leaf_max r + 2 (levels + 1) r^2) and the 2^(split+1) r^2 Theta blocks of the top levels;
    the solve for the weights (its input copy, output and scratch: 3 n k + 4 k sum r_p) and
    its refinement (factor.refined_solve: the residual, iterate and best iterate, 3 n k, and
    the matvec's per-node vectors and one leaf block per thread, 5 k sum r_p + leaf_max^2);
    the prediction vectors (weights n k + 5 k sum r_p).  The tree-building phase before them.
    """
    s = tree_sizes(n, r, depth)
    rm, split = s["r_max"], min(depth, 3)
    base = n * d + 2 * n + n * k + s["ranks"] + 2 * s["sq"] + 2 * s["w"] + s["u"] + s["b"]
    workspace = 2 * (rm * d + rm) + 3 * rm * rm + s["leaf_max"] * rm
    factorize = (min(n_threads, 1 << split) * (workspace + 2 * (depth - split + 1) * rm * rm)
                 + (2 << split) * rm * rm)
    solve = 6 * n * k + 5 * k * s["ranks"] \
        + min(n_threads, 1 << depth) * s["leaf_max"] * s["leaf_max"]
    prediction = n * k + 5 * k * s["ranks"]
    return max(8 * (base + max(factorize, solve, prediction)), tree_phase_bytes(n, d))


def independent_fit_bytes(n, d, k, depth, n_threads):
    """Estimated peak bytes of fit_independent beyond its inputs (8-byte numbers): the
    tree-ordered X (n d), perm and squared norms (2 n), targets and weights (2 n k) and one
    leaf block K + lam I (leaf_max^2) per thread; the tree-building phase before them."""
    leaf_max = -(-n // (1 << depth))
    blocks = min(n_threads, 1 << depth) * leaf_max * leaf_max
    return max(8 * (n * d + 2 * n + 2 * n * k + blocks), tree_phase_bytes(n, d))


def fix_for_fit(leaf_size):
    return ("choose a smaller r" + (" or leaf_size" if leaf_size is not None else "")
            + ", or fit on a subsample")


def tree_centre(upper, lower):
    """The point the tree's data are centred on: the middle of their bounding box (the largest
    and smallest value of each feature).  Kernels depend on x - y only, so this changes nothing
    but the rounding, which it keeps small by bringing every coordinate within half the data's
    range of zero; unlike the mean it is exactly the same when computed from sharded rows (a
    maximum and a minimum over ranks)."""
    return 0.5 * upper + 0.5 * lower


def default_jitter(lam):
    """lam' of the HCK base kernel when none is given (see fit_hierarchical)."""
    return min(1e-3 * lam, 1e-8)


def check_tree_args(n, r, leaf_size, partition):
    if n < 2:
        raise ValueError(f"the hierarchical kernel needs at least 2 training samples; got {n} "
                         "sample")
    # r >= n: one leaf, the exact kernel (r = n - 1 gives depth 0).
    r = check_rank(r, n, "r", largest=n - 1,
                   what=f"n - 1 = {n - 1} for n={n} training samples (one leaf: the exact kernel)")
    leaf_size = check_parameter("leaf_size", leaf_size)
    check_parameter("partition", partition)
    return r, leaf_size

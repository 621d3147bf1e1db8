"""Public face of the hierarchically compositional kernel (HCK) and its independent baseline: the
fits (the plan of the tree in :mod:`.plan`, its factorisation in :mod:`.factor`, the models in
:mod:`.models`)."""
from __future__ import annotations

import numpy as np

from .._gp import Evidence, column_quads
from .._memory import check_memory
from .._model import prepare_fit
from .._parameters import check_parameter
from .._probabilities import calibrates_probabilities
from .._sharded import runs_on_shards
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import check_seed
from ..hyperparameters import selects_hyperparameters
from ..hyperparameters.sharded import select_hierarchical_on_shards
from . import _blocks
from .factor import build_tree, factorize_hck, refined_solve
from .models import HierarchicalKRR, IndependentKRR
from .plan import (
    check_tree_args,
    default_jitter,
    fix_for_fit,
    hck_fit_bytes,
    independent_fit_bytes,
    tree_depth,
)
from .sharded import fit_hierarchical_sharded

__all__ = ["fit_hierarchical", "fit_independent"]


@runs_on_shards("fit_hierarchical", fit_hierarchical_sharded, select_hierarchical_on_shards)
@calibrates_probabilities
@selects_hyperparameters("likelihood")
@budgeted
def fit_hierarchical(X, y, r=256, *, kernel="gaussian", sigma="ard", lam="auto",
                     task="regression", seed=None, n_jobs=None, jitter=None,
                     partition="random", leaf_size=None, verbose=False, comm=None,
                     max_memory=None):
    """Kernel ridge regression with a hierarchically compositional kernel (HCK).

    HCK (Chen, Avron and Sindhwani) replaces the kernel matrix by K_hier: exact kernel blocks on
    the leaves of a binary partition tree, coupled across the tree by Nystrom approximations on
    r landmarks per node.  K_hier is positive definite, costs O(n r) memory and O(n r^2) time
    to factorise, and its matvec, solve and log-determinant are exact for it.

    Parameters
    ----------
    X : array_like (n, d)
        Copied once into the tree's order (8 n d bytes), whatever its form (a memory map
        too).
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"`` (one-vs-rest, one solve).
    r : int
        Landmarks per non-leaf node (1 <= r < n; above n - 1 it is reduced to n - 1 with a
        warning: one leaf, the exact kernel); also sets the leaf size (below).
    kernel : str
        See :func:`hkern.kernel_matrix`.
    {sigma}
    lam : float or "auto", default="auto"
        Ridge regularisation (GP noise variance), > 0, or selected.
    jitter : float or None
        lam' of the paper (doc/specs/hck.md, section 2.5): the base kernel becomes k + lam' on
        identical training points, which keeps the landmark matrices well conditioned;
        0 <= jitter < lam.  Default ``min(1e-3 * lam, 1e-8)``.  The leaf diagonal blocks are
        K + lam I whatever its value.
    partition : {"random", "pca"}
        Split direction at each node: a random Gaussian direction (the paper's recommendation)
        or the principal axis of the node's points (20 power iterations).  Splits are at the
        median, so the tree is balanced.
    leaf_size : int or None
        Largest number of points in a leaf.  Default: leaves of r to 2r points
        (depth floor(log2(n / r))).
    task : {"regression", "classification"}
    seed : None, int or numpy.random.Generator
        Split directions and landmarks.
    n_jobs : int or None
        Threads (OpenMP and BLAS); None: the CPUs available, within OMP_NUM_THREADS and any
        threadpoolctl limit.  Results are bitwise identical for any value.
    {verbose}
    comm : mpi4py communicator or None
        Fit on data sharded over the ranks of ``comm`` (doc/mpi.md): call on every rank with
        that rank's rows as ``X`` and ``y``, the same other arguments, ``seed`` an int or None
        and numbers for sigma and lam.  The top ceil(log2 P) levels of the tree are split over
        the ranks and each rank factorises whole subtrees below them; the tree, landmarks,
        weights and predictions are those of the serial fit of the concatenated shards, bit for
        bit.  Returns a :class:`hkern.hierarchical.sharded.ShardedHierarchicalKRR` whose
        methods are collectives on each rank's own rows.
    max_memory : int or None
        Most bytes the fit may allocate; None (default): the memory available when the call
        starts (with ``comm``: per rank, for its part).  The fit needs about
        8 (n d + n k + n r + 4 n r^2 / leaf size + n leaf size)
        bytes (tree-ordered data, targets, the factors U, L, Sigma~, W, W~ and the leaf blocks),
        plus per-thread workspaces of a few r^2 + r leaf size numbers; the peak is estimated
        from n, d, r and the tree before anything large is allocated.

    Returns
    -------
    HierarchicalKRR
        With ``predict`` (``return_std=True``: the GP posterior standard deviation),
        ``decision_function``, ``matvec``, ``solve``, ``logdet``, ``log_marginal_likelihood``,
        ``kernel_pca`` and ``nbytes``; ``dual_coef_`` is in the training order.

    Raises
    ------
    ValueError
        For invalid input; when the estimated peak memory exceeds ``max_memory``
        (hkern.MemoryLimitError, naming r); or when the kernel is numerically
        singular on some landmarks (repeated points or a huge sigma with jitter 0 or a jitter
        below the rounding of the kernel values: pass a larger jitter).

    Notes
    -----
    Memory about 5 n r numbers (factors of A and of its inverse); time O(n r^2) to fit,
    O(r^2 log(n/r) + r d) per test point.  The inverse is kept in the factored form of the
    upward pass of the paper's Algorithm 2 (see ``hkern/hierarchical/_hck.pyx``).

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 3)); y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2
    >>> model = hkern.fit_hierarchical(X, y, r=64, sigma=0.5, lam=1e-3, seed=0)
    >>> float(np.sqrt(np.mean((model.predict(X) - y) ** 2))) < 0.05
    True
    """
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory)
    X, Y = inputs.X, inputs.Y
    n = X.shape[0]
    r, leaf_size = check_tree_args(n, r, leaf_size, partition)
    jitter = check_parameter("jitter", jitter, lam=inputs.lam)
    if jitter is None:
        jitter = default_jitter(inputs.lam)
    rng = check_seed(seed)
    n_threads = budget_threads()
    depth = tree_depth(n, r, leaf_size)
    check_memory(hck_fit_bytes(n, X.shape[1], Y.shape[1], r, depth, n_threads)
                 + inputs.scaled_bytes, max_memory,
                 what=f"fit_hierarchical with n={n}, r={r}, d={X.shape[1]} and leaves of "
                 f"{-(-n // (1 << depth))} points (depth {depth})",
                 fix=fix_for_fit(leaf_size))
    op, tree = factorize_hck(X, r, leaf_size, partition, rng, inputs.kind, inputs.bandwidth,
                             inputs.lam, jitter, n_threads)
    Y_tree = np.ascontiguousarray(Y[tree["perm"]])
    weights = refined_solve(op, Y_tree, inputs.lam, n_threads)
    with blas_threads(1):
        pred_vectors, pred_offsets = op.prediction_vectors(weights, n_threads)
    evidence = Evidence(column_quads(Y_tree, weights), op.logdet_value, n)
    return HierarchicalKRR(operator=op, weights=weights, pred_vectors=pred_vectors,
                           pred_offsets=pred_offsets, r=r, jitter=jitter, evidence=evidence,
                           **inputs.model_params(n_jobs), **tree)


@calibrates_probabilities
@selects_hyperparameters("likelihood")
@budgeted
def fit_independent(X, y, r=256, *, kernel="gaussian", sigma="ard", lam="auto", task="regression",
                    seed=None, n_jobs=None, partition="random", leaf_size=None, verbose=False,
                    max_memory=None):
    """Kernel ridge regression with the independent (block-diagonal) kernel on an HCK tree.

    The baseline of the HCK paper: the same partition as :func:`fit_hierarchical` with the same
    ``r``, ``leaf_size``, ``partition`` and ``seed`` (so the same leaves), the exact kernel
    inside each leaf and nothing across leaves.  Parameters as for
    :func:`fit_hierarchical` (``sigma="auto"``/``"ard"`` and ``lam="auto"`` included, selected
    by the independent kernel's own likelihood); ``r`` only sets the leaf size.  ``max_memory``
    bounds the estimated peak, about 8 (n d + 3 n k + n_jobs leaf size^2) bytes (tree-ordered data,
    targets, the weights in tree and in training order, one leaf block per thread).

    Returns
    -------
    IndependentKRR

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 3)); y = np.sin(3 * X[:, 0])
    >>> model = hkern.fit_independent(X, y, r=64, sigma=0.5, lam=1e-3, seed=0)
    >>> model.predict(X[:3]).shape
    (3,)
    """
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory)
    X, Y = inputs.X, inputs.Y
    n = X.shape[0]
    r, leaf_size = check_tree_args(n, r, leaf_size, partition)
    rng = check_seed(seed)
    n_threads = budget_threads()
    depth = tree_depth(n, r, leaf_size)
    check_memory(independent_fit_bytes(n, X.shape[1], Y.shape[1], depth, n_threads)
                 + inputs.scaled_bytes, max_memory,
                 what=f"fit_independent with n={n}, r={r}, d={X.shape[1]} and "
                      f"leaves of {-(-n // (1 << depth))} points (depth {depth})",
                 fix=fix_for_fit(leaf_size))
    X_tree, tree = build_tree(X, r, leaf_size, partition, rng, n_threads)
    alpha = np.ascontiguousarray(Y[tree["perm"]])   # Y in tree order, solved in place below
    with blas_threads(1):
        logdet = _blocks.fit_blocks(X_tree, tree["start"], tree["count"], tree["depth"],
                                    inputs.kind, inputs.bandwidth, inputs.lam, alpha, n_threads)
    evidence = Evidence(column_quads(Y[tree["perm"]], alpha), logdet, n)
    return IndependentKRR(X_tree=X_tree, alpha=alpha, logdet=logdet, evidence=evidence,
                          **inputs.model_params(n_jobs), **tree)

"""The tests' oracles: every quantity hkern computes, built from its mathematical definition with
NumPy/SciPy at small n, never by calling hkern.  One statement of each, shared by all test files.

* errors: :func:`rel_norm` (norm-wise, for vectors, solves and predictions) and :func:`rel_max`
  (entry-wise against the largest entry, for matrices);
* kernels: :data:`KERNELS` and :func:`dense_kernel`, the six families of ``kernel_matrix``'s
  docstring;
* Gaussian processes: :func:`dense_logdet`, :func:`dense_lml` (the log marginal likelihood) and
  :func:`dense_gp_posterior`;
* Nystrom and random features: :func:`nystrom_krr`, :func:`rff_features`;
* HCK: the hierarchically compositional kernel from its pointwise definition
  (doc/specs/hck.md, section 1): :func:`khier_matrix`, :func:`khier_cross`, :func:`hck_system`,
  :func:`dense_krr_predict` and the heap-order tree helpers;
* SLKL (doc/specs/slkl.md, sections 1-2): :func:`slkl_dense`, :func:`slkl_G`, :func:`slkl_beta`;
* MEKA (doc/specs/meka.md, sections 2-3): :func:`nystrom_map`, :func:`meka_link`;
* GRIEF (doc/specs/grief.md): :func:`grief_dense_phi`.

The oracles are themselves checked against independent facts in tests/test_oracles.py and
tests/test_oracles_hck.py.
"""
import itertools

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist

__all__ = [
    "rel_norm", "rel_max",
    "KERNELS", "dense_kernel",
    "dense_logdet", "dense_lml", "dense_gp_posterior",
    "nystrom_krr", "rff_features",
    "node_ranges", "leaf_heap_id", "leaf_of_positions", "lca_below",
    "khier_matrix", "khier_cross", "hck_system", "dense_krr_predict",
    "slkl_dense", "slkl_G", "slkl_beta",
    "nystrom_map", "meka_link",
    "grief_dense_phi",
]


# --------------------------------------------------------------------------------------------
# relative errors
# --------------------------------------------------------------------------------------------
def _difference(got, ref):
    got, ref = np.asarray(got, dtype=float), np.asarray(ref, dtype=float)
    # Equal shapes: broadcasting (n,) against (n, 1) would compare an n x n table instead.
    assert got.shape == ref.shape, f"shapes differ: {got.shape} vs {ref.shape}"
    return got - ref, ref


def rel_norm(got, ref):
    """||got - ref||_F / ||ref||_F; the absolute error ||got - ref||_F where ref is zero.

    Examples
    --------
    >>> rel_norm([1.0, 2.0], [1.0, 2.0])
    0.0
    >>> float(rel_norm([3.0, 4.0 + 1e-9], [3.0, 4.0])) < 1e-9
    True
    """
    diff, ref = _difference(got, ref)
    scale = np.linalg.norm(ref)
    return float(np.linalg.norm(diff) / scale) if scale > 0 else float(np.linalg.norm(diff))


def rel_max(got, ref):
    """max|got - ref| / max|ref|; the absolute error max|got - ref| where ref is zero.

    Examples
    --------
    >>> rel_max([[1.0, 0.5]], [[1.0, 0.25]])
    0.25
    """
    diff, ref = _difference(got, ref)
    if diff.size == 0:
        return 0.0
    scale = np.abs(ref).max()
    return float(np.abs(diff).max() / scale) if scale > 0 else float(np.abs(diff).max())


# --------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------
KERNELS = ("gaussian", "laplace", "imq", "matern12", "matern32", "matern52")


def dense_kernel(X, Y=None, *, kernel="gaussian", sigma):
    r"""K[i, j] = k(X[i], Y[j]) from the definitions (r = ||x - y||_2, sigma > 0):

    ============  =========================================================
    ``gaussian``  exp(-r^2 / (2 sigma^2))
    ``laplace``   exp(-||x - y||_1 / sigma)
    ``imq``       sigma / sqrt(r^2 + sigma^2) = 1 / sqrt(1 + (r / sigma)^2)
    ``matern12``  exp(-r / sigma)
    ``matern32``  (1 + a) exp(-a),             a = sqrt(3) r / sigma
    ``matern52``  (1 + a + a^2 / 3) exp(-a),   a = sqrt(5) r / sigma
    ============  =========================================================

    Distances come from ``scipy.spatial.distance.cdist`` (differences, no cancellation) and are
    divided by sigma before anything else, so that any sigma > 0 works (sigma^2 itself may
    overflow or underflow): sigma = 1e-300 gives the identity on distinct points, 1e300 all ones,
    and the Matern kernels are 0 (their limit) where p(a) exp(-a) would be inf * 0.

    Examples
    --------
    >>> X = np.array([[0.0, 0.0], [3.0, 4.0]])
    >>> bool(dense_kernel(X, sigma=5.0)[0, 1] == np.exp(-0.5))   # r = 5 = sigma
    True
    """
    X = np.asarray(X, dtype=float)
    Y = X if Y is None else np.asarray(Y, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):     # inf scaled distances are meant
        return _kernel_of_distances(X, Y, kernel, sigma)


def _kernel_of_distances(X, Y, kernel, sigma):
    if kernel == "laplace":
        return np.exp(-(cdist(X, Y, "cityblock") / sigma))
    if kernel in ("gaussian", "imq"):
        s = cdist(X, Y, "sqeuclidean") / sigma / sigma
        return np.exp(-0.5 * s) if kernel == "gaussian" else 1.0 / np.sqrt(1.0 + s)
    r = cdist(X, Y, "euclidean") / sigma
    if kernel == "matern12":
        return np.exp(-r)
    if kernel == "matern32":
        a = np.sqrt(3.0) * r
        p = 1.0 + a
    elif kernel == "matern52":
        a = np.sqrt(5.0) * r
        p = 1.0 + a + a * a / 3.0
    else:
        raise ValueError(f"kernel must be one of {KERNELS}; got {kernel!r}")
    return np.where(np.isfinite(p), p * np.exp(-a), 0.0)


# --------------------------------------------------------------------------------------------
# Gaussian processes
# --------------------------------------------------------------------------------------------
def dense_logdet(A):
    """log det A for symmetric positive-definite A (Cholesky); ValueError if A is not SPD."""
    A = np.asarray(A, dtype=float)
    try:
        L = scipy.linalg.cholesky(A, lower=True)
    except np.linalg.LinAlgError as exc:
        raise ValueError("dense_logdet: matrix is not positive definite") from exc
    return 2.0 * float(np.sum(np.log(np.diag(L))))


def dense_lml(K, y, noise=0.0):
    """Gaussian log marginal likelihood log N(y; 0, C), C = K + noise I:
    -1/2 y^T C^{-1} y - 1/2 log det C - n/2 log(2 pi); for y with k columns, the sum over columns.

    Examples
    --------
    >>> bool(abs(dense_lml(np.eye(2), np.zeros(2)) + np.log(2 * np.pi)) < 1e-15)
    True
    """
    y = np.asarray(y, dtype=float)
    Y = y[:, None] if y.ndim == 1 else y
    n, k = Y.shape
    C = np.array(K, dtype=float)
    if C.shape != (n, n):
        raise ValueError("K must be n x n with n = len(y)")
    C[np.diag_indices(n)] += noise
    cf = scipy.linalg.cho_factor(C, lower=True)
    alpha = scipy.linalg.cho_solve(cf, Y)
    logdet = 2.0 * float(np.sum(np.log(np.diag(cf[0]))))
    return float(-0.5 * np.sum(Y * alpha) - 0.5 * k * logdet - 0.5 * k * n * np.log(2.0 * np.pi))


def zero_mean(y, step=2.0 ** -30):
    """y moved to a grid of ``step`` with each column's sum exactly 0 (its entries move by at
    most a few steps): every fit's mean (the exactly rounded training mean, hkern._targets) is
    then 0.0 and its centred targets are y's own bits, so the dense references of the zero-mean
    Gaussian process apply to the fit as they are.  The tests of the mean itself
    (test_predictive.py, test_gp_face.py, test_scale_equivariance.py) use y as it comes.

    Examples
    --------
    >>> y = zero_mean(np.array([1.0, 2.0, 4.5]))
    >>> float(np.sum(y)), bool(np.allclose(y, [-1.5, -0.5, 2.0]))
    (0.0, True)
    """
    y = np.asarray(y, dtype=float)
    q = np.round(y / step).astype(np.int64)
    q -= q.sum(axis=0) // len(q)                 # the remainder r: 0 <= r < n per column
    r = q.sum(axis=0)
    if q.ndim == 1:
        q[:r] -= 1
    else:
        for j, rj in enumerate(r):
            q[:rj, j] -= 1
    return q * step


def dense_fitted_gp(A, y):
    """The fitted model of every hkern regression fit (hkern._gp), from its definition at a
    dense training covariance A: each column y_j is its mean mu_j (the training mean) plus a
    zero-mean GP of covariance s2_j A, s2_j the maximum-likelihood (y_j - mu_j)^T A^{-1}
    (y_j - mu_j) / n.  Returns (mu (k,), alpha = A^{-1} (Y - mu) (n, k), s2 (k,)).

    Examples
    --------
    >>> mu, alpha, s2 = dense_fitted_gp(np.eye(2), np.array([1.0, 3.0]))
    >>> mu.tolist(), alpha[:, 0].tolist(), s2.tolist()
    ([2.0], [-1.0, 1.0], [1.0])
    """
    Y = np.asarray(y, dtype=float)
    Y = Y[:, None] if Y.ndim == 1 else Y
    mu = Y.mean(axis=0)
    alpha = scipy.linalg.solve(np.asarray(A, dtype=float), Y - mu, assume_a="pos")
    return mu, alpha, np.einsum("ij,ij->j", Y - mu, alpha) / len(Y)


def dense_fitted_lml(A, y_fit, y=None):
    """log N(y - mu | 0, s2 A) summed over columns, mu and s2 those of the model fitted to
    ``y_fit`` (:func:`dense_fitted_gp`); y None: y_fit (the profiled likelihood)."""
    mu, _, s2 = dense_fitted_gp(A, y_fit)
    Y = np.asarray(y_fit if y is None else y, dtype=float)
    Y = Y[:, None] if Y.ndim == 1 else Y
    if len(mu) == 1:            # one fitted output: its mean and variance for every column
        mu, s2 = np.repeat(mu, Y.shape[1]), np.repeat(s2, Y.shape[1])
    return sum(dense_lml(s2[j] * np.asarray(A, dtype=float), Y[:, j] - mu[j])
               for j in range(Y.shape[1]))


def dense_gp_posterior(K, K_cross, k_diag, y, noise):
    """Posterior mean and variance of a zero-mean GP at new points, by dense solves:
    mean = K_* C^{-1} y, var = k_** - diag(K_* C^{-1} K_*^T), C = K + noise I.

    ``K`` (n, n) is the prior covariance of the training points, ``K_cross`` (m, n) that of the
    new points with them and ``k_diag`` (m,) their prior variances; the variance is that of the
    latent function (add ``noise`` for an observation's).
    """
    C = np.asarray(K, dtype=float) + noise * np.eye(len(y))
    mean = K_cross @ np.linalg.solve(C, y)
    var = k_diag - np.einsum("ij,ji->i", K_cross, np.linalg.solve(C, K_cross.T))
    return mean, var


# --------------------------------------------------------------------------------------------
# Nystrom and random Fourier features
# --------------------------------------------------------------------------------------------
def nystrom_krr(X, Z, y, lam, *, kernel="gaussian", sigma, X_test=None):
    """KRR with the Nystrom kernel K~ = C W^{-1} C^T (C = K(X, Z), W = K(Z, Z)), solved densely.

    Returns (K~, alpha, predictions at X_test = K(X_test, Z) W^{-1} C^T alpha, or None), where
    (K~ + lam I) alpha = y.  Asserts cond(W) < 1e8: only then is the explicit inverse itself
    accurate enough to serve as a reference.
    """
    C = dense_kernel(X, Z, kernel=kernel, sigma=sigma)
    W = dense_kernel(Z, Z, kernel=kernel, sigma=sigma)
    assert np.linalg.cond(W) < 1e8, "W is too ill-conditioned for the reference's inverse"
    W_inv = np.linalg.inv(W)
    K_nys = C @ W_inv @ C.T
    alpha = np.linalg.solve(K_nys + lam * np.eye(len(X)), y)
    pred = None
    if X_test is not None:
        pred = dense_kernel(X_test, Z, kernel=kernel, sigma=sigma) @ W_inv @ C.T @ alpha
    return K_nys, alpha, pred


def rff_features(X, frequencies, offsets):
    """Random Fourier features z(x) = sqrt(2 / r) cos(W x + b) for r frequencies W (r, d)."""
    r = len(offsets)
    return np.sqrt(2 / r) * np.cos(np.asarray(X) @ np.asarray(frequencies).T + offsets)


# --------------------------------------------------------------------------------------------
# HCK: the hierarchically compositional kernel from its pointwise definition (doc/specs/hck.md,
# section 1), NOT from the factor form (U, W, Sigma) or Algorithms 1-3, so that a fast
# factor-based implementation is checked against an independent statement of the mathematics.
#
# Tree convention (shared with the fast implementation, which passes it in):
#   * a COMPLETE binary tree of depth J in heap order: node 0 is the root, node i has children
#     2i+1 and 2i+2, and the leaves are level J, heap ids 2^J - 1 .. 2^(J+1) - 2.  Leaf number
#     ``l`` (0-based, left to right) is heap id ``l + 2^J - 1``.  Depth 0 means the root is the
#     only node and is a leaf.
#   * points are given already permuted into tree order (``X_tree``, n x d); each node owns a
#     contiguous range of positions: the root owns [0, n), and a node with m points gives its
#     left child the first floor(m/2) positions and its right child the remaining ceil(m/2).
#   * ``landmarks[i]`` (non-leaf heap node i) is an integer array of positions (indices into
#     X_tree), conventionally inside node i's own range; entries for leaves are ignored.
#   * ``kern(A, B)`` is the base kernel k, returning the len(A) x len(B) matrix.
#   * the jitter lam_p (lambda', hck.md 2.5 and 6) is applied by TRAINING-INDEX IDENTITY:
#     k'(x_a, x_b) = k(x_a, x_b) + lam_p * [a == b] for positions a, b.  A landmark and a data
#     point (or landmarks of two nodes) coincide exactly when their positions are equal.  For a
#     new (test) point x, k'(landmark, x) = k(landmark, x): no jitter.
#
# Pointwise definition used, with k' as the base kernel:
#   * x, x' in the same leaf:  k_hier(x, x') = k'(x, x').
#   * otherwise let a be the least common ancestor of their leaves, and for a point x in leaf j
#         psi^(parent(j))(x) = k'(x, L_parent(j))
#         psi^(q)(x)         = psi^(c)(x) K'_{c,c}^{-1} K'_{c,q}     (c = child of q on x's path)
#     climbed up to q = a on each side; then
#         k_hier(x, x') = psi^(a)(x) K'_{a,a}^{-1} psi^(a)(x')^T,
#     where L_q is node q's landmark set and K'_{p,q} = k'(L_p, L_q).
# --------------------------------------------------------------------------------------------
def node_ranges(n, depth):
    """(start, count) for every heap node 0 .. 2^(depth+1) - 2 of the complete binary tree.

    Root owns [0, n); a node with m points gives its left child the first floor(m/2) positions
    and its right child the remaining ceil(m/2).

    Examples
    --------
    >>> node_ranges(5, 1)
    [(0, 5), (0, 2), (2, 3)]
    """
    n, depth = int(n), int(depth)
    if depth < 0 or n < 0:
        raise ValueError("n and depth must be non-negative")
    n_nodes = 2 ** (depth + 1) - 1
    ranges = [None] * n_nodes
    ranges[0] = (0, n)
    for i in range(n_nodes):
        left, right = 2 * i + 1, 2 * i + 2
        if left >= n_nodes:
            continue
        start, m = ranges[i]
        half = m // 2
        ranges[left] = (start, half)
        ranges[right] = (start + half, m - half)
    return ranges


def leaf_heap_id(leaf_number, depth):
    """Heap id of 0-based leaf number ``leaf_number`` in a complete binary tree of ``depth``."""
    return int(leaf_number) + 2 ** int(depth) - 1


def leaf_of_positions(n, depth):
    """Leaf number (0-based, left to right) of every tree position 0 .. n - 1.

    Examples
    --------
    >>> leaf_of_positions(5, 1).tolist()
    [0, 0, 1, 1, 1]
    """
    counts = [c for _, c in node_ranges(n, depth)[2 ** int(depth) - 1:]]
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def _parent(i):
    return (i - 1) // 2


def _ancestors(i):
    """[i, parent(i), ..., 0] (the node itself first, the root last)."""
    path = [i]
    while i != 0:
        i = _parent(i)
        path.append(i)
    return path


def lca_below(leaf_a, leaf_b):
    """Least common ancestor a of two distinct leaves (heap ids), and the path from each leaf up.

    Returns (a, path_a, path_b), where path_x = [parent(leaf_x), ..., a] lists the non-leaf nodes
    from the leaf's parent up to and including a.
    """
    anc_a = _ancestors(leaf_a)
    anc_b = _ancestors(leaf_b)
    on_a = set(anc_a)
    a = next(q for q in anc_b if q in on_a)
    path_a = anc_a[1:anc_a.index(a) + 1]
    path_b = anc_b[1:anc_b.index(a) + 1]
    return a, path_a, path_b


def _check_inputs(X_tree, depth, landmarks):
    X_tree = np.asarray(X_tree, dtype=float)
    if X_tree.ndim != 2:
        raise ValueError("X_tree must be n x d")
    n = X_tree.shape[0]
    depth = int(depth)
    n_nonleaf = 2 ** depth - 1
    if len(landmarks) < n_nonleaf:
        raise ValueError(f"landmarks must have an entry for each of the {n_nonleaf} non-leaf nodes")
    lms = []
    for i in range(n_nonleaf):
        L = np.asarray(landmarks[i], dtype=np.intp).ravel()
        if L.size == 0:
            raise ValueError(f"non-leaf node {i} has no landmarks")
        if L.min() < 0 or L.max() >= n:
            raise ValueError(f"landmarks of node {i} are not positions in [0, {n})")
        if np.unique(L).size != L.size:
            raise ValueError(f"landmarks of node {i} repeat a position (K'_ii would be singular)")
        lms.append(L)
    return X_tree, n, depth, lms


class _Kprime:
    """k' on positions (jitter by index identity) and k between new points and positions."""

    def __init__(self, X_tree, kern, lam_p):
        self.X = X_tree
        self.kern = kern
        self.lam_p = float(lam_p)

    def pos(self, P, Q):
        """k'(x_P, x_Q) for position arrays P, Q (jitter where positions coincide)."""
        P = np.asarray(P, dtype=np.intp)
        Q = np.asarray(Q, dtype=np.intp)
        M = np.array(self.kern(self.X[P], self.X[Q]), dtype=float, copy=True)
        if self.lam_p != 0.0:
            M += self.lam_p * (P[:, None] == Q[None, :])
        return M

    def new(self, Xq, Q):
        """k(x_new, x_Q) for new points (no jitter)."""
        Q = np.asarray(Q, dtype=np.intp)
        return np.array(self.kern(Xq, self.X[Q]), dtype=float, copy=True)


def _climb(kp, lms, psi, path):
    """psi^(path[0]) -> psi^(path[-1]) by psi^(q) = psi^(c) K'_{c,c}^{-1} K'_{c,q}.

    ``psi`` holds the rows psi^(path[0])(x) for a batch of points (rows = points).
    """
    for c, q in zip(path[:-1], path[1:]):
        Kcc = kp.pos(lms[c], lms[c])
        Kcq = kp.pos(lms[c], lms[q])
        psi = psi @ np.linalg.solve(Kcc, Kcq)
    return psi


def _cross_block(kp, lms, psi_rows_i, leaf_i, leaf_j, rows_j):
    """k_hier between a batch of points in leaf_i (given by their first psi rows, i.e. the
    kernel rows against the landmarks of parent(leaf_i)) and the training points ``rows_j`` of
    leaf_j != leaf_i."""
    a, path_i, path_j = lca_below(leaf_i, leaf_j)
    psi_i = _climb(kp, lms, psi_rows_i, path_i)
    psi_j = _climb(kp, lms, kp.pos(rows_j, lms[path_j[0]]), path_j)
    Kaa = kp.pos(lms[a], lms[a])
    return psi_i @ np.linalg.solve(Kaa, psi_j.T)


def _leaf_rows(n, depth):
    """{leaf heap id: its training positions}."""
    ranges = node_ranges(n, depth)
    first_leaf = 2 ** depth - 1
    return {leaf: np.arange(ranges[leaf][0], sum(ranges[leaf]))
            for leaf in range(first_leaf, 2 * first_leaf + 1)}


def _khier_rows(kp, lms, rows, leaf, same_leaf, to_parent):
    """k_hier between a batch of points of ``leaf`` and all training positions.

    ``same_leaf(R)`` is the batch's block against positions R of its own leaf (k' for training
    points, k for new ones); ``to_parent()`` its kernel rows against the landmarks of
    parent(leaf), the start of the psi-recursion towards every other leaf.
    """
    first = None
    blocks = []
    for other, R in rows.items():                  # leaves in order: positions in order
        if other == leaf:
            blocks.append(same_leaf(R))
        else:
            first = to_parent() if first is None else first
            blocks.append(_cross_block(kp, lms, first, leaf, other, R))
    return np.hstack(blocks)


def khier_matrix(X_tree, depth, landmarks, kern, lam_p=0.0):
    """n x n matrix K_hier'(x_i, x_j) over training positions, from the pointwise definition
    (hck.md section 1) with base kernel k' (jitter lam_p by position identity)."""
    X_tree, n, depth, lms = _check_inputs(X_tree, depth, landmarks)
    kp = _Kprime(X_tree, kern, lam_p)
    rows = _leaf_rows(n, depth)
    K = np.empty((n, n))
    for leaf, R in rows.items():
        K[R] = _khier_rows(kp, lms, rows, leaf, lambda Q, R=R: kp.pos(R, Q),
                           lambda R=R, leaf=leaf: kp.pos(R, lms[_parent(leaf)]))
    return K


def khier_cross(X_tree, depth, landmarks, kern, lam_p, Xq, leaf_of_q):
    """m x n matrix k_hier(x_q, x_j) for NEW points Xq routed to leaves ``leaf_of_q`` (0-based
    leaf numbers); a new point behaves like a point of its leaf, with no jitter between it and
    any training point or landmark (jitter among landmarks still applies in K'_{c,c}, K'_{c,q})."""
    X_tree, n, depth, lms = _check_inputs(X_tree, depth, landmarks)
    Xq = np.asarray(Xq, dtype=float)
    if Xq.ndim == 1:
        Xq = Xq[None, :]
    leaf_of_q = np.asarray(leaf_of_q, dtype=np.intp).ravel()
    m = Xq.shape[0]
    if leaf_of_q.shape[0] != m:
        raise ValueError("leaf_of_q must have one entry per row of Xq")
    n_leaves = 2 ** depth
    if m and (leaf_of_q.min() < 0 or leaf_of_q.max() >= n_leaves):
        raise ValueError(f"leaf numbers must be in [0, {n_leaves})")
    kp = _Kprime(X_tree, kern, lam_p)
    rows = _leaf_rows(n, depth)
    Kq = np.empty((m, n))
    for lnum in np.unique(leaf_of_q):
        qs = np.flatnonzero(leaf_of_q == lnum)
        leaf = leaf_heap_id(lnum, depth)
        Kq[qs] = _khier_rows(kp, lms, rows, leaf, lambda Q, qs=qs: kp.new(Xq[qs], Q),
                             lambda qs=qs, leaf=leaf: kp.new(Xq[qs], lms[_parent(leaf)]))
    return Kq


def hck_system(X_tree, depth, landmarks, kern, lam, lam_p=0.0):
    """KRR system matrix of hck.md 2.5: A = K_hier' + (lam - lam_p) I (leaf diagonal blocks are
    then K + lam I)."""
    A = khier_matrix(X_tree, depth, landmarks, kern, lam_p)
    A[np.diag_indices_from(A)] += float(lam) - float(lam_p)
    return A


def dense_krr_predict(X_tree, depth, landmarks, kern, lam, lam_p, y, Xq, leaf_of_q):
    """KRR prediction k_hier(Xq, X) A^{-1} y with A = hck_system(...); y in tree order
    (n or n x k), result m or m x k."""
    A = hck_system(X_tree, depth, landmarks, kern, lam, lam_p)
    w = scipy.linalg.solve(A, np.asarray(y, dtype=float), assume_a="pos")
    return khier_cross(X_tree, depth, landmarks, kern, lam_p, Xq, leaf_of_q) @ w


# --------------------------------------------------------------------------------------------
# SLKL (doc/specs/slkl.md, sections 1-2)
# --------------------------------------------------------------------------------------------
def slkl_dense(C, mu, y, lam, nu):
    """SLKL quantities from their definitions (slkl.md sections 1-2), n x n inverse.

    C (n, M) holds the candidate columns c_m.  Returns a (M,), b (M,), F and
    Kinv = (lam I + sum_m mu_m c_m c_m^T)^{-1}.
    """
    n = C.shape[0]
    Kinv = np.linalg.inv(lam * np.eye(n) + (C * mu) @ C.T)
    a = C.T @ (Kinv @ y)
    b = np.einsum("im,ij,jm->m", C, Kinv, C)
    F = y @ np.linalg.solve(np.eye(n) + (C * mu) @ C.T / lam, y) + nu * mu.sum()
    return a, b, F, Kinv


def slkl_G(C, mu, active, lam):
    """G = (D^{-1} + C_A^T C_A / lam)^{-1} by direct inversion, in the order of `active`."""
    CA = C[:, active]
    return np.linalg.inv(np.diag(1.0 / mu[active]) + CA.T @ CA / lam)


def slkl_beta(C, mu, y, lam):
    """beta = D C^T (lam I + C D C^T)^{-1} y from its definition (n x n solve) and the
    condition number kappa = 1 + ||C D C^T||_2 / lam that bounds its accuracy; the model then
    predicts f(x) = sum_m beta_m k(x_m, x)."""
    K_tilde = (C * mu) @ C.T
    n = C.shape[0]
    beta = mu * (C.T @ np.linalg.solve(lam * np.eye(n) + K_tilde, y))
    return beta, 1.0 + np.linalg.norm(K_tilde, 2) / lam


# --------------------------------------------------------------------------------------------
# MEKA (doc/specs/meka.md, sections 2-3)
# --------------------------------------------------------------------------------------------
def nystrom_map(K_ZZ, rank):
    """F = U_k Lambda_k^{-1/2} from the k = ``rank`` largest eigenpairs of K(Z, Z) (numpy eigh):
    a cluster's rank-k Nystrom basis is W = K(X_s, Z) F, and K(X_s, Z) F F^T K(Z, X_s) its
    rank-k Nystrom approximation.  Columns are defined up to sign."""
    w, U = np.linalg.eigh(K_ZZ)
    w, U = w[::-1][:rank], U[:, ::-1][:, :rank]
    return U / np.sqrt(w)


def meka_link(W_s, K_st, W_t, rtol=None):
    """The exact block least squares link L^(s,t) = pinv(W_s) K(X_s, X_t) pinv(W_t)^T, the
    minimiser of ||K_st - W_s L W_t^T||_F (``rtol``: numpy's pinv cutoff)."""
    kw = {} if rtol is None else {"rtol": rtol}
    return np.linalg.pinv(W_s, **kw) @ K_st @ np.linalg.pinv(W_t, **kw).T


# --------------------------------------------------------------------------------------------
# GRIEF (doc/specs/grief.md)
# --------------------------------------------------------------------------------------------
def grief_dense_phi(X, grids, lengthscales, p, jitter=1e-12):
    """GRIEF basis Phi = K_XU Q S_p' Lambda_p^(-1/2) built naively (tiny d and mbar only).

    U is the full Cartesian grid (dimension 1 slowest), K_UU the Kronecker product of the jittered
    1-D SE matrices, and Q, Lambda its dense eigendecomposition; the p largest eigenvalues are
    taken by a full sort.  Returns (Phi, eigenvalues (p,), positions in the dense spectrum).
    """
    U = np.array(list(itertools.product(*grids)))
    K_UU = np.ones((1, 1))
    for g, ls in zip(grids, lengthscales):
        K_1d = dense_kernel(g[:, None], sigma=ls)
        K_UU = np.kron(K_UU, K_1d + jitter * np.eye(g.size))
    lam, Q = np.linalg.eigh(K_UU)
    order = np.argsort(-lam, kind="stable")[:p]
    K_XU = dense_kernel(X / lengthscales, U / lengthscales, sigma=1.0)
    return K_XU @ Q[:, order] / np.sqrt(lam[order]), lam[order], order

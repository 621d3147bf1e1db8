"""Dense reference for the hierarchically compositional kernel (HCK), from its pointwise definition.

For tests only (numpy/scipy, n up to a few hundred).  This module states K_hier directly from the
recursive definition in hck.md section 1 (the psi-recursion), NOT from the factor form
(U, W, Sigma) or Algorithms 1-3, so that a fast factor-based implementation can be checked against
an independent statement of the mathematics.

Tree convention (shared with the fast implementation, which passes it in):
  * a COMPLETE binary tree of depth J in heap order: node 0 is the root, node i has children
    2i+1 and 2i+2, and the leaves are level J, heap ids 2^J - 1 .. 2^(J+1) - 2.  Leaf number
    ``l`` (0-based, left to right) is heap id ``l + 2^J - 1``.  Depth 0 means the root is the
    only node and is a leaf.
  * points are given already permuted into tree order (``X_tree``, n x d); each node owns a
    contiguous range of positions: the root owns [0, n), and a node with m points gives its left
    child the first floor(m/2) positions and its right child the remaining ceil(m/2).
  * ``landmarks[i]`` (non-leaf heap node i) is an integer array of positions (indices into
    X_tree), conventionally inside node i's own range; entries for leaves are ignored.
  * ``kern(A, B)`` is the base kernel k, returning the len(A) x len(B) matrix.
  * the jitter lam_p (lambda', hck.md 2.5 and 6) is applied by TRAINING-INDEX IDENTITY:
    k'(x_a, x_b) = k(x_a, x_b) + lam_p * [a == b] for positions a, b.  A landmark and a data
    point (or landmarks of two nodes) coincide exactly when their positions are equal.  For a new
    (test) point x, k'(landmark, x) = k(landmark, x): no jitter.

Pointwise definition used (hck.md section 1), with k' as the base kernel:
  * x, x' in the same leaf:  k_hier(x, x') = k'(x, x').
  * otherwise let a be the least common ancestor of their leaves, and for a point x in leaf j
        psi^(parent(j))(x) = k'(x, L_parent(j))
        psi^(q)(x)         = psi^(c)(x) K'_{c,c}^{-1} K'_{c,q}     (c = child of q on x's path)
    climbed up to q = a on each side; then
        k_hier(x, x') = psi^(a)(x) K'_{a,a}^{-1} psi^(a)(x')^T,
    where L_q is node q's landmark set and K'_{p,q} = k'(L_p, L_q).
"""
import numpy as np
import scipy.linalg

__all__ = [
    "node_ranges",
    "leaf_heap_id",
    "khier_matrix",
    "khier_cross",
    "hck_system",
    "dense_logdet",
    "dense_lml",
    "dense_krr_predict",
]


# --------------------------------------------------------------------------------------------
# tree helpers
# --------------------------------------------------------------------------------------------
def node_ranges(n, depth):
    """(start, count) for every heap node 0 .. 2^(depth+1) - 2 of the complete binary tree.

    Root owns [0, n); a node with m points gives its left child the first floor(m/2) positions
    and its right child the remaining ceil(m/2).
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


def _parent(i):
    return (i - 1) // 2


def _ancestors(i):
    """[i, parent(i), ..., 0] (the node itself first, the root last)."""
    path = [i]
    while i != 0:
        i = _parent(i)
        path.append(i)
    return path


def _lca_below(leaf_a, leaf_b):
    """Least common ancestor a of two distinct leaves, and the path from each leaf up to a.

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
    a, path_i, path_j = _lca_below(leaf_i, leaf_j)
    psi_i = _climb(kp, lms, psi_rows_i, path_i)
    psi_j = _climb(kp, lms, kp.pos(rows_j, lms[path_j[0]]), path_j)
    Kaa = kp.pos(lms[a], lms[a])
    return psi_i @ np.linalg.solve(Kaa, psi_j.T)


# --------------------------------------------------------------------------------------------
# the kernel matrices
# --------------------------------------------------------------------------------------------
def khier_matrix(X_tree, depth, landmarks, kern, lam_p=0.0):
    """n x n matrix K_hier'(x_i, x_j) over training positions, from the pointwise definition
    (hck.md section 1) with base kernel k' (jitter lam_p by position identity)."""
    X_tree, n, depth, lms = _check_inputs(X_tree, depth, landmarks)
    kp = _Kprime(X_tree, kern, lam_p)
    ranges = node_ranges(n, depth)
    first_leaf = 2 ** depth - 1
    leaves = list(range(first_leaf, 2 ** (depth + 1) - 1))
    rows = {l: np.arange(ranges[l][0], ranges[l][0] + ranges[l][1]) for l in leaves}
    K = np.empty((n, n))
    for li in leaves:
        Ri = rows[li]
        for lj in leaves:
            Rj = rows[lj]
            if li == lj:
                block = kp.pos(Ri, Rj)
            else:
                first = kp.pos(Ri, lms[_parent(li)])
                block = _cross_block(kp, lms, first, li, lj, Rj)
            K[np.ix_(Ri, Rj)] = block
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
    ranges = node_ranges(n, depth)
    first_leaf = 2 ** depth - 1
    leaves = list(range(first_leaf, 2 ** (depth + 1) - 1))
    rows = {l: np.arange(ranges[l][0], ranges[l][0] + ranges[l][1]) for l in leaves}
    Kq = np.empty((m, n))
    for lnum in np.unique(leaf_of_q):
        qs = np.flatnonzero(leaf_of_q == lnum)
        li = leaf_heap_id(lnum, depth)
        for lj in leaves:
            Rj = rows[lj]
            if li == lj:
                block = kp.new(Xq[qs], Rj)
            else:
                first = kp.new(Xq[qs], lms[_parent(li)])
                block = _cross_block(kp, lms, first, li, lj, Rj)
            Kq[np.ix_(qs, Rj)] = block
    return Kq


def hck_system(X_tree, depth, landmarks, kern, lam, lam_p=0.0):
    """KRR system matrix of hck.md 2.5: A = K_hier' + (lam - lam_p) I (leaf diagonal blocks are
    then K + lam I)."""
    A = khier_matrix(X_tree, depth, landmarks, kern, lam_p)
    A[np.diag_indices_from(A)] += float(lam) - float(lam_p)
    return A


# --------------------------------------------------------------------------------------------
# dense linear algebra on the system
# --------------------------------------------------------------------------------------------
def dense_logdet(A):
    """log det A for symmetric positive-definite A (Cholesky); ValueError if A is not SPD."""
    A = np.asarray(A, dtype=float)
    try:
        L = scipy.linalg.cholesky(A, lower=True)
    except np.linalg.LinAlgError as exc:
        raise ValueError("dense_logdet: matrix is not positive definite") from exc
    return 2.0 * float(np.sum(np.log(np.diag(L))))


def dense_lml(A, y):
    """GP log marginal likelihood -1/2 y^T A^{-1} y - 1/2 log det A - n/2 log(2 pi); for y with
    k columns, the sum over columns."""
    A = np.asarray(A, dtype=float)
    y = np.asarray(y, dtype=float)
    Y = y[:, None] if y.ndim == 1 else y
    n, k = Y.shape
    if A.shape != (n, n):
        raise ValueError("A must be n x n with n = len(y)")
    cf = scipy.linalg.cho_factor(A, lower=True)
    alpha = scipy.linalg.cho_solve(cf, Y)
    logdet = 2.0 * float(np.sum(np.log(np.diag(cf[0]))))
    return float(-0.5 * np.sum(Y * alpha) - 0.5 * k * logdet - 0.5 * k * n * np.log(2.0 * np.pi))


def dense_krr_predict(X_tree, depth, landmarks, kern, lam, lam_p, y, Xq, leaf_of_q):
    """KRR prediction k_hier(Xq, X) A^{-1} y with A = hck_system(...); y in tree order
    (n or n x k), result m or m x k."""
    A = hck_system(X_tree, depth, landmarks, kern, lam, lam_p)
    w = scipy.linalg.solve(A, np.asarray(y, dtype=float), assume_a="pos")
    return khier_cross(X_tree, depth, landmarks, kern, lam_p, Xq, leaf_of_q) @ w

"""A second, slow statement of the HCK mathematics (doc/specs/hck.md), used only to check
the oracle.

tests/oracles.py states K_hier from its pointwise psi-recursion.  This module follows the spec's
other route line by line - the factors and Algorithms 1-3 - so that the two statements can be
compared (tests/test_oracles_hck.py).  It is not a design to copy: one Python object per node,
recursion, a Python loop per test point.

* build_tree / construct: random-projection binary tree, landmarks, factors Sigma, U, W, A with
  the jitter lam_p applied by training-index identity (hck.md section 2.5);
* khier_point: the pointwise recursive definition of the kernel (hck.md section 1), per pair;
* dense: the matrix assembled from the factors;
* matvec (Algorithm 1), invert (Algorithm 2), predict_pre + predict (Algorithm 3, with the
  sibling accumulation corrected).

The base kernel is the Gaussian of the oracle module; ``rng`` (module level) draws the split
directions and landmarks, and a test sets it before building a tree.
"""
import numpy as np
from oracles import dense_kernel

rng = np.random.default_rng(0)


class Node:
    def __init__(self, idx, parent=None):
        self.idx = idx
        self.parent = parent
        self.children = []
        self.lm = None
        self.dir = None     # binary split: direction and threshold
        self.thr = None

    @property
    def leaf(self):
        return not self.children


def build_tree(X, idx, n0, r, parent=None):
    """Split by a random projection at the median until nodes hold at most n0 points."""
    node = Node(idx, parent)
    if len(idx) <= n0:
        return node
    node.lm = rng.choice(idx, size=r, replace=False)   # landmarks of a non-leaf
    v = rng.standard_normal(X.shape[1])
    p = X[idx] @ v
    order = np.argsort(p, kind="stable")
    m = len(idx) // 2
    ps = p[order]
    node.dir = v
    node.thr = 0.5 * (ps[m - 1] + ps[m])
    parts = [idx[order[:m]], idx[order[m:]]]
    node.children = [build_tree(X, part, n0, r, node) for part in parts]
    return node


def nodes_pre(node):
    yield node
    for c in node.children:
        yield from nodes_pre(c)


def kfun(X, lam_p, sigma):
    """Base kernel with jitter by INDEX identity: k'(i, j) = k + lam_p [i == j]."""
    def K(I, J):
        M = dense_kernel(X[I], X[J], sigma=sigma)
        return M + lam_p * (np.asarray(I)[:, None] == np.asarray(J)[None, :])
    return K


def construct(X, root, sigma, lam, lam_p):
    K = kfun(X, lam_p, sigma)
    for nd in nodes_pre(root):
        if not nd.leaf:
            nd.Sigma = K(nd.lm, nd.lm)
            nd.L = np.linalg.cholesky(nd.Sigma)
        p = nd.parent
        if nd.leaf:
            nd.A = K(nd.idx, nd.idx) + (lam - lam_p) * np.eye(len(nd.idx))
            if p is not None:
                nd.U = np.linalg.solve(p.Sigma, K(p.lm, nd.idx)).T   # K(Xi, lm_p) Sigma_p^{-1}
        elif p is not None:
            nd.W = np.linalg.solve(p.Sigma, K(p.lm, nd.lm)).T        # K(lm_i, lm_p) Sigma_p^{-1}


def dense(root, n):
    """Assemble A from the factors."""
    A = np.zeros((n, n))

    def Ufull(nd):          # (row indices, |X_i| x r basis)
        if nd.leaf:
            return nd.idx, nd.U
        parts = [Ufull(c) for c in nd.children]
        return (np.concatenate([p[0] for p in parts]),
                np.vstack([p[1] for p in parts]) @ nd.W)

    for nd in nodes_pre(root):
        if nd.leaf:
            A[np.ix_(nd.idx, nd.idx)] += nd.A
        else:
            Us = [Ufull(c) for c in nd.children]
            for a, ca in enumerate(Us):
                for b, cb in enumerate(Us):
                    if a != b:
                        A[np.ix_(ca[0], cb[0])] += ca[1] @ nd.Sigma @ cb[1].T
    return A


def khier_point(X, root, sigma, lam_p, i, j):
    """Pointwise definition (13)-(14) for training indices i, j (jitter by index)."""
    K = kfun(X, lam_p, sigma)

    def leaf_of(node, t):
        while not node.leaf:
            node = [c for c in node.children if t in set(c.idx)][0]
        return node

    li, lj = leaf_of(root, i), leaf_of(root, j)
    if li is lj:
        return K([i], [j])[0, 0]
    anc_i = []
    q = li
    while q is not None:
        anc_i.append(q)
        q = q.parent
    q = lj
    while q not in anc_i:
        q = q.parent
    lca = q

    def psi(leaf, t):
        node = leaf.parent
        v = K([t], node.lm)
        while node is not lca:
            v = v @ np.linalg.solve(node.Sigma, K(node.lm, node.parent.lm))
            node = node.parent
        return v

    return (psi(li, i) @ np.linalg.solve(lca.Sigma, psi(lj, j).T))[0, 0]


# ---------------- Algorithm 1 -----------------
def matvec(root, b, tilde=False):
    def g(nd, a):
        return getattr(nd, a + "t") if tilde else getattr(nd, a)

    y = np.zeros_like(b)
    c, d = {}, {}
    for nd in nodes_pre(root):
        if nd is not root:
            c[id(nd)] = 0.0
            d[id(nd)] = 0.0

    def up(nd):
        if nd.leaf:
            if nd is not root:
                c[id(nd)] = g(nd, "U").T @ b[nd.idx]
            y[nd.idx] = g(nd, "A") @ b[nd.idx]
        else:
            for ch in nd.children:
                up(ch)
                if nd is not root:
                    c[id(nd)] = c[id(nd)] + g(nd, "W").T @ c[id(ch)]
        if nd is not root:
            p = nd.parent
            for sib in p.children:
                if sib is not nd:
                    d[id(sib)] = d[id(sib)] + g(p, "Sigma") @ c[id(nd)]

    def down(nd):
        if nd.leaf:
            if nd is not root:
                y[nd.idx] += g(nd, "U") @ d[id(nd)]
            return
        for ch in nd.children:
            if nd is not root:
                d[id(ch)] = d[id(ch)] + g(nd, "W") @ d[id(nd)]
            down(ch)

    up(root)
    down(root)
    return y


# ---------------- Algorithm 2 -----------------
def invert(root):
    def up(i):
        p = i.parent
        if i.leaf:
            B = i.A - (i.U @ p.Sigma @ i.U.T if p is not None else 0)
            i.At = np.linalg.inv(B)
            if p is not None:
                i.Ut = i.At @ i.U
                i.Theta = i.U.T @ i.Ut
            return
        for j in i.children:
            up(j)
            if not j.leaf:
                j.Wt = (np.eye(len(j.lm)) + j.Sigmat @ j.Xi) @ j.W
                j.Theta = j.W.T @ j.Xi @ j.Wt
        i.Xi = sum(j.Theta for j in i.children)
        i.Lam = i.Sigma - i.W @ p.Sigma @ i.W.T if p is not None else i.Sigma
        i.Sigmat = -np.linalg.solve(np.eye(len(i.lm)) + i.Lam @ i.Xi, i.Lam)
        for j in i.children:
            if not j.leaf:
                j.E = j.Wt @ i.Sigmat @ j.Wt.T
        if p is None:
            i.E = np.zeros_like(i.Sigma)

    def down(i):
        p = i.parent
        if i.leaf:
            if p is not None:
                i.At = i.At + i.Ut @ p.Sigmat @ i.Ut.T
        else:
            if p is not None:
                i.E = i.E + i.Wt @ p.E @ i.Wt.T
            i.Sigmat = i.Sigmat + i.E
            for j in i.children:
                down(j)

    up(root)
    down(root)


# ---------------- Algorithm 3 -----------------
def route(root, X, x):
    nd = root
    while not nd.leaf:
        nd = nd.children[0] if x @ nd.dir <= nd.thr else nd.children[1]
    return nd


def predict_pre(root, w):
    """Common-Upward with ACCUMULATING c (correct for more than two children)."""
    for nd in nodes_pre(root):
        nd.c3 = 0.0
        nd.e3 = 0.0

    def up(i):
        if i.leaf:
            if i is not root:
                i.e3 = i.U.T @ w[i.idx]
        else:
            for j in i.children:
                up(j)
                if i is not root:
                    i.e3 = i.e3 + i.W.T @ j.e3
        if i is not root:
            for sib in i.parent.children:
                if sib is not i:
                    sib.c3 = sib.c3 + i.parent.Sigma.T @ i.e3

    up(root)


def predict(root, X, w, x, sigma):
    leaf = route(root, X, x)
    z = w[leaf.idx] @ dense_kernel(X[leaf.idx], x[None], sigma=sigma)[:, 0]
    if leaf is root:
        return z
    p = leaf.parent
    # K'(lm, lm)^{-1} k(lm, x)
    dvec = np.linalg.solve(p.Sigma, dense_kernel(X[p.lm], x[None], sigma=sigma)[:, 0])
    z += leaf.c3 @ dvec
    nd = p
    while nd is not root:
        dvec = nd.W.T @ dvec
        z += nd.c3 @ dvec
        nd = nd.parent
    return z

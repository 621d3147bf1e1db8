"""The HCK oracle (tests/oracles.py) against a second statement of the mathematics.

Cross-checks against the factor form and Algorithms 1-3 of tests/hck_factor_form.py, plus
properties from hck.md section 1 (Thm 6, Prop 1, Prop 5) that need no second statement.
"""
import hck_factor_form as ff
import numpy as np
import pytest
import scipy.stats
from oracles import (
    dense_kernel,
    dense_krr_predict,
    dense_lml,
    dense_logdet,
    hck_system,
    khier_cross,
    khier_matrix,
    lca_below,
    leaf_of_positions,
    node_ranges,
    rel_max,
)

SIGMA = 0.8
LAM = 1e-2


def kern(A, B):
    """The base kernel handed to the oracle: the same Gaussian as hck_factor_form's."""
    return dense_kernel(A, B, sigma=SIGMA)


def kprime(X_tree, lam_p):
    """Dense k'(x_a, x_b) = k + lam_p [a == b] over all training positions."""
    return kern(X_tree, X_tree) + lam_p * np.eye(len(X_tree))


# --------------------------------------------------------------------------------------------
# the factor-form statement, its tree converted to the heap convention
# --------------------------------------------------------------------------------------------
def build_reference_case(n, depth, r, seed, lam_p, d=3):
    """Factor-form binary tree (random projection), its factors built with lam = LAM and
    lam_p, converted to the heap convention.

    Returns X (original order), root, perm (tree position -> original index), pos (original
    index -> tree position), landmarks (heap id -> positions), heap_of (id(Node) -> heap id).
    """
    X = np.random.default_rng(seed).uniform(-1, 1, size=(n, d))
    ff.rng = np.random.default_rng(seed + 1000)
    n0 = -(-n // 2**depth)      # ceil(n / 2^J): level-J nodes stop, level J-1 nodes split
    root = ff.build_tree(X, np.arange(n), n0, r)

    heap_of, leaf_blocks = {}, []

    def walk(node, h, level):
        heap_of[id(node)] = h
        if node.leaf:
            assert level == depth, "reference tree is not complete at the requested depth"
            leaf_blocks.append(node.idx)
        else:
            assert level < depth and len(node.children) == 2
            walk(node.children[0], 2 * h + 1, level + 1)   # first child = left = floor(m/2)
            walk(node.children[1], 2 * h + 2, level + 1)

    walk(root, 0, 0)
    perm = np.concatenate(leaf_blocks)
    pos = np.empty(n, dtype=int)
    pos[perm] = np.arange(n)

    ranges = node_ranges(n, depth)
    landmarks = [None] * (2 ** (depth + 1) - 1)
    for node in ff.nodes_pre(root):
        h = heap_of[id(node)]
        start, count = ranges[h]
        # every reference node must own exactly the heap node's contiguous range
        assert np.array_equal(np.sort(pos[node.idx]), np.arange(start, start + count))
        if not node.leaf:
            landmarks[h] = pos[node.lm]
    ff.construct(X, root, SIGMA, LAM, lam_p)
    return X, root, perm, pos, landmarks, heap_of


CASES = [(60, 1, 8, 1), (90, 2, 8, 2), (120, 3, 8, 3)]   # (n, depth, r, seed)


# --------------------------------------------------------------------------------------------
# node_ranges
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,depth", [(1, 0), (7, 0), (10, 1), (11, 2), (100, 3), (37, 4)])
def test_node_ranges(n, depth):
    R = node_ranges(n, depth)
    assert len(R) == 2 ** (depth + 1) - 1
    assert R[0] == (0, n)
    for i in range(2**depth - 1):
        (s, m), (sl, ml), (sr, mr) = R[i], R[2 * i + 1], R[2 * i + 2]
        assert (sl, ml) == (s, m // 2)
        assert (sr, mr) == (s + m // 2, m - m // 2)
    leaves = R[2**depth - 1:]
    assert [s for s, _ in leaves] == list(np.cumsum([0] + [c for _, c in leaves[:-1]]))
    assert sum(c for _, c in leaves) == n
    # leaf_of_positions: position p lies in the range of leaf number leaf_of_positions[p]
    owner = leaf_of_positions(n, depth)
    assert owner.shape == (n,)
    for leaf, (s, c) in enumerate(leaves):
        assert np.all(owner[s:s + c] == leaf)


# --------------------------------------------------------------------------------------------
# against the factor form
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lam_p", [0.0, 1e-3])
@pytest.mark.parametrize("n,depth,r,seed", CASES)
def test_khier_matrix_equals_khier_point(n, depth, r, seed, lam_p):
    X, root, perm, pos, lms, _ = build_reference_case(n, depth, r, seed, lam_p)
    R = np.array([[ff.khier_point(X, root, SIGMA, lam_p, i, j) for j in range(n)]
                  for i in range(n)])
    K = khier_matrix(X[perm], depth, lms, kern, lam_p)
    assert rel_max(K[np.ix_(pos, pos)], R) < 1e-12


@pytest.mark.parametrize("lam_p", [0.0, 1e-3])
@pytest.mark.parametrize("n,depth,r,seed", CASES)
def test_hck_system_equals_factor_dense(n, depth, r, seed, lam_p):
    X, root, perm, pos, lms, _ = build_reference_case(n, depth, r, seed, lam_p)
    A_ref = ff.dense(root, n)                         # assembled from U, W, Sigma, A_ii
    A = hck_system(X[perm], depth, lms, kern, LAM, lam_p)
    assert rel_max(A[np.ix_(pos, pos)], A_ref) < 1e-12
    # leaf diagonal blocks are K + lam I
    for s, c in node_ranges(n, depth)[2**depth - 1:]:
        blk = slice(s, s + c)
        assert rel_max(A[blk, blk], kern(X[perm][blk], X[perm][blk]) + LAM * np.eye(c)) < 1e-14


@pytest.mark.parametrize("lam_p", [0.0, 1e-3])
@pytest.mark.parametrize("n,depth,r,seed", CASES)
def test_krr_predict_equals_algorithm3(n, depth, r, seed, lam_p):
    X, root, perm, pos, lms, heap_of = build_reference_case(n, depth, r, seed, lam_p)
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2]
    ff.invert(root)                                   # Algorithm 2
    w = ff.matvec(root, y, tilde=True)                # w = A^{-1} y via Algorithm 1
    ff.predict_pre(root, w)
    Xq = np.random.default_rng(seed + 7).uniform(-1, 1, size=(12, 3))
    pred_ref = np.array([ff.predict(root, X, w, x, SIGMA) for x in Xq])   # Algorithm 3
    leaf_of_q = [heap_of[id(ff.route(root, X, x))] - (2**depth - 1) for x in Xq]
    pred = dense_krr_predict(X[perm], depth, lms, kern, LAM, lam_p, y[perm], Xq, leaf_of_q)
    assert rel_max(pred, pred_ref) < 1e-10
    # several right-hand sides at once = column by column
    Y = np.column_stack([y, 2 - y])
    P2 = dense_krr_predict(X[perm], depth, lms, kern, LAM, lam_p, Y[perm], Xq, leaf_of_q)
    assert P2.shape == (12, 2)
    assert rel_max(P2[:, 0], pred) < 1e-12
    assert rel_max(P2[:, 1], 2 * dense_krr_predict(X[perm], depth, lms, kern, LAM, lam_p,
                                                   np.ones(n), Xq, leaf_of_q) - pred) < 1e-10


# --------------------------------------------------------------------------------------------
# properties (no reference needed): trees built directly in the heap convention
# --------------------------------------------------------------------------------------------
def heap_case(n, depth, r, seed, d=3):
    rng = np.random.default_rng(seed)
    X_tree = rng.uniform(-1, 1, size=(n, d))
    R = node_ranges(n, depth)
    lms = [None] * len(R)
    for i in range(2**depth - 1):
        s, c = R[i]
        lms[i] = s + rng.choice(c, size=min(r, c), replace=False)
    return X_tree, R, lms


def test_depth0_is_base_kernel():
    X_tree, _, _ = heap_case(20, 0, 0, 5)
    assert rel_max(khier_matrix(X_tree, 0, [], kern, 1e-3), kprime(X_tree, 1e-3)) < 1e-15
    Xq = np.random.default_rng(1).uniform(-1, 1, size=(4, 3))
    assert rel_max(khier_cross(X_tree, 0, [None], kern, 1e-3, Xq, [0] * 4),
                  kern(Xq, X_tree)) < 1e-15


def test_thm6_symmetric_positive_definite():
    X_tree, _, lms = heap_case(96, 3, 6, 11)
    K = khier_matrix(X_tree, 3, lms, kern, 0.0)
    assert np.array_equal(K, K.T) or rel_max(K, K.T) < 1e-14
    assert np.linalg.eigvalsh(0.5 * (K + K.T)).min() > 0


@pytest.mark.parametrize("lam_p", [0.0, 1e-3])
def test_prop1_depth1(lam_p):
    n = 50
    X_tree, R, lms = heap_case(n, 1, 7, 21)
    K = khier_matrix(X_tree, 1, lms, kern, lam_p)
    Kp = kprime(X_tree, lam_p)
    L = lms[0]
    # either point a root landmark: k_comp = k'
    assert rel_max(K[L, :], Kp[L, :]) < 1e-12
    assert rel_max(K[:, L], Kp[:, L]) < 1e-12
    # same part: k_comp = k'
    for s, c in R[1:]:
        blk = slice(s, s + c)
        assert rel_max(K[blk, blk], Kp[blk, blk]) < 1e-14
    # elsewhere across parts it is the Nystrom kernel, not k itself
    (s1, c1), (s2, c2) = R[1], R[2]
    a = np.setdiff1d(np.arange(s1, s1 + c1), L)
    b = np.setdiff1d(np.arange(s2, s2 + c2), L)
    C = kern(X_tree[L], X_tree[L]) + lam_p * np.eye(len(L))
    nys = kern(X_tree[a], X_tree[L]) @ np.linalg.solve(C, kern(X_tree[L], X_tree[b]))
    assert rel_max(K[np.ix_(a, b)], nys) < 1e-12
    assert np.abs(K[np.ix_(a, b)] - Kp[np.ix_(a, b)]).max() > 1e-6
    # new points: k_comp(x, landmark) = k(x, landmark) (no jitter), same part = k
    Xq = np.random.default_rng(3).uniform(-1, 1, size=(6, 3))
    leaf_q = [0, 1, 0, 1, 1, 0]
    Kq = khier_cross(X_tree, 1, lms, kern, lam_p, Xq, leaf_q)
    assert rel_max(Kq[:, L], kern(Xq, X_tree[L])) < 1e-12
    for q, l in enumerate(leaf_q):
        s, c = R[1 + l]
        assert rel_max(Kq[q, s:s + c], kern(Xq[q:q + 1], X_tree[s:s + c])[0]) < 1e-14


def _prop5_pairs(depth, lms, n):
    """All (i, j) in different leaves meeting Prop 5's conditions."""
    leaf_no = leaf_of_positions(n, depth)
    sets = {h: set(map(int, L)) for h, L in enumerate(lms) if L is not None}
    pairs = []
    for i in range(n):
        for j in range(n):
            li, lj = leaf_no[i] + 2**depth - 1, leaf_no[j] + 2**depth - 1
            if li == lj:
                continue
            a, path_i, path_j = lca_below(li, lj)
            if (all(i in sets[q] for q in path_i[:-1]) and all(j in sets[q] for q in path_j[:-1])
                    and (i in sets[a] or j in sets[a])):
                pairs.append((i, j))
    return pairs


@pytest.mark.parametrize("lam_p", [0.0, 1e-3])
@pytest.mark.parametrize("depth", [2, 3])
def test_prop5(depth, lam_p):
    n = 24 * 2**depth
    X_tree, R, lms = heap_case(n, depth, 6, 31 + depth)
    rng = np.random.default_rng(99)
    # Make the conditions occur: each non-leaf node shares a few landmarks with its parent, so
    # chains leaf-parent -> ... -> LCA of common positions exist.
    for i in range(2**depth - 2, 0, -1):
        p = (i - 1) // 2
        shared = rng.choice(lms[i], size=3, replace=False)
        rest = np.setdiff1d(lms[p], shared)
        keep = rng.choice(rest, size=len(lms[p]) - 3, replace=False)
        lms[p] = np.concatenate([keep, shared])
        assert np.unique(lms[p]).size == len(lms[p])
    K = khier_matrix(X_tree, depth, lms, kern, lam_p)
    Kp = kprime(X_tree, lam_p)
    pairs = _prop5_pairs(depth, lms, n)
    assert len(pairs) >= 20
    I, J = np.array(pairs).T
    assert np.abs(K[I, J] - Kp[I, J]).max() / np.abs(Kp).max() < 1e-11
    # with an LCA strictly below the root as well as at the root
    leaf_no = leaf_of_positions(n, depth)
    lcas = {lca_below(leaf_no[i] + 2**depth - 1, leaf_no[j] + 2**depth - 1)[0]
            for i, j in pairs}
    assert 0 in lcas and len(lcas) > 1


def test_cross_at_training_points_equals_matrix_rows():
    # lam_p = 0: a new point equal to a training point gives that point's row of K_hier
    n, depth = 80, 3
    X_tree, _, lms = heap_case(n, depth, 5, 41)
    K = khier_matrix(X_tree, depth, lms, kern, 0.0)
    idx = np.random.default_rng(2).choice(n, size=15, replace=False)
    Kq = khier_cross(X_tree, depth, lms, kern, 0.0, X_tree[idx],
                        leaf_of_positions(n, depth)[idx])
    assert rel_max(Kq, K[idx]) < 1e-12


def test_logdet_and_lml():
    n, depth, lam, lam_p = 64, 2, 1e-2, 1e-4
    X_tree, _, lms = heap_case(n, depth, 6, 51)
    A = hck_system(X_tree, depth, lms, kern, lam, lam_p)
    sign, ld = np.linalg.slogdet(A)
    assert sign > 0 and abs(dense_logdet(A) - ld) < 1e-10 * abs(ld)
    y = np.cos(2 * X_tree[:, 0])
    lml = scipy.stats.multivariate_normal(mean=np.zeros(n), cov=A).logpdf(y)
    assert abs(dense_lml(A, y) - lml) < 1e-9 * abs(lml)
    Y = np.column_stack([y, X_tree[:, 1]])
    assert abs(dense_lml(A, Y) - dense_lml(A, Y[:, 0]) - dense_lml(A, Y[:, 1])) < 1e-9
    with pytest.raises(ValueError):
        dense_logdet(-np.eye(3))

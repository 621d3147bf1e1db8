"""Tests of the HCK partition tree (hkern.hierarchical._tree): node ranges, build, landmarks,
routing.

References are pure NumPy (node ranges and leaves: tests/oracles.py).  Projections are
recomputed with ``seq_project``, which sums v[k] * x[k] in index order exactly like the compiled
``project`` (NumPy's elementwise ops do not contract to FMA), so threshold and routing checks are
exact, ties included.
"""
import itertools
from math import comb

import numpy as np
import pytest
from cython_probe import build_probe, drop_probe
from numpy.testing import assert_allclose
from oracles import leaf_of_positions, node_ranges
from scipy import stats

from hkern.hierarchical import _tree

RANDOM, PCA = _tree.PARTITIONS["random"], _tree.PARTITIONS["pca"]


# ----------------------------------------------------------------------------------------------
# References.
# ----------------------------------------------------------------------------------------------

def seq_project(X, v):
    """v . x for every row x of X, summed in index order (bitwise equal to the compiled one)."""
    X = np.atleast_2d(X)
    acc = np.zeros(X.shape[0])
    for k in range(X.shape[1]):
        acc = acc + v[k] * X[:, k]
    return acc


def ref_route(Xq, directions, thresholds, depth):
    node = np.zeros(len(Xq), dtype=np.int64)
    for _ in range(depth):
        V = directions[node]
        p = np.zeros(len(Xq))
        for k in range(Xq.shape[1]):
            p = p + V[:, k] * Xq[:, k]
        node = np.where(p <= thresholds[node], 2 * node + 1, 2 * node + 2)
    return node - (2 ** depth - 1)


def ref_power_iteration(Y, s, iters):
    """Power iteration on the scatter matrix of the centred rows of Y, from s (normalised)."""
    Yc = Y - Y.mean(axis=0)
    v = s / np.linalg.norm(s)
    for _ in range(iters):
        w = Yc.T @ (Yc @ v)
        nrm = np.linalg.norm(w)
        if not nrm > 0:
            break
        v = w / nrm
    return v


def make_tree(X, depth, partition, pca_iters=0, n_threads=1, seed=0):
    rng = np.random.default_rng(seed)
    S = rng.standard_normal((2 ** depth - 1, X.shape[1]))
    return S, _tree.build_tree(X, depth, S, partition, pca_iters, n_threads)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check_tree(X, depth, perm, directions, thresholds):
    """Invariants that hold for any data: permutation, leaf sizes, separating thresholds."""
    n, d = X.shape
    n_nonleaf = 2 ** depth - 1
    assert perm.dtype == np.int64 and perm.shape == (n,)
    assert np.array_equal(np.sort(perm), np.arange(n))
    assert directions.shape == (n_nonleaf, d) and thresholds.shape == (n_nonleaf,)
    start, count = _tree.node_ranges(n, depth)
    leaf_counts = count[n_nonleaf:]
    assert set(np.unique(leaf_counts)) <= {n // 2 ** depth, -(-n // 2 ** depth)}
    Xt = X[perm]
    for i in range(n_nonleaf):
        s, m, h = start[i], count[i], count[i] // 2
        p = seq_project(Xt[s:s + m], directions[i])
        left, right = p[:h], p[h:]
        assert np.all(left <= thresholds[i]), i
        assert np.all(thresholds[i] <= right), i
        if h == 0:
            assert thresholds[i] == -np.inf


# ----------------------------------------------------------------------------------------------
# node_ranges.
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, depth", [(16, 4), (1000, 5), (37, 3), (5, 4), (1, 2), (0, 2),
                                      (12345, 0), (12345, 7)])
def test_node_ranges(n, depth):
    start, count = _tree.node_ranges(n, depth)
    ref_start, ref_count = np.array(node_ranges(n, depth)).T      # the oracle's definition
    assert start.dtype == count.dtype == np.int64
    assert np.array_equal(start, ref_start) and np.array_equal(count, ref_count)
    for t in range(depth + 1):
        lv = slice(2 ** t - 1, 2 ** (t + 1) - 1)
        # Every level covers [0, n) with contiguous ranges in order.
        assert count[lv].sum() == n
        assert start[lv][0] == 0
        assert np.array_equal(start[lv][1:], (start[lv] + count[lv])[:-1])
        assert set(np.unique(count[lv])) <= {n // 2 ** t, -(-n // 2 ** t)}
    for i in range(2 ** depth - 1):
        assert count[2 * i + 1] == count[i] // 2
        assert count[2 * i + 2] == count[i] - count[i] // 2
        assert start[2 * i + 1] == start[i]
        assert start[2 * i + 2] == start[i] + count[i] // 2


def test_node_ranges_depth0():
    start, count = _tree.node_ranges(7, 0)
    assert start.tolist() == [0] and count.tolist() == [7]


# ----------------------------------------------------------------------------------------------
# build_tree.
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("partition, pca_iters", [(RANDOM, 0), (PCA, 3), (PCA, 20)])
@pytest.mark.parametrize("n, d, depth", [(1000, 3, 4), (777, 6, 5), (300, 40, 3), (40, 2, 5)])
def test_build_tree_invariants_and_routing(partition, pca_iters, n, d, depth):
    rng = np.random.default_rng(n + d + depth)
    X = rng.standard_normal((n, d)) * rng.uniform(0.5, 3.0, size=d)
    S, (perm, directions, thresholds) = make_tree(X, depth, partition, pca_iters)
    check_tree(X, depth, perm, directions, thresholds)
    if partition == RANDOM:
        assert same_bits(directions, S)
    # Continuous data, no ties: every training point routes to the leaf holding its position.
    leaves = _tree.route(X[perm], directions, thresholds, depth, 1)
    assert np.array_equal(leaves, leaf_of_positions(n, depth))
    # Thread count does not change a bit.
    perm2, directions2, thresholds2 = _tree.build_tree(X, depth, S, partition, pca_iters, 2)
    assert same_bits(perm, perm2)
    assert same_bits(directions, directions2)
    assert same_bits(thresholds, thresholds2)


def test_build_tree_depth0():
    X = np.random.default_rng(1).standard_normal((10, 3))
    perm, directions, thresholds = _tree.build_tree(X, 0, np.empty((0, 3)), RANDOM, 0, 2)
    assert np.array_equal(perm, np.arange(10))
    assert directions.shape == (0, 3) and thresholds.shape == (0,)
    assert np.array_equal(_tree.route(X, directions, thresholds, 0, 2), np.zeros(10))


def test_build_tree_more_leaves_than_points():
    """2^J > n leaves some leaves empty; an empty left child gets threshold -inf."""
    X = np.random.default_rng(2).standard_normal((5, 2))
    S, (perm, directions, thresholds) = make_tree(X, 3, RANDOM)
    check_tree(X, 3, perm, directions, thresholds)
    leaves = _tree.route(X[perm], directions, thresholds, 3, 1)
    assert np.array_equal(leaves, leaf_of_positions(5, 3))


@pytest.mark.parametrize("d, iters", [(5, 3), (5, 12), (30, 4)])
def test_pca_directions_match_power_iteration(d, iters):
    """Every node's direction is power iteration on its own centred points (both code paths:
    the d x d scatter matrix and the matrix-free one)."""
    rng = np.random.default_rng(d * 100 + iters)
    X = rng.standard_normal((600, d)) * np.linspace(3.0, 0.5, d)
    depth = 3
    S, (perm, directions, thresholds) = make_tree(X, depth, PCA, iters)
    start, count = _tree.node_ranges(len(X), depth)
    Xt = X[perm]
    for i in range(2 ** depth - 1):
        ref = ref_power_iteration(Xt[start[i]:start[i] + count[i]], S[i], iters)
        assert_allclose(directions[i], ref, rtol=0, atol=1e-10, err_msg=str(i))
    assert _tree.pca_uses_scatter_matrix(5, 3) and not _tree.pca_uses_scatter_matrix(30, 4)


def test_pca_root_is_top_singular_vector():
    rng = np.random.default_rng(3)
    d = 6
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    X = (rng.standard_normal((3000, d)) * [6.0, 2.0, 1.0, 0.7, 0.5, 0.2]) @ Q.T + 10.0
    S, (perm, directions, thresholds) = make_tree(X, 2, PCA, 50)
    v = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)[2][0]
    root = directions[0]
    assert abs(np.linalg.norm(root) - 1.0) < 1e-14
    assert min(np.linalg.norm(root - v), np.linalg.norm(root + v)) < 1e-6
    check_tree(X, 2, perm, directions, thresholds)


@pytest.mark.parametrize("partition, pca_iters", [(RANDOM, 0), (PCA, 5), (PCA, 1)])
def test_build_tree_ties(partition, pca_iters):
    """Repeated rows, a constant column and identical points: no crash, invariants hold, and
    routing agrees with the leaf of the position except where a projection ties its threshold."""
    rng = np.random.default_rng(4)
    base = rng.standard_normal((23, 4))
    base[:, 2] = 1.5
    X = np.ascontiguousarray(base[rng.integers(0, 23, size=500)])
    depth = 5
    S, (perm, directions, thresholds) = make_tree(X, depth, partition, pca_iters)
    check_tree(X, depth, perm, directions, thresholds)
    leaves = _tree.route(X[perm], directions, thresholds, depth, 2)
    assert np.array_equal(leaves, ref_route(X[perm], directions, thresholds, depth))
    # A training point may leave its leaf only through a tie at some threshold on its path.
    expected = leaf_of_positions(len(X), depth)
    for k in np.flatnonzero(leaves != expected):
        node = expected[k] + 2 ** depth - 1
        ties = []
        while node:
            parent = (node - 1) // 2
            ties.append(seq_project(X[perm[k]], directions[parent])[0] == thresholds[parent])
            node = parent
        assert any(ties)
    same = _tree.build_tree(X, depth, S, partition, pca_iters, 2)
    assert all(same_bits(a, b) for a, b in zip((perm, directions, thresholds), same))

    # All points identical: every projection ties; PCA keeps the normalised start vector.
    X1 = np.tile(rng.standard_normal(4), (64, 1))
    S1, (perm1, directions1, thresholds1) = make_tree(X1, 3, partition, pca_iters)
    check_tree(X1, 3, perm1, directions1, thresholds1)
    if partition == PCA:
        assert_allclose(directions1, S1 / np.linalg.norm(S1, axis=1, keepdims=True),
                        rtol=0, atol=1e-15)


def ref_canonical_tree(X, depth, S):
    """The canonical tree from its definition, with NumPy: at each node, the floor(m/2) points
    first in the order of (projection, row) go left, both children keeping the node's order."""
    n_nonleaf = 2 ** depth - 1
    nodes = {0: np.arange(len(X))}
    for i in range(n_nonleaf):
        rows = nodes.pop(i)
        keys = seq_project(X[rows], S[i])
        order = np.lexsort((rows, keys))          # by key, ties by row
        left = np.zeros(len(rows), dtype=bool)
        left[order[: len(rows) // 2]] = True
        nodes[2 * i + 1], nodes[2 * i + 2] = rows[left], rows[~left]
    return np.concatenate([nodes[n_nonleaf + l] for l in range(2 ** depth)])


@pytest.mark.parametrize("repeats", [False, True])
def test_build_tree_order_is_canonical(repeats):
    """perm is the canonical tree order (a node's points split in ascending row order, ties of
    projections broken by the row; so every leaf lists its points by ascending row), whatever
    the selection does inside: the order an MPI build on sharded rows reproduces.  With
    repeated rows, ties are many."""
    rng = np.random.default_rng(8)
    X = rng.standard_normal((1500, 3))
    if repeats:
        X = np.ascontiguousarray(X[rng.integers(0, 40, size=1500)])
    depth = 6
    S, (perm, directions, thresholds) = make_tree(X, depth, RANDOM)
    assert np.array_equal(perm, ref_canonical_tree(X, depth, S))
    start, count = _tree.node_ranges(len(X), depth)
    for i in range(2 ** depth - 1, 2 ** (depth + 1) - 1):          # every leaf
        assert np.all(np.diff(perm[start[i]:start[i] + count[i]]) > 0)


def test_build_tree_sorted_and_reversed_inputs():
    """Adversarial orders for the selection (sorted, reversed, organ pipe) stay correct."""
    n, depth = 4099, 6
    x = np.arange(n, dtype=float)
    for col in (x, x[::-1], np.concatenate([x[: n // 2], x[n // 2:][::-1]]), x % 7):
        X = np.ascontiguousarray(col[:, None])
        S = np.ones((2 ** depth - 1, 1))
        perm, directions, thresholds = _tree.build_tree(X, depth, S, RANDOM, 0, 2)
        check_tree(X, depth, perm, directions, thresholds)


def test_build_tree_bad_shapes():
    X = np.zeros((10, 3))
    with pytest.raises(ValueError, match="start_vectors"):
        _tree.build_tree(X, 2, np.zeros((3, 2)), RANDOM, 0, 1)
    with pytest.raises(ValueError, match="partition"):
        _tree.build_tree(X, 2, np.zeros((3, 3)), 2, 0, 1)
    with pytest.raises(ValueError, match="at least one row"):
        _tree.build_tree(np.zeros((0, 3)), 0, np.zeros((0, 3)), RANDOM, 0, 1)


# ----------------------------------------------------------------------------------------------
# select_landmarks.
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, depth, r", [(1000, 4, 10), (100, 5, 10), (57, 3, 100), (64, 2, 0),
                                         (9, 4, 2)])
def test_select_landmarks(n, depth, r):
    rng = np.random.default_rng(n + r)
    start, count = _tree.node_ranges(n, depth)
    n_nonleaf = 2 ** depth - 1
    U = rng.random((n_nonleaf, r))
    offsets, lm = _tree.select_landmarks(start, count, depth, r, U, 1)
    assert offsets.dtype == lm.dtype == np.int64
    assert offsets.shape == (n_nonleaf + 1,) and offsets[0] == 0
    sizes = np.diff(offsets)
    assert np.array_equal(sizes, np.minimum(r, count[:n_nonleaf]))
    assert lm.shape == (offsets[-1],)
    for i in range(n_nonleaf):
        sel = lm[offsets[i]:offsets[i + 1]]
        assert np.all(np.diff(sel) > 0)                       # sorted and distinct
        assert np.all((sel >= start[i]) & (sel < start[i] + count[i]))
        if r >= count[i]:
            assert np.array_equal(sel, np.arange(start[i], start[i] + count[i]))
    offsets2, lm2 = _tree.select_landmarks(start, count, depth, r, U, 2)
    assert same_bits(offsets, offsets2) and same_bits(lm, lm2)


def test_select_landmarks_fisher_yates_steps():
    """The documented partial Fisher-Yates map from uniforms to positions, including u -> 1."""
    start = np.array([10], dtype=np.int64)
    count = np.array([5], dtype=np.int64)
    U = np.array([[0.0, 0.99, np.nextafter(1.0, 0.0)]])
    # pool [0 1 2 3 4]: t=0 j=0 -> 0; t=1 j=1+floor(.99*4)=4 -> 4 (pool [0 4 2 3 1]);
    # t=2 j=2+floor((1-eps)*3)=4 -> 1.
    offsets, lm = _tree.select_landmarks(start, count, 1, 3, U, 1)
    assert lm.tolist() == [10, 11, 14]


def _many_selections(c, r, n_calls, seed):
    """Selections of r of c positions from independent uniforms, 2^14 - 1 nodes per call (every
    node given the same range [3, 3 + c), the sampler's input needs not come from node_ranges)."""
    depth = 14
    n_nonleaf = 2 ** depth - 1
    start = np.full(n_nonleaf, 3, dtype=np.int64)
    count = np.full(n_nonleaf, c, dtype=np.int64)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_calls):
        offsets, lm = _tree.select_landmarks(start, count, depth, r, rng.random((n_nonleaf, r)), 2)
        out.append(lm.reshape(n_nonleaf, r) - 3)
    return np.concatenate(out)


def test_select_landmarks_position_frequencies_uniform():
    """Each of the c positions is chosen with probability p = r/c.  For N draws without
    replacement the counts O_j have covariance N p (1-p) c/(c-1) (I - 11^T/c), so
    sum_j (O_j - Np)^2 / (N p (1-p) c/(c-1)) is asymptotically chi-square with c - 1 degrees
    of freedom; we require it below the 1 - 1e-6 quantile."""
    c, r = 20, 5
    sel = _many_selections(c, r, 2, seed=5)
    N, p = len(sel), r / c
    O = np.bincount(sel.ravel(), minlength=c)
    stat = ((O - N * p) ** 2).sum() / (N * p * (1 - p) * c / (c - 1))
    assert stat < stats.chi2.ppf(1 - 1e-6, c - 1), stat
    assert stat > stats.chi2.ppf(1e-6, c - 1), stat            # not suspiciously regular


def test_select_landmarks_subsets_uniform():
    """All C(6, 3) = 20 subsets are equally likely: Pearson chi-square with 19 degrees of
    freedom below its 1 - 1e-6 quantile."""
    c, r = 6, 3
    sel = _many_selections(c, r, 2, seed=6)
    subsets = {s: k for k, s in enumerate(itertools.combinations(range(c), r))}
    codes = np.array([subsets[tuple(row)] for row in sel.tolist()])
    O = np.bincount(codes, minlength=comb(c, r))
    E = len(sel) / comb(c, r)
    stat = ((O - E) ** 2 / E).sum()
    assert stat < stats.chi2.ppf(1 - 1e-6, comb(c, r) - 1), stat


def test_select_landmarks_bad_shapes():
    start, count = _tree.node_ranges(100, 3)
    with pytest.raises(ValueError, match="uniforms"):
        _tree.select_landmarks(start, count, 3, 4, np.zeros((7, 3)), 1)


# ----------------------------------------------------------------------------------------------
# route.
# ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("partition", [RANDOM, PCA])
def test_route_matches_reference(partition):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((2000, 5))
    depth = 6
    S, (perm, directions, thresholds) = make_tree(X, depth, partition, 10)
    Q = rng.standard_normal((3000, 5)) * 1.5
    # Some training points, and queries far outside the data.
    Q[:3] = X[perm[[0, 1000, 1999]]]
    Q[3:6] *= 1e6
    leaves = _tree.route(Q, directions, thresholds, depth, 1)
    assert leaves.dtype == np.int64
    assert np.array_equal(leaves, ref_route(Q, directions, thresholds, depth))
    assert np.array_equal(leaves, _tree.route(Q, directions, thresholds, depth, 2))
    assert leaves.min() >= 0 and leaves.max() < 2 ** depth
    assert _tree.route(np.empty((0, 5)), directions, thresholds, depth, 2).shape == (0,)


def test_route_bad_shapes():
    with pytest.raises(ValueError, match="directions"):
        _tree.route(np.zeros((4, 3)), np.zeros((3, 2)), np.zeros(3), 2, 1)


# ----------------------------------------------------------------------------------------------
# The .pxd works for Cython code outside hkern.
# ----------------------------------------------------------------------------------------------

PROBE = "hkern_tree_cimport_probe"
PROBE_PYX = r'''
# cython: language_level=3
from hkern.hierarchical._tree cimport project, route_one, fill_node_ranges, PARTITION_PCA
from libc.stdint cimport int64_t


def proj(double[::1] x, double[::1] v):
    cdef double out
    with nogil:
        out = project(&x[0], &v[0], x.shape[0])
    return out


def leaf(double[::1] x, double[:, ::1] directions, double[::1] thresholds, int depth):
    cdef Py_ssize_t out
    with nogil:
        out = route_one(&x[0], &directions[0, 0], &thresholds[0], depth, x.shape[0])
    return out


def ranges(Py_ssize_t n, int depth, int64_t[::1] start, int64_t[::1] count):
    with nogil:
        fill_node_ranges(n, depth, &start[0], &count[0])


def pca_id():
    return PARTITION_PCA
'''


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    pytest.importorskip("Cython")
    pytest.importorskip("setuptools")
    module, _ = build_probe(tmp_path_factory.mktemp("tree_cimport"), PROBE, PROBE_PYX)
    yield module
    drop_probe(PROBE)


def test_cimport_tree(probe):
    rng = np.random.default_rng(8)
    X = rng.standard_normal((300, 4))
    depth = 4
    S, (perm, directions, thresholds) = make_tree(X, depth, RANDOM)
    v = directions[0]
    assert probe.proj(X[0].copy(), v.copy()) == seq_project(X[0], v)[0]
    leaves = _tree.route(X, directions, thresholds, depth, 1)
    assert [probe.leaf(x.copy(), directions, thresholds, depth) for x in X] == leaves.tolist()
    start = np.empty(2 ** (depth + 1) - 1, dtype=np.int64)
    count = np.empty_like(start)
    probe.ranges(300, depth, start, count)
    ref = _tree.node_ranges(300, depth)
    assert np.array_equal(start, ref[0]) and np.array_equal(count, ref[1])
    assert probe.pca_id() == PCA

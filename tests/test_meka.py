"""MEKA (hkern.meka, hkern.fit_meka) against dense references built from the definitions
(spec: doc/specs/meka.md, sections 2-4 and 7).

References (numpy, small n, tests/oracles.py): the dense kernel, the Nystrom basis
W^(s) = K(X_s, Z_s) U Lambda^{-1/2} from numpy.linalg.eigh, the exact block least squares
pinv(W^(s)) G^(s,t) pinv(W^(t))^T, and dense solves of (G~ + lam I) alpha = y.
"""
import numpy as np
import pytest
from oracles import dense_kernel, meka_link, nystrom_map, rel_max, rel_norm, zero_mean
from problems import blobs

import hkern
from hkern import _linalg
from hkern.meka import _build, _cluster, approximation

SIGMA = 1.0


def dense_from_parts(G):
    """P W L W^T P^T assembled from the stored blocks, with numpy only."""
    n, K = G.n_samples, G.L_.shape[0]
    W = np.zeros((n, K))
    for s in range(G.n_clusters_):
        rows = np.flatnonzero(G.labels_ == s)
        W[rows, G._k_starts[s]:G._k_starts[s + 1]] = G.basis(s)
    return W @ G.L_ @ W.T, W


def cluster_rows(G, s):
    return np.flatnonzero(G.labels_ == s)


def kslice(G, s):
    return slice(G._k_starts[s], G._k_starts[s + 1])


# ------------------------------------------------------------------ the shim's QR


@pytest.mark.parametrize("shape", [(7, 3), (100, 40), (5, 5), (3, 1), (600, 64), (700, 200),
                                   (129, 129), (300, 33)])
def test_linalg_qr_matches_definition(shape):
    """Blocks of 32 reflectors (dgelqf's and dorglq's loops, polled): one partial block, several
    with a partial last one, a square matrix."""
    A = np.random.default_rng(0).normal(size=shape)
    Q, R = _linalg.qr(A)
    n = shape[1]
    assert np.abs(Q @ R - A).max() <= 1e-13 * np.abs(A).max() * max(shape)
    assert np.abs(Q.T @ Q - np.eye(n)).max() <= 1e-13
    assert np.all(np.tril(R, -1) == 0.0)
    # Same factorisation as numpy up to the signs of R's diagonal.
    _, Rn = np.linalg.qr(A)
    assert np.allclose(np.abs(np.diag(R)), np.abs(np.diag(Rn)), rtol=1e-12)


def test_linalg_qr_rejects_wide():
    with pytest.raises(ValueError, match="rows >= columns"):
        _linalg.qr(np.ones((2, 3)))


# ------------------------------------------------------------------ structure vs definition


def test_dense_equals_W_L_Wt_and_bases_follow_definition():
    X = blobs()
    G = hkern.meka(X, r=12, n_clusters=4, sigma=SIGMA, seed=0)
    D = G.to_dense()
    ref, _ = dense_from_parts(G)
    assert rel_max(D, ref) <= 1e-12
    assert np.array_equal(D, D.T) or np.abs(D - D.T).max() <= 1e-14
    for s in range(G.n_clusters_):
        Z = G.landmarks(s)
        F = nystrom_map(dense_kernel(Z, sigma=SIGMA), G.ranks_[s])
        W_ref = dense_kernel(X[cluster_rows(G, s)], Z, sigma=SIGMA) @ F
        # eigenvectors are defined up to sign: compare column by column
        Ws = G.basis(s)
        signs = np.sign(np.sum(Ws * W_ref, axis=0))
        assert rel_max(Ws, W_ref * signs) <= 1e-10
        assert np.array_equal(G.L_[kslice(G, s), kslice(G, s)], np.eye(G.ranks_[s]))
        assert G.landmarks(s).shape[0] == min(2 * G.ranks_[s], G.sizes_[s])
    assert np.array_equal(G.L_, G.L_.T)


def test_links_with_all_entries_equal_exact_least_squares():
    X = blobs(n=300, d=2, centres=3)
    G = hkern.meka(X, r=6, n_clusters=3, sigma=SIGMA, seed=1, oversample=1e6)
    K = dense_kernel(X, X, sigma=SIGMA)
    for s in range(3):
        for t in range(s + 1, 3):
            Ws, Wt = G.basis(s), G.basis(t)
            ref = meka_link(Ws, K[np.ix_(cluster_rows(G, s), cluster_rows(G, t))], Wt)
            got = G.L_[kslice(G, s), kslice(G, t)]
            # condition numbers of the bases are ~5 here, so round-off is ~1e-15 relative and
            # the default cutoff link_rcond = 1e-2 truncates nothing
            assert np.linalg.cond(Ws) < 100 and np.linalg.cond(Wt) < 100
            assert rel_max(got, ref) <= 1e-10


def test_sampled_links_equal_least_squares_on_their_samples(monkeypatch):
    """L^(s,t) = A^+ G^ (B^+)^T with G^ = K(X[v_s], X[v_t]), A = W^(s)[v_s], B = W^(t)[v_t]
    for the rows v_s, v_t actually sampled ((1 + rho) k of each cluster, fewer than n_s)."""
    seen = {}
    original = _build.link_samples

    def recording(starts, ranks, pairs, oversample, rng):
        samples, offsets = original(starts, ranks, pairs, oversample, rng)
        seen.update(starts=starts, pairs=pairs, samples=samples, offsets=offsets)
        return samples, offsets

    monkeypatch.setattr(_build, "link_samples", recording)
    X = blobs(n=800, d=3)
    rank, rho = 5, 1.0
    G = hkern.meka(X, r=rank, n_clusters=4, sigma=SIGMA, seed=3, oversample=rho)
    Xs = X[G._perm]
    assert len(seen["pairs"]) == 6
    for (s, t), (o, a, b) in zip(seen["pairs"], seen["offsets"], strict=True):
        assert a == b == 2 * rank and a < G.sizes_[s] and b < G.sizes_[t]
        vs, vt = seen["samples"][o:o + a], seen["samples"][o + a:o + a + b]
        assert np.all((vs >= G._starts[s]) & (vs < G._starts[s + 1]))
        assert len(np.unique(vs)) == a and len(np.unique(vt)) == b
        A = G.basis(s)[vs - G._starts[s]]
        B = G.basis(t)[vt - G._starts[t]]
        Gh = dense_kernel(Xs[vs], Xs[vt], sigma=SIGMA)
        ref = meka_link(A, Gh, B)
        got = G.L_[kslice(G, s), kslice(G, t)]
        assert np.linalg.cond(A) < 50 and np.linalg.cond(B) < 50   # no truncation at 1e-2
        assert rel_max(got, ref) <= 1e-10
        # normal equations of min ||G^ - A L B^T||_F
        assert np.abs(A.T @ (A @ got @ B.T - Gh) @ B).max() <= 1e-10 * np.abs(Gh).max()


def test_matvec_equals_dense():
    X = blobs()
    G = hkern.meka(X, r=10, n_clusters=5, sigma=SIGMA, seed=0)
    D = G.to_dense()
    V = np.random.default_rng(0).normal(size=(X.shape[0], 3))
    assert rel_max(G.matvec(V), D @ V) <= 1e-12
    v = V[:, 0]
    assert G.matvec(v).shape == v.shape
    assert rel_max(G.matvec(v), D @ v) <= 1e-12


def test_rel_error_equals_dense_frobenius_ratio():
    X = blobs()
    G = hkern.meka(X, r=10, n_clusters=4, sigma=SIGMA, seed=0)
    K = dense_kernel(X, X, sigma=SIGMA)
    exact = rel_norm(G.to_dense(), K)
    assert abs(G.rel_error() - exact) <= 1e-10 * exact
    # row-sampled: the same ratio on the sampled rows
    rows = np.sort(np.random.default_rng(7).choice(X.shape[0], 100, replace=False))
    sub = rel_norm(G.to_dense()[rows], K[rows])
    assert abs(G.rel_error(n_rows=100, seed=7) - sub) <= 1e-10 * sub


def test_eigh_equals_dense_spectrum():
    X = blobs(n=400)
    G = hkern.meka(X, r=8, n_clusters=4, sigma=SIGMA, seed=0)
    D = G.to_dense()
    w_ref = np.linalg.eigvalsh(D)[::-1]
    w, V = G.eigh(10)
    assert np.abs(w - w_ref[:10]).max() <= 1e-10 * w_ref[0]
    assert np.abs(D @ V - V * w).max() <= 1e-10 * w_ref[0]
    assert np.abs(V.T @ V - np.eye(10)).max() <= 1e-12
    w_all, _ = G.eigh()
    assert len(w_all) == G.L_.shape[0]


def test_psd_fix_gives_psd_matrix_close_to_the_original():
    # small oversampling at a large bandwidth makes the sampled links indefinite
    X = blobs(n=600, d=3, spread=1.5)
    G = hkern.meka(X, r=15, n_clusters=6, sigma=2.0, seed=2, oversample=0.2)
    w_raw = np.linalg.eigvalsh(G.to_dense())
    assert w_raw[0] < -1e-6 * w_raw[-1], "test set-up: the raw approximation should be indefinite"
    P = hkern.meka(X, r=15, n_clusters=6, sigma=2.0, seed=2, oversample=0.2, psd=True)
    D = P.to_dense()
    w = np.linalg.eigvalsh(D)
    assert w[0] >= -1e-10 * np.linalg.norm(D, 2)
    assert P.psd_ and np.abs(P.basis(0).T @ P.basis(0) - np.eye(P.ranks_[0])).max() < 1e-12
    # The clip removes exactly the negative part of the spectrum (Q is orthonormal).
    neg = np.sqrt(np.sum(w_raw[w_raw < 0] ** 2))
    assert abs(np.linalg.norm(D - G.to_dense()) - neg) <= 1e-8 * np.linalg.norm(D)


# ------------------------------------------------------------------ options


def test_threshold_fraction_and_absolute():
    X = blobs(n=600, centres=5)
    c = 5
    G = hkern.meka(X, r=6, n_clusters=c, sigma=SIGMA, seed=0, threshold=0.3)
    P = c * (c - 1) // 2
    assert len(G.zeroed_pairs_) == int(np.ceil(0.3 * P))
    Dmu = dense_kernel(G.centroids_, G.centroids_, sigma=SIGMA)
    iu = np.triu_indices(c, 1)
    smallest = np.sort(Dmu[iu])[:len(G.zeroed_pairs_)]
    assert np.allclose(np.sort(Dmu[G.zeroed_pairs_[:, 0], G.zeroed_pairs_[:, 1]]), smallest)
    for s, t in G.zeroed_pairs_:
        assert np.all(G.L_[kslice(G, s), kslice(G, t)] == 0.0)
        assert np.all(G.L_[kslice(G, t), kslice(G, s)] == 0.0)
    assert G.n_stored == G._W.size + G.L_.size - sum(
        2 * G.ranks_[s] * G.ranks_[t] for s, t in G.zeroed_pairs_)
    eps = float(np.median(Dmu[iu]))
    A = hkern.meka(X, r=6, n_clusters=c, sigma=SIGMA, seed=0, threshold=eps,
                   threshold_kind="absolute")
    Da = dense_kernel(A.centroids_, A.centroids_, sigma=SIGMA)
    expected = {(s, t) for s, t in zip(*iu, strict=True) if Da[s, t] <= eps}
    assert {tuple(p) for p in A.zeroed_pairs_} == expected
    # threshold=1 as a fraction zeroes every link: block-diagonal (low-rank BKA)
    B = hkern.meka(X, r=6, n_clusters=c, sigma=SIGMA, seed=0, threshold=1.0)
    assert np.array_equal(B.L_, np.eye(B.L_.shape[0]))


@pytest.mark.parametrize("policy", ["uniform", "proportional", "spectral"])
def test_rank_policies(policy):
    X = blobs(n=900, centres=3)
    rng = np.random.default_rng(0)
    X = np.vstack([X, rng.normal(size=(100, 3)) * 0.3 + 20.0])     # one small cluster
    G = hkern.meka(X, r=10, n_clusters=4, sigma=SIGMA, seed=0, rank_policy=policy)
    k = G.ranks_
    assert np.all(k >= 1)
    if policy == "uniform":
        assert np.all(k == 10)
    elif policy == "proportional":
        assert k.sum() == 40
        big, small = np.argmax(G.sizes_), np.argmin(G.sizes_)
        assert k[big] > k[small]
    else:
        # the global top 40 of the pooled landmark-block eigenvalues decide each k_s
        pooled = []
        for s in range(G.n_clusters_):
            Z = G.landmarks(s)
            pooled += [(w, s) for w in np.linalg.eigvalsh(dense_kernel(Z, Z, sigma=SIGMA))]
        top = sorted(pooled, key=lambda p: -p[0])[:40]
        counts = np.maximum(np.bincount([s for _, s in top], minlength=G.n_clusters_), 1)
        assert np.array_equal(k, np.minimum(counts, [G.landmarks(s).shape[0]
                                                     for s in range(G.n_clusters_)]))
    ref, _ = dense_from_parts(G)
    assert rel_max(G.to_dense(), ref) <= 1e-12


def test_landmarks_per_cluster_caps_rank():
    X = blobs(n=400)
    G = hkern.meka(X, r=20, n_clusters=2, sigma=SIGMA, seed=0, landmarks_per_cluster=8)
    assert np.all(G.ranks_ <= 8)
    assert all(G.landmarks(s).shape[0] == 8 for s in range(G.n_clusters_))


def test_same_seed_same_result_and_thread_count_invariance():
    X = blobs(n=700)
    a = hkern.meka(X, r=8, n_clusters=5, sigma=SIGMA, seed=4, n_jobs=1)
    b = hkern.meka(X, r=8, n_clusters=5, sigma=SIGMA, seed=4, n_jobs=2)
    c = hkern.meka(X, r=8, n_clusters=5, sigma=SIGMA, seed=np.random.default_rng(4),
                   n_jobs=1)
    for other in (b, c):
        assert np.array_equal(a._W, other._W)
        assert np.array_equal(a.L_, other.L_)
        assert np.array_equal(a.labels_, other.labels_)
    v = np.arange(700, dtype=float)
    b.n_jobs = 1
    assert np.array_equal(a.matvec(v), hkern.meka(X, r=8, n_clusters=5, sigma=SIGMA, seed=4,
                                                  n_jobs=2).matvec(v))


def test_data_far_from_origin_give_the_same_approximation():
    X = blobs(n=400)
    a = hkern.meka(X, r=8, n_clusters=3, sigma=SIGMA, seed=0)
    b = hkern.meka(X + 1e4, r=8, n_clusters=3, sigma=SIGMA, seed=0)
    assert np.array_equal(a.labels_, b.labels_)
    Da, Db = a.to_dense(), b.to_dense()
    assert np.abs(Da - Db).max() <= 1e-6
    y = np.sin(X[:, 0])
    ma = hkern.fit_meka(X, y, r=8, n_clusters=3, lam=1e-2, seed=0, sigma=1.0)
    mb = hkern.fit_meka(X + 1e4, y, r=8, n_clusters=3, lam=1e-2, seed=0, sigma=1.0)
    assert np.abs(ma.predict(X[:50]) - mb.predict(X[:50] + 1e4)).max() <= 1e-5


# ------------------------------------------------------------------ kernel ridge regression


def test_krr_direct_equals_dense_solve_and_predictions_match_on_training_points():
    X = blobs(n=500)
    y = zero_mean(np.sin(X[:, 0]) + 0.1 * X[:, 1])      # the dense KRR below is the zero-mean GP
    lam = 1e-2
    model = hkern.fit_meka(X, y, r=10, n_clusters=4, lam=lam, sigma=SIGMA, seed=0,
                           psd=True)
    D = model.approximation_.to_dense()
    A = D + lam * np.eye(len(y))
    alpha_ref = np.linalg.solve(A, y)
    assert np.linalg.cond(A) < 1e4
    alpha = model.dual_coef_.ravel()
    assert rel_max(alpha, alpha_ref) <= 1e-10
    pred_ref = D @ alpha_ref
    assert rel_max(model.predict(X), pred_ref) <= 1e-10


@pytest.mark.parametrize("psd", [True, False])
def test_krr_direct_is_accurate_when_lam_is_tiny(psd):
    """Smooth kernel, lam ~ 1e-9 ||G~||: the residual of (G~ + lam I) alpha = y stays of order
    cond(G~ + lam I) eps, and predictions on the training points equal G~ (G~ + lam I)^-1 y.
    (The earlier L^-1-free Woodbury form lost everything here: residual 4.8 ||y|| at
    cond = 1.7e9, because it divided a cancelling difference by lam.)"""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 5))
    y = zero_mean(np.sin(X[:, 0]) + 0.1 * rng.normal(size=1500))   # (the zero-mean GP below)
    lam = 1e-6
    # Without the PSD fix sampled links make G~ indefinite; one cluster (G~ = W W^T, L = I)
    # keeps it PSD and still takes the non-orthonormal W = Q R path.
    model = hkern.fit_meka(X, y, r=40, n_clusters=5 if psd else 1, lam=lam, sigma=5.0,
                           seed=0, psd=psd)
    D = model.approximation_.to_dense()
    w = np.linalg.eigvalsh(D)
    cond = (w[-1] + lam) / (w[0] + lam)
    assert cond > 1e8
    alpha = model.dual_coef_.ravel()
    residual = np.linalg.norm(D @ alpha + lam * alpha - y) / np.linalg.norm(y)
    assert residual <= 100 * cond * np.finfo(float).eps
    fitted_ref = D @ np.linalg.solve(D + lam * np.eye(len(y)), y)
    assert np.abs(model.predict(X) - fitted_ref).max() <= 1e-6 * np.abs(y).max()


def test_krr_direct_handles_singular_L():
    """The direct solve works with zeroed link blocks, where L is singular."""
    X = blobs(n=500)
    y = zero_mean(np.cos(X[:, 1]))      # the dense KRR below is the zero-mean GP
    lam = 0.5
    model = hkern.fit_meka(X, y, r=10, n_clusters=5, lam=lam, sigma=2.0, seed=0,
                           oversample=0.2, threshold=0.4)
    L = model.approximation_.L_
    assert np.linalg.matrix_rank(L) < L.shape[0]
    D = model.approximation_.to_dense()
    A = D + lam * np.eye(len(y))
    alpha_ref = np.linalg.solve(A, y)
    assert np.abs(model.dual_coef_.ravel() - alpha_ref).max() <= \
        1e-10 * np.linalg.cond(A) * np.abs(alpha_ref).max()
    assert np.linalg.cond(A) < 1e4


def test_krr_cg_matches_direct():
    X = blobs(n=500)
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])
    kw = {"r": 10, "n_clusters": 4, "lam": 1e-2, "sigma": SIGMA, "seed": 0, "psd": True}
    direct = hkern.fit_meka(X, Y, **kw)
    cg = hkern.fit_meka(X, Y, solver="pcg", tol=1e-12, max_iter=2000, **kw)
    assert direct.n_iter_ is None
    assert cg.n_iter_.shape == (2,) and cg.n_iter_.dtype.kind == "i" and cg.n_iter_.min() > 1
    # Each output's count is its own recursion's: an all-zero column needs none while the
    # others go on; the largest count is the fewest iterations that solve every column.  (An
    # eigenvector of G~ would need one, but the fit solves for y minus its mean, which is not.)
    per_column = hkern.fit_meka(X, np.column_stack([Y[:, 0], np.zeros(len(X))]),
                                solver="pcg", tol=1e-12, max_iter=2000, **kw)
    assert per_column.n_iter_[1] == 0 and per_column.n_iter_[0] > 1
    with pytest.raises(np.linalg.LinAlgError, match="did not reach tol"):
        hkern.fit_meka(X, Y, solver="pcg", tol=1e-12, max_iter=cg.n_iter_.max() - 1, **kw)
    scale = np.abs(direct.dual_coef_).max()
    assert np.abs(cg.dual_coef_ - direct.dual_coef_).max() <= 1e-8 * scale


@pytest.mark.parametrize("solver", ["direct", "pcg"])
def test_indefinite_system_is_rejected_not_solved(solver):
    """psd=False with G~ + lam I indefinite: a clear error, never a silently wrong solution."""
    X = blobs(n=600, d=3, spread=1.5)
    G = hkern.meka(X, r=15, n_clusters=6, sigma=2.0, seed=2, oversample=0.2)
    lam_small = 1e-8
    assert np.linalg.eigvalsh(G.to_dense())[0] < -1e3 * lam_small
    with pytest.raises(ValueError, match="not positive definite.*psd=True"):
        hkern.fit_meka(X, np.ones(600), r=15, n_clusters=6, sigma=2.0, seed=2,
                       oversample=0.2, lam=lam_small, solver=solver, psd=False)


def test_krr_applies_the_psd_fix_by_default():
    X = blobs(n=600, d=3, spread=1.5)
    model = hkern.fit_meka(X, np.ones(600), r=15, n_clusters=6, sigma=2.0, seed=2,
                           oversample=0.2, lam=1e-8)
    G = model.approximation_
    assert G.psd_
    D = G.to_dense()
    assert np.linalg.eigvalsh(D)[0] >= -1e-10 * np.linalg.norm(D, 2)


@pytest.mark.parametrize("psd", [False, True])
def test_out_of_sample_features_equal_training_rows(psd):
    """The feature map of new points reproduces the stored basis rows at training points, with
    and without the PSD fix (which re-bases every cluster by a QR)."""
    X = blobs(n=400)
    G = hkern.meka(X, r=8, n_clusters=3, sigma=SIGMA, seed=0, psd=psd)
    labels, blocks = G.features(X)
    assert np.array_equal(labels, G.labels_)
    for s, (sel, Wx) in enumerate(blocks):
        assert np.array_equal(sel, cluster_rows(G, s))
        assert rel_max(Wx, G.basis(s)) <= 1e-12


def test_prediction_on_new_points_uses_nearest_centroid_features():
    X = blobs(n=500)
    y = zero_mean(np.sin(X[:, 0]))      # the dense KRR below is the zero-mean GP
    # psd=False keeps the Nystrom bases the reference below is written for; this G~ has
    # lambda_min = -0.48, so lam = 1 keeps G~ + lam I positive definite.
    model = hkern.fit_meka(X, y, r=10, n_clusters=4, lam=1.0, seed=0, psd=False, sigma=1.0)
    G = model.approximation_
    Xt = blobs(n=60, seed=9)
    labels = np.argmin(((Xt[:, None, :] - G.centroids_[None]) ** 2).sum(-1), axis=1)
    beta = G.L_ @ np.vstack([G.basis(s).T @ model.dual_coef_[cluster_rows(G, s)]
                             for s in range(G.n_clusters_)])
    ref = np.zeros(len(Xt))
    for s in range(G.n_clusters_):
        sel = labels == s
        Z = G.landmarks(s)
        Fs = nystrom_map(dense_kernel(Z, sigma=SIGMA), G.ranks_[s])
        Ws = G.basis(s)
        Fs = Fs * np.sign(np.sum(Ws * (dense_kernel(X[cluster_rows(G, s)], Z, sigma=SIGMA) @ Fs),
                                 axis=0))
        ref[sel] = dense_kernel(Xt[sel], Z, sigma=SIGMA) @ Fs @ beta[kslice(G, s)].ravel()
    assert rel_max(model.predict(Xt), ref) <= 1e-9


def test_multi_output_equals_separate_fits_and_classification():
    X = blobs(n=500)
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1])])
    kw = {"r": 8, "n_clusters": 4, "sigma": 1.0, "lam": 1e-2, "seed": 0}
    both = hkern.fit_meka(X, Y, **kw)
    for j in range(2):
        one = hkern.fit_meka(X, Y[:, j], **kw)
        assert np.abs(both.predict(X)[:, j] - one.predict(X)).max() <= 1e-12 * \
            np.abs(one.predict(X)).max()
    labels = np.where(X[:, 0] > np.median(X[:, 0]), "a", "b")
    clf = hkern.fit_meka(X, labels, task="classification", **kw)
    assert list(clf.classes_) == ["a", "b"]
    assert np.mean(clf.predict(X) == labels) > 0.95
    assert clf.nbytes > 0 and "MekaKRR" in repr(clf)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kwargs, match", [
    ({"r": 5, "n_clusters": 101}, "n_clusters"),
    ({"r": 0, "n_clusters": 2}, r"\br must be"),
    ({"r": -3, "n_clusters": 2}, r"\br must be"),
    ({"r": 2.5, "n_clusters": 2}, r"\br must be"),
    ({"r": 5, "n_clusters": 0}, "n_clusters"),
    ({"r": 5, "n_clusters": 2, "threshold": 1.5}, "threshold"),
    ({"r": 5, "n_clusters": 2, "threshold": -0.1}, "threshold"),
    ({"r": 5, "n_clusters": 2, "threshold_kind": "relative"}, "threshold_kind"),
    ({"r": 5, "n_clusters": 2, "rank_policy": "greedy"}, "rank_policy"),
    ({"r": 5, "n_clusters": 2, "oversample": -1}, "oversample"),
    ({"r": 5, "n_clusters": 2, "landmarks_per_cluster": 0}, "landmarks_per_cluster"),
    ({"r": 5, "n_clusters": 8, "kmeans_sample": 5}, "kmeans_sample"),
    ({"r": 5, "n_clusters": 2, "sigma": 0.0}, "sigma"),
    ({"r": 5, "n_clusters": 2, "kernel": "cosine"}, "kernel"),
    ({"r": 5, "n_clusters": 2, "psd": "yes"}, "psd"),
    ({"r": 5, "n_clusters": 2, "seed": -1}, "seed"),
    ({"r": 5, "n_clusters": 2, "link_rcond": 0.0}, "link_rcond"),
    ({"r": 5, "n_clusters": 2, "link_rcond": 1.0}, "link_rcond"),
])
def test_bad_arguments_raise_clear_errors(kwargs, match):
    X = blobs(n=100)
    with pytest.raises(ValueError, match=match):
        hkern.meka(X, **kwargs)


def test_bad_fit_arguments():
    X = blobs(n=100)
    y = np.ones(100)
    with pytest.raises(ValueError, match="solver"):
        hkern.fit_meka(X, y, r=5, n_clusters=2, solver="lu", sigma=1.0, lam=1e-2)
    with pytest.raises(ValueError, match="lam"):
        hkern.fit_meka(X, y, r=5, n_clusters=2, lam=0.0, sigma=1.0)
    with pytest.raises(ValueError, match="y has 99 rows"):
        hkern.fit_meka(X, y[:99], r=5, n_clusters=2, sigma=1.0, lam=1e-2)
    with pytest.raises(ValueError, match="NaN"):
        hkern.meka(np.where(X == X[3, 1], np.nan, X), r=5, n_clusters=2)
    model = hkern.fit_meka(X, y, r=5, n_clusters=2, seed=0, sigma=1.0, lam=1e-2)
    with pytest.raises(ValueError, match="features"):
        model.predict(np.ones((3, 5)))
    G = model.approximation_
    with pytest.raises(ValueError, match="shape"):
        G.matvec(np.ones(99))
    with pytest.raises(ValueError, match="k must be"):
        G.eigh(G.L_.shape[0] + 1)


def test_empty_and_duplicate_clusters_are_handled():
    # two distinct points: at most two clusters can be non-empty
    X = np.repeat(np.array([[0.0, 0.0], [3.0, 0.0]]), 50, axis=0)
    G = hkern.meka(X, r=2, n_clusters=4, seed=0)
    assert G.n_clusters_ == 2
    assert np.abs(G.to_dense() - dense_kernel(X, X, sigma=SIGMA)).max() <= 1e-12
    # an empty cluster after the assignment of all points is dropped and labels renumbered
    centroids = np.array([[0.0, 0.0], [100.0, 100.0], [3.0, 0.0]])
    labels = np.array([0, 2, 2, 0])
    kept, relabelled = _cluster.drop_empty(centroids, labels)
    assert np.array_equal(kept, centroids[[0, 2]])
    assert np.array_equal(relabelled, [0, 1, 1, 0])


def test_single_cluster_is_plain_nystrom():
    X = blobs(n=300)
    G = hkern.meka(X, r=20, n_clusters=1, sigma=SIGMA, seed=0)
    Z = G.landmarks(0)
    W = dense_kernel(X, Z, sigma=SIGMA) @ nystrom_map(dense_kernel(Z, sigma=SIGMA), 20)
    ref = W @ W.T
    assert rel_max(G.to_dense(), ref) <= 1e-10


def test_to_dense_refuses_large_n(monkeypatch):
    X = blobs(n=200)
    G = hkern.meka(X, r=4, n_clusters=2, seed=0)
    monkeypatch.setattr(approximation, "DENSE_LIMIT", 100)
    with pytest.raises(ValueError, match="exceeds 100"):
        G.to_dense()


def test_link_rcond_truncates_like_pinv():
    X = blobs(n=300, d=2, centres=3)
    rc = 0.3
    G = hkern.meka(X, r=6, n_clusters=3, sigma=SIGMA, seed=1, oversample=1e6, link_rcond=rc)
    K = dense_kernel(X, X, sigma=SIGMA)
    Ws, Wt = G.basis(0), G.basis(1)
    sv = np.linalg.svd(Ws, compute_uv=False)
    assert np.any(sv <= rc * sv[0]), "test set-up: the cutoff must remove a direction"
    ref = meka_link(Ws, K[np.ix_(cluster_rows(G, 0), cluster_rows(G, 1))], Wt, rtol=rc)
    assert rel_max(G.L_[kslice(G, 0), kslice(G, 1)], ref) <= 1e-10


@pytest.mark.parametrize("module", ["hkern.meka.api", "hkern.meka.approximation",
                                    "hkern.meka.krr"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_exact_links_with_identity_diagonal_can_be_indefinite():
    """Spec 3a says G~ would be PSD if every off-diagonal entry were used.  That needs the
    diagonal blocks refitted too (L = W^+ G W^+T, a congruence of G); with L^(s,s) = I (the
    Nystrom diagonal blocks, as the paper and the code do) it is not: psd=True is still
    needed.  Whole blocks here (oversample 1e6), sigma = 1."""
    X = np.random.default_rng(0).normal(size=(1500, 3))
    G = hkern.meka(X, r=15, n_clusters=6, sigma=1.0, seed=0, oversample=1e6)
    w = np.linalg.eigvalsh(G.to_dense())
    assert w[0] < -1e-3 * w[-1]
    P = hkern.meka(X, r=15, n_clusters=6, sigma=1.0, seed=0, oversample=1e6, psd=True)
    assert np.linalg.eigvalsh(P.to_dense())[0] >= -1e-10 * w[-1]


@pytest.mark.parametrize("kernel", ["laplace", "matern32", "imq"])
def test_other_kernels_follow_the_definition(kernel):
    X = blobs(n=300)
    G = hkern.meka(X, r=8, n_clusters=3, kernel=kernel, sigma=1.5, seed=0, oversample=1e6)
    ref, _W = dense_from_parts(G)
    assert rel_max(G.to_dense(), ref) <= 1e-12
    K = dense_kernel(X, kernel=kernel, sigma=1.5)
    for s in range(G.n_clusters_):
        Z = G.landmarks(s)
        F = nystrom_map(dense_kernel(Z, kernel=kernel, sigma=1.5), G.ranks_[s])
        W_ref = dense_kernel(X[cluster_rows(G, s)], Z, kernel=kernel, sigma=1.5) @ F
        signs = np.sign(np.sum(G.basis(s) * W_ref, axis=0))
        assert rel_max(G.basis(s), W_ref * signs) <= 1e-9
    Ws, Wt = G.basis(0), G.basis(1)
    link = meka_link(Ws, K[np.ix_(cluster_rows(G, 0), cluster_rows(G, 1))], Wt)
    assert np.linalg.cond(Ws) < 50 and np.linalg.cond(Wt) < 50
    assert rel_max(G.L_[kslice(G, 0), kslice(G, 1)], link) <= 1e-10

"""HCK and the independent kernel at degenerate but valid inputs (issue 16, defects 9 and 6).

Extreme bandwidths and magnitudes make the kernel matrix the identity (sigma = 1e-300: every
landmark matrix Sigma_p is (1 + jitter) I) or all ones (sigma = 1e300: Sigma_p is rank one plus
the jitter); repeated rows and constant columns make it rank deficient; tiny n gives trees of one
or two points per node.  Each case is checked against the HCK oracle of tests/oracles.py
(the pointwise definition of K_hier) on the very tree and landmarks of the fitted model, and
against closed forms where the kernel is the identity.  Where the kernel is singular on the
landmarks and the jitter cannot make up for it, the fit must refuse with a ValueError that names
the argument to change - not a LinAlgError from the core.

Tolerances are those of tests/test_hierarchical.py, except predictions, which are compared to
the size of the terms they sum (|k(x, X)| |w|): with an all-ones kernel a prediction is a sum of
weights of size ~1/lam that cancel to O(1), so its rounding error is relative to the terms, not
to the result (the dense reference has the same cancellation).
"""
import numpy as np
import pytest
from hck_model import make_kern, matrix_to_original, reconstruct, route
from oracles import (
    KERNELS,
    dense_fitted_lml,
    dense_logdet,
    hck_system,
    khier_cross,
    node_ranges,
    rel_max,
    rel_norm,
    zero_mean,
)

import hkern

LAM = 1e-2


def _base(n=64, d=3, seed=0):
    # y of mean exactly 0: the fits' centred targets are y's own bits, and the closed forms and
    # dense references of the zero-mean GP below are the fits' (tests/oracles.py, zero_mean)
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, size=(n, d)), zero_mean(rng.standard_normal(n))


def _case(name):
    """(X, y, sigma, r, leaf_size, Xq) of each degenerate case."""
    X, y = _base()
    rng = np.random.default_rng(1)
    near = X[:8] + 1e-3 * rng.standard_normal((8, X.shape[1]))
    if name == "sigma=1e-300":            # K = I off repeated points
        return X, y, 1e-300, 8, None, np.vstack([X[:8], near])
    if name == "sigma=1e300":             # K = ones
        return X, y, 1e300, 8, None, np.vstack([X[:8], near, 10 * near])
    if name == "X*1e149,sigma=1e149":
        return X * 1e149, y, 1e149, 8, None, np.vstack([X[:8], near]) * 1e149
    if name == "X*1e-150,sigma=1e-150":
        return X * 1e-150, y, 1e-150, 8, None, np.vstack([X[:8], near]) * 1e-150
    if name == "identical rows":          # K = ones on the training points
        return np.full_like(X, 0.3), y, 1.0, 8, None, np.vstack([np.full((2, 3), 0.3), near])
    if name == "repeated rows":           # each row four times: landmark sets repeat points
        return np.repeat(X[:16], 4, axis=0), y, 0.7, 8, None, np.vstack([X[:8], near])
    if name == "constant columns":       # one of three, far from 0; cond(Sigma_p) <= ~600
        Xc = X.copy()
        Xc[:, 0] = 5.0
        return Xc, y, 0.3, 8, None, np.vstack([Xc[:8], near])
    if name == "n=2,r=1":
        return X[:2], zero_mean(y[:2]), 0.7, 1, None, near[:3]
    if name == "n=3,r=1":
        return X[:3], zero_mean(y[:3]), 0.7, 1, None, near[:3]
    if name == "n=5,r=2,leaf_size=1":     # depth 3: empty leaves, one-point nodes
        return X[:5], zero_mean(y[:5]), 0.7, 2, 1, near[:4]
    raise KeyError(name)


CASES = ["sigma=1e-300", "sigma=1e300", "X*1e149,sigma=1e149", "X*1e-150,sigma=1e-150",
         "identical rows", "repeated rows", "constant columns", "n=2,r=1", "n=3,r=1",
         "n=5,r=2,leaf_size=1"]


def _dense(model, X, r, seed, leaf_size, kernel, sigma):
    """Tree-ordered data, landmarks, base kernel and the dense HCK system of a fitted model."""
    X_tree, tree, lms = reconstruct(X, r, seed, leaf_size)
    assert np.array_equal(tree["perm"], model.perm_), "replayed tree differs from the model's"
    kern = make_kern(kernel, sigma)
    A = hck_system(X_tree, model.depth_, lms, kern, LAM, model.jitter_)
    return X_tree, lms, kern, A


def _assert_predictions(model, scores, X_tree, lms, kern, Y_tree, Xq):
    """Scores of new points against the dense KRR of the same tree, relative to the terms."""
    Xqc = Xq - model.centre_
    Kq = khier_cross(X_tree, model.depth_, lms, kern, model.jitter_, Xqc, route(model, Xq))
    w = np.linalg.solve(hck_system(X_tree, model.depth_, lms, kern, LAM, model.jitter_),
                        Y_tree)
    ref = Kq @ w
    scale = np.abs(Kq) @ np.abs(w)
    assert np.all(np.isfinite(scores))
    err = np.abs(scores.reshape(ref.shape) - ref)
    assert np.all(err <= 1e-10 * scale + 1e-300), float(np.max(err / (scale + 1e-300)))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", CASES)
def test_hck_degenerate_inputs_match_dense(name, kernel):
    X, y, sigma, r, leaf_size, Xq = _case(name)
    n, seed = len(X), 3
    model = hkern.fit_hierarchical(X, y, r=r, kernel=kernel, sigma=sigma, lam=LAM,
                                   leaf_size=leaf_size, seed=seed, n_jobs=1)
    X_tree, lms, kern, A = _dense(model, X, r, seed, leaf_size, kernel, sigma)
    A_orig = matrix_to_original(A, model.perm_)
    # the operator, its inverse, log det and likelihood
    assert rel_max(model.matvec(np.eye(n)), A_orig) < 1e-12
    B = np.random.default_rng(4).standard_normal((n, 2))
    for rhs in (y, B):
        out = model.solve(rhs)
        assert out.shape == rhs.shape and np.all(np.isfinite(out))
        assert rel_norm(out, np.linalg.solve(A_orig, rhs)) < 1e-10
        assert rel_norm(model.matvec(rhs), A_orig @ rhs) < 1e-12
    logdet = dense_logdet(A)
    assert abs(model.logdet() - logdet) <= 1e-10 * max(abs(logdet), 1.0)
    lml = dense_fitted_lml(A, y[model.perm_])
    assert abs(model.log_marginal_likelihood(y) - lml) <= 1e-10 * abs(lml)
    assert rel_norm(model.dual_coef_[model.perm_, 0], np.linalg.solve(A, y[model.perm_])) < 1e-10
    # predictions on training points and new points
    _assert_predictions(model, model.predict(X), X_tree, lms, kern, y[model.perm_], X)
    _assert_predictions(model, model.predict(Xq), X_tree, lms, kern, y[model.perm_], Xq)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("scale", [1.0, 1e-150, 1e149])
def test_identity_kernel_closed_form(scale, kernel):
    # Distinct points and a bandwidth far below their distances: K = I, so every Nystrom term
    # vanishes off the diagonal, K_hier' = (1 + jitter) I and A = (1 + lam) I; a training point's
    # prediction is its own weight y / (1 + lam), a new point's is 0.  rtol 1e-12: a landmark's
    # leaf diagonal lam - jitter is computed as (1 + lam) - (1 + jitter), which costs
    # eps / lam ~ 2e-14 relative.
    X, y = _base()
    X, sigma = X * scale, 1e-160 * scale
    n = len(X)
    m = hkern.fit_hierarchical(X, y, r=8, kernel=kernel, sigma=sigma, lam=LAM, seed=0, n_jobs=1)
    np.testing.assert_allclose(m.matvec(y), (1 + LAM) * y, rtol=1e-15)
    np.testing.assert_allclose(m.solve(y), y / (1 + LAM), rtol=1e-12)
    assert abs(m.logdet() - n * np.log1p(LAM)) < 1e-12 * n
    np.testing.assert_allclose(m.predict(X), y / (1 + LAM), rtol=1e-12)
    assert np.array_equal(m.predict(X[:5] + 1e-3 * scale), np.zeros(5))
    ind = hkern.fit_independent(X, y, r=8, kernel=kernel, sigma=sigma, lam=LAM, seed=0,
                                n_jobs=1)
    np.testing.assert_allclose(ind.predict(X), y / (1 + LAM), rtol=1e-15)
    assert abs(ind.logdet() - n * np.log1p(LAM)) < 1e-12 * n
    assert np.array_equal(ind.predict(X[:5] + 1e-3 * scale), np.zeros(5))


@pytest.mark.parametrize("scale", [1e149, 1e-150])
@pytest.mark.parametrize("fit", [hkern.fit_hierarchical, hkern.fit_independent])
def test_scaling_data_and_sigma_together_changes_nothing(fit, scale):
    # The kernels depend on X / sigma only: X * c with sigma * c is the same model (the same
    # tree: projections and thresholds scale by c), up to the rounding of the scaling.
    X, y = _base(300, seed=5)
    Xq = np.random.default_rng(6).uniform(-1, 1, size=(50, 3))
    kw = dict(r=16, lam=LAM, seed=2, n_jobs=1)
    ref = fit(X, y, sigma=0.5, **kw)
    scaled = fit(X * scale, y, sigma=0.5 * scale, **kw)
    assert np.array_equal(ref.perm_, scaled.perm_)
    assert rel_norm(scaled.predict(Xq * scale), ref.predict(Xq)) < 1e-10
    assert abs(scaled.logdet() - ref.logdet()) < 1e-10 * abs(ref.logdet())


@pytest.mark.parametrize("name", ["sigma=1e-300", "sigma=1e300", "identical rows"])
def test_classification_at_degenerate_inputs(name):
    X, y, sigma, r, leaf_size, Xq = _case(name)
    labels = np.array(["a", "b", "c"])[np.arange(len(X)) % 3]
    kw = dict(r=r, sigma=sigma, lam=LAM, leaf_size=leaf_size, seed=3, n_jobs=1)
    clf = hkern.fit_hierarchical(X, labels, task="classification", **kw)
    S = clf.decision_function(Xq)
    X_tree, lms, kern, _ = _dense(clf, X, r, 3, leaf_size, "gaussian", sigma)
    T = np.where(labels[:, None] == clf.classes_[None, :], 1.0, -1.0)
    _assert_predictions(clf, S, X_tree, lms, kern, T[clf.perm_], Xq)
    assert set(clf.predict(Xq)) <= set(labels)
    ind = hkern.fit_independent(X, labels, task="classification", **kw)
    assert np.all(np.isfinite(ind.decision_function(Xq)))
    assert set(ind.predict(Xq)) <= set(labels)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", CASES)
def test_independent_degenerate_inputs_match_blockdiag_krr(name, kernel):
    X, y, sigma, r, leaf_size, Xq = _case(name)
    m = hkern.fit_independent(X, y, r=r, kernel=kernel, sigma=sigma, lam=LAM,
                              leaf_size=leaf_size, seed=3, n_jobs=1)
    kern = make_kern(kernel, sigma)
    X_tree = np.ascontiguousarray(X - m.centre_)[m.perm_]
    yt = y[m.perm_]
    ranges = node_ranges(len(X), m.depth_)[(1 << m.depth_) - 1:]
    alpha, logdet = np.empty_like(yt), 0.0
    for s, c in ranges:
        if c:
            Kb = kern(X_tree[s:s + c], X_tree[s:s + c]) + LAM * np.eye(c)
            alpha[s:s + c] = np.linalg.solve(Kb, yt[s:s + c])
            logdet += dense_logdet(Kb)
    assert rel_norm(m.dual_coef_[m.perm_, 0], alpha) < 1e-10
    assert abs(m.logdet() - logdet) <= 1e-10 * max(abs(logdet), 1.0)
    leaf_q = route(m, Xq)
    Xqc = Xq - m.centre_
    for q in range(len(Xq)):
        s, c = ranges[leaf_q[q]]
        terms = kern(Xqc[q:q + 1], X_tree[s:s + c])[0] * alpha[s:s + c]
        assert abs(m.predict(Xq[q:q + 1])[0] - terms.sum()) <= 1e-12 * np.abs(terms).sum() + 1e-300


# ----------------------------------------------------------------------------------------------
# Where the landmark kernel matrix is singular to working precision: a clear ValueError.
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("X_kind,sigma,jitter", [
    ("random", 1e300, 0.0),           # K = ones: Sigma_p = 11^T is singular
    ("random", 1e300, 1e-20),         # 1 + 1e-20 rounds to 1: the jitter is lost
    ("identical", 1.0, 0.0),          # every landmark set is one repeated point
])
def test_singular_landmark_matrix_is_a_clear_value_error(X_kind, sigma, jitter):
    X, y = _base()
    if X_kind == "identical":
        X = np.ones_like(X)
    with pytest.raises(ValueError, match=r"singular to working precision") as info:
        hkern.fit_hierarchical(X, y, r=8, sigma=sigma, lam=LAM, jitter=jitter, seed=0)
    assert not isinstance(info.value, np.linalg.LinAlgError)
    message = str(info.value)
    assert "pass a larger jitter" in message and f"jitter={jitter:g}" in message
    # the default jitter is enough for the same data
    m = hkern.fit_hierarchical(X, y, r=8, sigma=sigma, lam=LAM, seed=0)
    assert np.all(np.isfinite(m.predict(X)))


def test_lam_below_the_rounding_of_the_kernel_is_a_clear_value_error():
    # The leaf blocks are K + lam I minus their Nystrom part: for a landmark point that part is
    # k(x, x) + jitter, so the diagonal lam - jitter is computed as (1 + lam) - (1 + jitter) and
    # lam far below 1e-16 leaves nothing.  The independent kernel fails alike for K = ones.
    X, y = _base()
    with pytest.raises(ValueError, match=r"increase lam \(now 1e-20\)") as info:
        hkern.fit_hierarchical(X, y, r=8, sigma=1.0, lam=1e-20, seed=0)
    assert not isinstance(info.value, np.linalg.LinAlgError)
    with pytest.raises(ValueError, match=r"lam=1e-20 .*increase lam") as info:
        hkern.fit_independent(X, y, r=8, sigma=1e300, lam=1e-20, seed=0)
    assert not isinstance(info.value, np.linalg.LinAlgError)


# ----------------------------------------------------------------------------------------------
# Tiny n, r against n, leaf sizes, partitions and repeated rows: right answer or clear error.
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fit", [hkern.fit_hierarchical, hkern.fit_independent])
@pytest.mark.parametrize("n,r", [(2, 2), (2, 3), (5, 5), (5, 9)])
def test_r_not_below_n_is_reduced(fit, n, r):
    X, y = _base(n)
    with pytest.warns(UserWarning, match=rf"r={r} is larger than n - 1 = {n - 1} for n={n} "
                      "training samples"):
        model = fit(X, y, r=r)
    # depth floor(log2(n / (n - 1))): 1 for n = 2 (leaves of one point), else 0
    assert model.depth_ == (1 if n == 2 else 0) and np.all(np.isfinite(model.predict(X)))
    assert getattr(model, "r_", n - 1) == n - 1         # IndependentKRR keeps no r


@pytest.mark.parametrize("fit", [hkern.fit_hierarchical, hkern.fit_independent])
def test_one_sample_is_refused(fit):
    X, y = _base(1)
    with pytest.raises(ValueError, match="needs at least 2 training samples; got 1 sample"):
        fit(X, y, r=1)


@pytest.mark.parametrize("partition", ["random", "pca"])
@pytest.mark.parametrize("leaf_size", [None, 1, 2, 3, 1000])
@pytest.mark.parametrize("data", ["random", "identical", "repeated", "constant column"])
@pytest.mark.parametrize("n,r", [(2, 1), (3, 1), (3, 2), (7, 3), (40, 5)])
def test_small_trees_give_finite_answers(n, r, data, leaf_size, partition):
    X, y = _base(n, d=2, seed=n)
    if data == "identical":
        X = np.full_like(X, -0.25)
    elif data == "repeated":
        X = X[np.arange(n) % max(1, n // 2)]
    elif data == "constant column":
        X[:, 1] = 3.0
    kw = dict(r=r, sigma=0.5, lam=LAM, leaf_size=leaf_size, partition=partition, seed=0,
              n_jobs=1)
    m = hkern.fit_hierarchical(X, y, **kw)
    ind = hkern.fit_independent(X, y, **kw)
    Xq = np.vstack([X, X + 0.1])
    for out in (m.predict(Xq), m.solve(y), m.matvec(y), m.logdet(),
                m.log_marginal_likelihood(y), ind.predict(Xq), ind.logdet()):
        assert np.all(np.isfinite(out))
    # solve inverts matvec up to a backward error of about eps * cond(Sigma_p): with repeated
    # points or points on a line and the default jitter 1e-8, cond(Sigma_p) reaches ~1e8.
    x = m.solve(y)
    A_norm = np.abs(m.matvec(np.eye(n))).sum(axis=1).max()
    assert np.abs(m.matvec(x) - y).max() <= 1e-7 * A_norm * np.abs(x).max()
    assert m.depth_ == ind.depth_ and np.array_equal(m.perm_, ind.perm_)


def test_solve_is_refined_where_the_factored_inverse_loses_accuracy(monkeypatch):
    """Issue 52: on energy (692 rows, standardised) at sigma 7.76 and lam 1.15e-7 (what
    sigma="auto" selected) HCK's factored solve had a relative residual of 4.0 and the model
    predicted with test RMSE 4.0 (std(y) 1), silently.  Here a smooth kernel on discrete
    features (residual 8e-3 unrefined): the fit refines the solve with the matvec, so its
    coefficients solve (K_hier + lam I) a = y - mean against the dense matrix; without
    refinement steps the same fit is refused with a LinAlgError naming lam."""
    from hkern.hierarchical import factor
    rng = np.random.default_rng(0)
    rng.normal(size=(700, 8))                       # (the draw the measurement above made first)
    X = rng.integers(0, 4, size=(700, 8)).astype(float)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] * X[:, 2] + 0.01 * rng.normal(size=700)
    kw = dict(sigma=8.0, lam=1e-7, seed=0)
    model = hkern.fit_hierarchical(X, y, **kw)
    A = model.matvec(np.eye(len(y)))
    yc = y - model.y_mean_
    coef = model.solve(yc)                          # refined as the fit's
    assert np.linalg.norm(A @ coef - yc) <= 1e-8 * np.linalg.norm(yc)
    plain = model._from_tree(model._op.solve(model._to_tree(yc)[0], 1), True)
    assert np.linalg.norm(A @ plain.ravel() - yc) > 1e-4 * np.linalg.norm(yc)
    # the model predicts with the refined coefficients: K_hier a = y - lam a at the rows
    fitted = model.predict(X) - model.y_mean_
    assert np.abs(fitted - (yc - 1e-7 * coef)).max() <= 1e-5 * np.abs(yc).max()
    monkeypatch.setattr(factor, "REFINE_STEPS", 0)
    with pytest.raises(np.linalg.LinAlgError, match="lam=1e-07.*raise lam or jitter"):
        hkern.fit_hierarchical(X, y, **kw)

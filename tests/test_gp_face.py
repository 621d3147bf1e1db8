"""The GP face of the kernel ridge models that are Gaussian processes (issue 17, item 1).

Exact KRR, HCK and the independent kernel are GP posteriors (issue 52): each output y_j is a
constant mean mu_j (the training mean) plus f_j ~ GP(0, s2_j k) with k the plain kernel,
K_hier' (hierarchical kernel of the jittered base kernel) or the block-diagonal kernel on the
leaves, and the centred targets' covariance s2_j A, A = K + lam I (for HCK the leaf diagonal
blocks of A are K + lam I, the jitter being part of lam), s2_j its maximum-likelihood value.
Nystrom and random features are the GP of their features' kernel.  Every number is checked
against a dense oracle at small n, built from the mathematical definition
(tests/oracles.py, ``dense_fitted_gp``):

* ``dual_coef_`` is in training order and solves A w = Y - mu: predict(X_train) ==
  mu + K(X_train, X_train) @ dual_coef_ for the model's kernel (the plain kernel for exact KRR
  and HCK at depth 0; the cross-kernel of the HCK oracle in tests/oracles.py for HCK at
  depth >= 1; the block-diagonal one for the independent kernel).
* ``log_marginal_likelihood()`` / ``(y)`` against the dense log N(y - mu | 0, s2 A), summed
  over outputs.
* ``predict(X, return_std=True)`` against sqrt(s2 (k(x, x) - k(x, X) A^{-1} k(X, x))) (latent
  f) and sqrt(s2 (... + lam)) with ``include_noise``; ``return_cov`` against the dense
  covariance, ``sample_y`` against its moments.

Tolerances: the unit-amplitude variance is a difference of O(1) terms (k(x, x) = 1), so it is
compared in absolute terms, 1e-10 times s2, far above the rounding of either side (~1e-14
observed) and far below the smallest variances here (~1e-3).
"""
import inspect

import numpy as np
import pytest
from hck_model import make_kern, matrix_to_original, reconstruct, route
from memory_probe import assert_estimate_close
from oracles import (
    dense_fitted_gp,
    dense_fitted_lml,
    dense_gp_posterior,
    dense_kernel,
    dense_lml,
    hck_system,
    khier_cross,
    rel_norm,
)

import hkern
from hkern._memory import MemoryLimitError

LAM = 1e-2


def data(n, seed, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    Y = np.column_stack([y, np.cos(2 * X[:, 1]) * X[:, 2]])
    Xq = np.vstack([rng.uniform(-1.2, 1.2, size=(30, d)), X[:10]])   # new and training points
    return X, Y, Xq


def dense_variance(A, Kq, kxx=1.0):
    """k(x, x) - k(x, X) A^{-1} k(X, x) for the rows of Kq (m, n), A the training covariance."""
    return dense_gp_posterior(A, Kq, np.full(len(Kq), kxx), np.zeros(len(A)), 0.0)[1]


class Dense:
    """A fitted model with its dense oracle: A (training order) and the cross-kernel rows
    K(Xq, X) (training order) the model predicts with."""


# --------------------------------------------------------------------------------------------
# The models and their dense oracles
# --------------------------------------------------------------------------------------------
HCK_CASES = {
    # name: (kernel, sigma, jitter, n, r, leaf_size, seed)
    "depth0-gauss": ("gaussian", 0.5, 1e-3, 120, 80, None, 1),      # n < 2r: one leaf
    "depth0-laplace-j0": ("laplace", 1.0, 0.0, 90, 50, None, 2),
    "depth3-gauss-j0": ("gaussian", 0.3, 0.0, 257, 32, None, 3),
    "depth4-gauss": ("gaussian", 0.5, 1e-3, 300, 16, None, 4),
    "depth3-matern32-leaf40": ("matern32", 0.5, 1e-3, 256, 8, 40, 5),
    # leaves of 12-13 points below parents of 25 landmarks: U_i has more columns than rows
    "depth4-smallnodes": ("gaussian", 0.3, 1e-3, 200, 64, 20, 6),
}


def _hck(name, k=1, task="regression"):
    kernel, sigma, jitter, n, r, leaf_size, seed = HCK_CASES[name]
    X, Y, Xq = data(n, seed)
    y = Y[:, :k] if k > 1 else Y[:, 0]
    if task == "classification":
        y = np.where(Y[:, 0] > np.median(Y[:, 0]), "a", "b")
    c = Dense()
    c.X, c.y, c.Xq, c.kernel, c.sigma = X, y, Xq, kernel, sigma
    c.model = hkern.fit_hierarchical(X, y, r=r, kernel=kernel, sigma=sigma, lam=LAM,
                                     jitter=jitter, seed=seed, leaf_size=leaf_size, task=task,
                                     n_jobs=1)
    X_tree, tree, lms = reconstruct(X, r, seed, leaf_size)
    assert np.array_equal(tree["perm"], c.model.perm_)
    kern, depth, perm = make_kern(kernel, sigma), c.model.depth_, c.model.perm_
    c.A = matrix_to_original(hck_system(X_tree, depth, lms, kern, LAM, jitter), perm)

    def cross(Xnew):
        rows = khier_cross(X_tree, depth, lms, kern, jitter, Xnew - c.model.centre_,
                              route(c.model, Xnew))
        out = np.empty_like(rows)
        out[:, perm] = rows                # columns in training order
        return out
    c.cross = cross
    return c


def _independent(name, k=1):
    kernel, sigma, _, n, r, leaf_size, seed = HCK_CASES[name]
    X, Y, Xq = data(n, seed)
    c = Dense()
    c.X, c.y, c.Xq = X, (Y[:, :k] if k > 1 else Y[:, 0]), Xq
    c.model = hkern.fit_independent(X, c.y, r=r, kernel=kernel, sigma=sigma, lam=LAM,
                                    seed=seed, leaf_size=leaf_size, n_jobs=1)
    K = hkern.kernel_matrix(X, X, kernel=kernel, sigma=sigma)
    leaf_train = route(c.model, X)

    def cross(Xnew):
        same = route(c.model, Xnew)[:, None] == leaf_train[None, :]
        return np.where(same, hkern.kernel_matrix(Xnew, X, kernel=kernel, sigma=sigma), 0.0)
    c.A = np.where(leaf_train[:, None] == leaf_train[None, :], K, 0.0) + LAM * np.eye(n)
    c.cross = cross
    return c


def _exact(k=1, kernel="gaussian", sigma=0.7):
    X, Y, Xq = data(150, 9)
    c = Dense()
    c.X, c.y, c.Xq = X, (Y[:, :k] if k > 1 else Y[:, 0]), Xq
    c.model = hkern.fit_exact(X, c.y, kernel=kernel, sigma=sigma, lam=LAM, n_jobs=1)
    c.A = hkern.kernel_matrix(X, X, kernel=kernel, sigma=sigma) + LAM * np.eye(len(X))
    c.cross = lambda Xnew: hkern.kernel_matrix(Xnew, X, kernel=kernel, sigma=sigma)
    return c


MODELS = ([f"hck:{name}" for name in HCK_CASES] + ["independent:depth3-gauss-j0",
          "independent:depth3-matern32-leaf40", "exact:gaussian", "exact:laplace"])


def make(spec, k=1):
    family, name = spec.split(":")
    if family == "hck":
        return _hck(name, k)
    if family == "independent":
        return _independent(name, k)
    return _exact(k, kernel=name, sigma=0.7 if name == "gaussian" else 1.5)


# --------------------------------------------------------------------------------------------
# 1. dual_coef_ in training order
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("spec", MODELS)
def test_predictions_are_the_kernel_expansion_of_dual_coef_in_training_order(spec, k):
    c = make(spec, k)
    w = c.model.dual_coef_
    assert w.shape == (len(c.X), k)
    mu, alpha, _ = dense_fitted_gp(c.A, c.y)
    assert np.allclose(c.model.y_mean_, mu[0] if k == 1 else mu, rtol=1e-14, atol=0)
    # the weights solve A w = Y - mu with rows in training order
    assert rel_norm(w, alpha) < 1e-10
    # training points as new points: mu + K(X_train, X_train) @ dual_coef_ (no jitter in k(x, X))
    pred = c.model.predict(c.X).reshape(len(c.X), -1)
    assert rel_norm(pred, mu + c.cross(c.X) @ w) < 1e-10


@pytest.mark.parametrize("name", [n for n in HCK_CASES if n.startswith("depth0")])
def test_depth0_hck_is_the_plain_kernel_expansion(name):
    # At depth 0 K_hier' is the plain kernel plus the jitter on the training diagonal, and a
    # training point predicted as a new point sees the plain kernel: predict(X) = K @ dual_coef_.
    c = _hck(name, k=2)
    assert c.model.depth_ == 0
    K = hkern.kernel_matrix(c.X, c.X, kernel=c.kernel, sigma=c.sigma)
    mu = c.y.mean(axis=0)
    assert rel_norm(c.model.predict(c.X), mu + K @ c.model.dual_coef_) < 1e-12
    assert rel_norm(c.model.matvec(c.model.dual_coef_), c.y - mu) < 1e-12  # (K + lam I) w = y - mu


# --------------------------------------------------------------------------------------------
# 2. log marginal likelihood
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("spec", MODELS)
def test_log_marginal_likelihood_is_the_dense_gaussian_density(spec, k):
    c = make(spec, k)
    ref = dense_fitted_lml(c.A, c.y)
    lml = c.model.log_marginal_likelihood()
    assert isinstance(lml, float)
    assert abs(lml - ref) < 1e-10 * abs(ref)
    # the fitted signal variance is the likelihood's maximum
    s2 = dense_fitted_gp(c.A, c.y)[2]
    assert np.allclose(c.model.signal_variance_, s2[0] if k == 1 else s2, rtol=1e-10, atol=0)
    assert np.allclose(c.model.noise_, LAM * c.model.signal_variance_, rtol=1e-15, atol=0)
    # at the training targets the argument form gives the same number, computed anew
    assert c.model.log_marginal_likelihood(c.y) == lml
    # and at other targets (training order), under the fitted mean and signal variance
    other = np.column_stack([np.cos(c.X[:, 0]), c.X[:, 2], c.X[:, 1] ** 2])[:, :k]
    y = other[:, 0] if k == 1 else other
    ref = dense_fitted_lml(c.A, c.y, y)
    assert abs(c.model.log_marginal_likelihood(y) - ref) < 1e-10 * abs(ref)


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("fit", ["nystrom", "rff"])
def test_feature_models_likelihood_is_the_dense_density_under_their_features(fit, k):
    # A = Phi Phi^T + lam I: Nystrom's Phi Phi^T = K(X, Z) (K(Z, Z) + jitter I)^{-1} K(Z, X), random
    # features' Phi = sqrt(2 / r) cos(X Omega^T + b), both built here from the model's own points.
    X, Y, _ = data(120, 3)
    y = Y[:, 0] if k == 1 else Y
    if fit == "nystrom":
        model = hkern.fit_nystrom(X, y, r=25, sigma=0.7, lam=LAM, seed=0)
        Z = model.landmarks_
        C = dense_kernel(X, Z, sigma=0.7)
        G = C @ np.linalg.solve(dense_kernel(Z, Z, sigma=0.7) + model.jitter_ * np.eye(25), C.T)
    else:
        model = hkern.fit_rff(X, y, r=40, sigma=0.7, lam=LAM, seed=0)
        Phi = np.sqrt(2.0 / 40) * np.cos(X @ model.frequencies_.T + model.offsets_)
        G = Phi @ Phi.T
    ref = dense_fitted_lml(G + LAM * np.eye(len(X)), y)
    assert abs(model.log_marginal_likelihood() - ref) < 1e-9 * abs(ref)
    with pytest.raises(ValueError, match="keeps the weights of its features, not its training "
                       r"inputs.*log_marginal_likelihood\(\) without y"):
        model.log_marginal_likelihood(y)


def test_iterative_feature_fits_have_no_likelihood_and_say_what_has():
    X, Y, _ = data(120, 3)
    model = hkern.fit_nystrom(X, Y[:, 0], r=25, sigma=0.7, lam=LAM, solver="pcg", seed=0)
    with pytest.raises(ValueError, match="iterative solver.*solver='direct'"):
        model.log_marginal_likelihood()


def test_grief_likelihood_takes_the_shared_signature_and_refuses_other_targets():
    X, Y, _ = data(120, 3)
    gp = hkern.fit_grief(X, Y[:, 0], r=20, seed=0)
    assert gp.log_marginal_likelihood() == gp.log_marginal_likelihood(None) == gp._lml
    with pytest.raises(ValueError, match="GriefGP keeps its basis and weights, not its training "
                       "inputs"):
        gp.log_marginal_likelihood(Y[:, 0])


@pytest.mark.parametrize("fit", [hkern.fit_exact, hkern.fit_hierarchical, hkern.fit_independent])
def test_classifiers_refuse_the_training_likelihood_and_return_std(fit):
    X, Y, Xq = data(120, 3)
    labels = np.where(Y[:, 0] > np.median(Y[:, 0]), "a", "b")
    kw = {} if fit is hkern.fit_exact else dict(r=16, seed=0)
    clf = fit(X, labels, task="classification", sigma=0.5, lam=LAM, **kw)
    with pytest.raises(ValueError, match=r"log_marginal_likelihood\(\) is defined for "
                       r"regression.*task='classification'.*pass y"):
        clf.log_marginal_likelihood()
    with pytest.raises(ValueError, match=r"return_std=True\) is defined for regression.*"
                       "decision_function"):
        clf.predict(Xq, return_std=True)
    # real targets can be given explicitly: the +-1 encoding the classifier solved for
    # (the classifier's model: no mean and the kernel's own scale, as its one-vs-rest solve)
    T = np.where(labels[:, None] == clf.classes_[None, :], 1.0, -1.0)
    lml = clf.log_marginal_likelihood(T)
    assert np.isfinite(lml)
    if fit is hkern.fit_exact:
        A = hkern.kernel_matrix(X, X, sigma=0.5) + LAM * np.eye(len(X))
        assert abs(lml - dense_lml(A, T)) < 1e-10 * abs(lml)
        assert rel_norm(clf.dual_coef_, np.linalg.solve(A, T)) < 1e-10


# --------------------------------------------------------------------------------------------
# 3. posterior standard deviation
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("spec", MODELS)
def test_std_is_the_dense_posterior_standard_deviation(spec, k):
    c = make(spec, k)
    var_ref = dense_variance(c.A, c.cross(c.Xq))
    assert var_ref.min() > 1e-4            # the check below is far from the clipping at 0
    s2 = dense_fitted_gp(c.A, c.y)[2]
    mean, std = c.model.predict(c.Xq, return_std=True)
    assert std.shape == ((len(c.Xq),) if k == 1 else (len(c.Xq), k))   # per output
    assert np.array_equal(mean, c.model.predict(c.Xq))
    std = std.reshape(len(c.Xq), k)
    assert np.abs(std**2 / s2 - var_ref[:, None]).max() < 1e-10
    _, std_y = c.model.predict(c.Xq, return_std=True, include_noise=True)
    std_y = std_y.reshape(len(c.Xq), k)
    assert np.abs(std_y**2 / s2 - (var_ref[:, None] + LAM)).max() < 1e-10


def test_std_at_a_training_point_of_the_exact_gp_is_below_the_noise():
    # Sanity of the latent/noise split: with lam small, f is pinned near y at training inputs.
    c = _exact()
    _, std = c.model.predict(c.X, return_std=True)
    _, std_y = c.model.predict(c.X, return_std=True, include_noise=True)
    noise_sd = np.sqrt(c.model.noise_)
    assert np.all(std < noise_sd) and np.all(std_y > noise_sd)


@pytest.mark.parametrize("spec", ["hck:depth4-gauss", "hck:depth0-gauss",
                                  "independent:depth3-gauss-j0", "exact:gaussian"])
def test_std_does_not_depend_on_n_jobs(spec):
    c = make(spec)
    model = c.model
    ref = model.predict(c.Xq, return_std=True)[1]
    model.n_jobs = 2
    assert np.array_equal(model.predict(c.Xq, return_std=True)[1], ref)


@pytest.mark.parametrize("spec", ["hck:depth4-gauss", "independent:depth3-gauss-j0",
                                  "exact:gaussian"])
def test_std_checks_its_flags_and_inputs(spec):
    model = make(spec).model
    Xq = data(50, 0)[2]
    for flag in ("return_std", "include_noise"):
        with pytest.raises(ValueError, match=flag):
            model.predict(Xq, **{flag: "yes"})
    with pytest.raises(ValueError, match="features"):
        model.predict(Xq[:, :2], return_std=True)
    with pytest.raises(ValueError, match="0 sample"):         # as for the mean alone
        model.predict(Xq[:0], return_std=True)
    mean, std = model.predict(Xq[:1], return_std=True)
    assert mean.shape == (1,) and std.shape == (1,)
    with pytest.raises(MemoryLimitError, match="max_memory"):
        model.predict(Xq, return_std=True, max_memory=1000)


def test_one_gp_face_for_every_gp_model():
    # The same keywords, in the same order, on every model that defines a predictive variance.
    for cls in (hkern.ExactKRR, hkern.HierarchicalKRR, hkern.IndependentKRR, hkern.NystromKRR,
                hkern.RFFKRR):
        params = inspect.signature(cls.predict).parameters
        assert list(params)[:5] == ["self", "X", "return_std", "return_cov", "include_noise"], cls
        assert params["return_std"].default is False and params["include_noise"].default is False
        lml = inspect.signature(cls.log_marginal_likelihood).parameters
        assert all(p.default is not inspect.Parameter.empty for p in list(lml.values())[1:]), cls
    for cls in (hkern.GriefGP,):
        params = inspect.signature(cls.predict).parameters
        assert list(params)[:4] == ["self", "X", "return_std", "include_noise"], cls
        assert params["return_std"].default is False and params["include_noise"].default is False
        lml = inspect.signature(cls.log_marginal_likelihood).parameters
        assert all(p.default is not inspect.Parameter.empty for p in list(lml.values())[1:]), cls


def test_pickled_model_gives_the_same_std():
    import pickle
    c = _hck("depth4-gauss")
    copy = pickle.loads(pickle.dumps(c.model))
    for a, b in zip(copy.predict(c.Xq, return_std=True), c.model.predict(c.Xq, return_std=True)):
        assert np.array_equal(a, b)
    assert copy.log_marginal_likelihood() == c.model.log_marginal_likelihood()


# --------------------------------------------------------------------------------------------
# 4. memory: each new estimate against the peak RSS of the call (tests/memory_probe.py)
# --------------------------------------------------------------------------------------------
SETUP = """
rng = np.random.default_rng(0)
X = rng.normal(size=({n}, 3))
y = rng.normal(size={n})
Xq = rng.normal(size=({m}, 3))
model = {fit}
"""


@pytest.mark.parametrize("fit,n,m,call", [
    ("hkern.fit_hierarchical(X, y, r=64, seed=0, n_jobs=2, sigma=1.0, lam=1e-2)", 20_000, 5_000,
     "model.predict(Xq, return_std=True)"),
    ("hkern.fit_hierarchical(X, y, r=256, seed=0, n_jobs=2, sigma=1.0, lam=1e-2)", 20_000, 1_000,
     "model.predict(Xq, return_std=True)"),
    ("hkern.fit_hierarchical(X, y, r=3000, seed=0, n_jobs=2, sigma=1.0, lam=1e-2)",  # depth 0
     5_000, 2_000, "model.predict(Xq, return_std=True)"),
    ("hkern.fit_independent(X, y, r=1500, seed=0, n_jobs=2, sigma=1.0, lam=1e-2)", 20_000, 5_000,
     "model.predict(Xq, return_std=True)"),
    ("hkern.fit_independent(X, y, r=1500, seed=0, n_jobs=2, sigma=1.0, lam=1e-2)", 20_000, 0,
     "model.log_marginal_likelihood(y)"),
    ("hkern.fit_exact(X, y, n_jobs=2, sigma=1.0, lam=1e-2)", 5_000, 20_000,
     "model.predict(Xq, return_std=True)"),
    ("hkern.fit_exact(X, y, n_jobs=2, sigma=1.0, lam=1e-2)", 4_000, 0,
     "model.log_marginal_likelihood(y)"),
])
def test_estimates_match_peak_rss(fit, n, m, call):
    assert_estimate_close(SETUP.format(n=n, m=m, fit=fit), call)


# --------------------------------------------------------------------------------------------
# HCK's std where the structured posterior loses positive definiteness
# --------------------------------------------------------------------------------------------
def _smooth_hck_at_tiny_lam():
    """sigma 5 on inputs in [-1, 1]^3 at lam 1e-7 (depth 2): the structured form's Schur
    complements C_i are indefinite to working precision (energy's default fit did this), A is
    not."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(300, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2
    Xq = np.vstack([rng.uniform(-1.2, 1.2, size=(30, 3)), X[:10]])
    model = hkern.fit_hierarchical(X, y, r=64, sigma=5.0, lam=1e-7, seed=1, n_jobs=1)
    X_tree, _, lms = reconstruct(X, 64, 1, None)
    kern = make_kern("gaussian", 5.0)
    A = matrix_to_original(hck_system(X_tree, model.depth_, lms, kern, 1e-7, model.jitter_),
                           model.perm_)
    rows = khier_cross(X_tree, model.depth_, lms, kern, model.jitter_, Xq - model.centre_,
                       route(model, Xq))
    Kq = np.empty_like(rows)
    Kq[:, model.perm_] = rows
    return model, y, Xq, A, Kq


def test_hck_std_where_the_structured_form_fails_is_the_dense_one():
    from hkern.hierarchical import _posterior
    model, y, Xq, A, Kq = _smooth_hck_at_tiny_lam()
    with pytest.raises(ValueError, match="not positive definite to working precision"):
        _posterior.posterior_factors(model._op)
    var_ref = dense_variance(A, Kq)
    s2 = dense_fitted_gp(A, y)[2]
    _, std = model.predict(Xq, return_std=True)
    assert var_ref.min() > 1e-10
    assert np.abs(std ** 2 / s2 - var_ref).max() < 1e-10 * var_ref.max() + 1e-12
    model.n_jobs = 2
    assert np.array_equal(model.predict(Xq, return_std=True)[1], std)   # any n_jobs


def test_hck_std_beyond_the_dense_fallback_names_both_limits(monkeypatch):
    from hkern.hierarchical import models
    model, _, Xq, _, _ = _smooth_hck_at_tiny_lam()
    monkeypatch.setattr(models, "DENSE_VARIANCE_ROWS", 100)
    with pytest.raises(ValueError, match=r"not positive definite to working precision .*refit "
                       r"with a larger lam; the dense computation that would replace it at "
                       r"n=300 is limited to n <= 100"):
        model.predict(Xq, return_std=True)


def test_falkon_makes_its_posterior_when_its_std_is_first_asked_for():
    """The pass over the training rows (2 n r^2 flops) is more than FALKON's whole fit: the
    model makes it on first use, keeps it, and a pickled model makes the same."""
    import pickle
    X, Y, Xq = data(300, 7)
    model = hkern.fit_nystrom(X, Y[:, 0], 60, solver="pcg", sigma=0.7, lam=LAM, seed=0,
                              tol=1e-10)
    assert model._L is None and model._deferred is not None
    copy = pickle.loads(pickle.dumps(model))
    _, std = model.predict(Xq, return_std=True)
    assert model._L is not None and model._deferred is None      # X released
    assert np.array_equal(model.predict(Xq, return_std=True)[1], std)
    assert np.array_equal(copy.predict(Xq, return_std=True)[1], std)
    direct = hkern.fit_nystrom(X, Y[:, 0], 60, sigma=0.7, lam=LAM, seed=0)   # the same GP
    assert np.allclose(direct.predict(Xq, return_std=True)[1], std, rtol=1e-8)

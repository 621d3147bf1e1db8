"""The predictive distribution of every regression fit (issue 52), against dense references
built from the definitions at small n (tests/oracles.py):

* the constant mean: the correctly rounded training mean, the same bits for any split of the
  rows (:func:`hkern._targets.exact_mean`);
* Nystrom (direct and FALKON) and random features: the deterministic-training-conditional and
  Bayesian-linear variances of their features' Gaussian process, in the units of y;
* ``return_cov`` and ``sample_y`` against the dense posterior covariance;
* the fits that are not Gaussian processes (MEKA, SLKL) say so.
"""
from fractions import Fraction

import numpy as np
import pytest
from oracles import dense_fitted_gp, dense_kernel

import hkern
from hkern._targets import exact_mean, exact_sums

LAM = 1e-2


def data(n=150, seed=3, d=3, offset=0.0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    Y = np.column_stack([y, np.cos(2 * X[:, 1]) * X[:, 2]])
    Xq = np.vstack([rng.uniform(-1.5, 1.5, size=(25, d)), X[:5]])
    return X, scale * Y + offset, Xq


# --------------------------------------------------------------------------------------------
# The mean
# --------------------------------------------------------------------------------------------
def test_exact_mean_is_the_correctly_rounded_mean_for_any_split():
    rng = np.random.default_rng(0)
    Y = np.column_stack([rng.normal(size=1001) * 1e-200, rng.normal(size=1001) + 1e8,
                         rng.standard_cauchy(size=1001) * 1e300])
    exact = [float(sum(Fraction(v) for v in Y[:, j]) / len(Y)) for j in range(3)]
    assert exact_mean(Y).tolist() == exact
    for cut in (0, 1, 500, 1001):
        parts = exact_sums(Y[:cut]) + exact_sums(Y[cut:])
        assert parts.mean().tolist() == exact
        assert (exact_sums(Y[cut:]) + exact_sums(Y[:cut])).mean().tolist() == exact
    assert exact_sums(Y).sum().tolist() == [float(sum(Fraction(v) for v in Y[:, j]))
                                            for j in range(3)]
    assert exact_mean(np.zeros((0, 2))).tolist() == [0.0, 0.0]


def test_every_regression_fit_keeps_the_training_mean():
    X, Y, _ = data(offset=1e6)
    for model in (hkern.fit_exact(X, Y[:, 0], sigma=0.5, lam=LAM),
                  hkern.fit_meka(X, Y[:, 0], 8, n_clusters=2, sigma=0.5, lam=LAM, seed=0),
                  hkern.fit_slkl(X, Y[:, 0], 40, sigma=0.5, lam=1.0, seed=0)):
        assert model.y_mean_.tolist() == exact_mean(Y[:, :1]).tolist()
    clf = hkern.fit_exact(X, Y[:, 0] > 1e6, task="classification", sigma=0.5, lam=LAM)
    assert clf.y_mean_ is None and clf.signal_variance_ is None and clf.noise_ is None


# --------------------------------------------------------------------------------------------
# The feature models' variance
# --------------------------------------------------------------------------------------------
def _nystrom_oracle(model, X, sigma):
    """(Phi, Xq -> Phi_q): the features of the Nystrom GP the model is."""
    Z = model.landmarks_
    W = dense_kernel(Z, Z, sigma=sigma) + model.jitter_ * np.eye(len(Z))
    L = np.linalg.cholesky(W)
    Phi = np.linalg.solve(L, dense_kernel(Z, X, sigma=sigma)).T

    def features(Xq):
        return np.linalg.solve(L, dense_kernel(Z, Xq, sigma=sigma)).T
    return Phi, features


def _rff_oracle(model, X):
    r = model.frequencies_.shape[0]

    def phi(Xn):
        return np.sqrt(2.0 / r) * np.cos(Xn @ model.frequencies_.T + model.offsets_)

    return phi(X), phi


FEATURE_FITS = {
    "nystrom": lambda X, y: hkern.fit_nystrom(X, y, 30, sigma=0.7, lam=LAM, seed=0),
    "falkon": lambda X, y: hkern.fit_nystrom(X, y, 30, sigma=0.7, lam=LAM, seed=0, solver="pcg",
                                             tol=1e-12),
    "rff": lambda X, y: hkern.fit_rff(X, y, 40, sigma=0.7, lam=LAM, seed=0),
    "rff_dual": lambda X, y: hkern.fit_rff(X, y, 200, sigma=0.7, lam=LAM, seed=0),
}


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("name", sorted(FEATURE_FITS))
def test_feature_models_std_is_their_gaussian_process_posterior(name, k):
    X, Y, Xq = data(offset=50.0, scale=3.0)
    y = Y[:, 0] if k == 1 else Y
    model = FEATURE_FITS[name](X, y)
    Phi, features = _rff_oracle(model, X) if name.startswith("rff") else \
        _nystrom_oracle(model, X, 0.7)
    A = Phi @ Phi.T + LAM * np.eye(len(X))
    mu, alpha, s2 = dense_fitted_gp(A, y)
    Pq = features(Xq)
    # the mean: mu + phi(x)^T Phi^T A^{-1} (y - mu)
    mean, std = model.predict(Xq, return_std=True)
    tol = 1e-8 if name == "falkon" else 1e-10
    assert np.abs(mean.reshape(len(Xq), k) - (mu + Pq @ Phi.T @ alpha)).max() < tol * 10
    assert np.allclose(model.signal_variance_, s2[0] if k == 1 else s2, rtol=tol, atol=0)
    # the GP with prior kernel phi(x)^T phi(x'), from its definition: the prior variance
    # minus what the training targets explain (the Bayesian linear model; for Nystrom
    # features the subset of regressors)
    Kq = Pq @ Phi.T
    var = np.einsum("ij,ij->i", Pq, Pq) - np.einsum("ij,ji->i", Kq, np.linalg.solve(A, Kq.T))
    assert std.shape == ((len(Xq),) if k == 1 else (len(Xq), k))
    assert np.abs(std.reshape(len(Xq), k) ** 2 / s2 - var[:, None]).max() < tol
    _, std_y = model.predict(Xq, return_std=True, include_noise=True)
    assert np.abs(std_y.reshape(len(Xq), k) ** 2 / s2 - var[:, None] - LAM).max() < tol
    if name in ("nystrom", "falkon"):
        # far from the landmarks phi(x) = 0: the latent variance is 0, a new target's the
        # noise's, s2 lam
        far = np.full((1, 3), 50.0)
        assert np.all(model.predict(far, return_std=True)[1] == 0.0)
        noise = model.predict(far, return_std=True, include_noise=True)[1]
        assert np.allclose(np.reshape(noise, -1) ** 2, s2 * LAM, rtol=1e-12, atol=0)


# --------------------------------------------------------------------------------------------
# return_cov and sample_y
# --------------------------------------------------------------------------------------------
COV_FITS = {
    "exact": lambda X, y: hkern.fit_exact(X, y, sigma=0.7, lam=LAM),
    "nystrom": FEATURE_FITS["nystrom"],
    "rff": FEATURE_FITS["rff"],
}


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("name", sorted(COV_FITS))
def test_return_cov_is_the_dense_posterior_covariance(name, k):
    X, Y, Xq = data(offset=-7.0)
    y = Y[:, 0] if k == 1 else Y
    model = COV_FITS[name](X, y)
    mean, cov = model.predict(Xq, return_cov=True)
    assert np.array_equal(mean, model.predict(Xq))
    m = len(Xq)
    assert cov.shape == ((m, m) if k == 1 else (m, m, k))
    covs = cov.reshape(m, m, k)
    std = model.predict(Xq, return_std=True)[1].reshape(m, k)
    s2 = np.atleast_1d(model.signal_variance_)
    if name == "exact":
        A = dense_kernel(X, X, sigma=0.7) + LAM * np.eye(len(X))
        Kq = dense_kernel(Xq, X, sigma=0.7)
        ref = dense_kernel(Xq, Xq, sigma=0.7) - Kq @ np.linalg.solve(A, Kq.T)
        for j in range(k):
            assert np.abs(covs[:, :, j] / s2[j] - ref).max() < 1e-10
    for j in range(k):
        assert np.allclose(covs[:, :, j], covs[:, :, j].T, rtol=0, atol=1e-12 * s2[j])
        assert np.allclose(np.sqrt(np.maximum(np.diag(covs[:, :, j]), 0)), std[:, j],
                           rtol=1e-7, atol=1e-9)
    _, noisy = model.predict(Xq, return_cov=True, include_noise=True)
    diag = np.einsum("iij->ij", noisy.reshape(m, m, k)) - np.einsum("iij->ij", covs)
    assert np.allclose(diag, np.atleast_1d(model.noise_), rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2])
def test_sample_y_draws_the_posterior(k):
    X, Y, Xq = data(offset=100.0)
    y = Y[:, 0] if k == 1 else Y
    model = hkern.fit_exact(X, y, sigma=0.7, lam=LAM)
    draws = model.sample_y(Xq[:6], 4000, seed=0)
    assert draws.shape == ((6, 4000) if k == 1 else (6, k, 4000))
    assert np.array_equal(draws, model.sample_y(Xq[:6], 4000, seed=0))
    mean, cov = model.predict(Xq[:6], return_cov=True)
    draws = draws.reshape(6, k, 4000)
    covs = cov.reshape(6, 6, k)
    for j in range(k):
        sd = np.sqrt(np.diag(covs[:, :, j]))
        # the sample mean within 5 standard errors, the sample covariance within 10%
        z = (draws[:, j].mean(axis=1) - mean.reshape(6, k)[:, j]) / (sd / np.sqrt(4000))
        assert np.all(np.abs(z) < 5)
        assert np.allclose(np.cov(draws[:, j]), covs[:, :, j], rtol=0, atol=0.1 * sd.max()**2)
    with pytest.raises(ValueError, match="n_samples"):
        model.sample_y(Xq, 0)


def test_return_std_and_return_cov_together_and_on_a_classifier_are_refused():
    X, Y, Xq = data()
    model = hkern.fit_exact(X, Y[:, 0], sigma=0.7, lam=LAM)
    with pytest.raises(ValueError, match="at most one of return_std and return_cov"):
        model.predict(Xq, return_std=True, return_cov=True)
    clf = hkern.fit_nystrom(X, Y[:, 0] > 1, 20, task="classification", sigma=0.7, lam=LAM,
                            seed=0)
    with pytest.raises(ValueError, match="regression.*decision_function"):
        clf.predict(Xq, return_cov=True)


def test_the_fits_that_are_not_gaussian_processes_say_so():
    X, Y, Xq = data()
    for model in (hkern.fit_meka(X, Y[:, 0], 8, n_clusters=2, sigma=0.5, lam=LAM, seed=0),
                  hkern.fit_slkl(X, Y[:, 0], 40, sigma=0.5, lam=1.0, seed=0)):
        assert model.signal_variance_ is None
        with pytest.raises(ValueError, match="no predictive standard deviation"):
            model.predict(Xq, return_std=True)
    hck = hkern.fit_hierarchical(X, Y[:, 0], r=16, sigma=0.5, lam=LAM, seed=0)
    with pytest.raises(ValueError, match="no posterior covariance between points"):
        hck.predict(Xq, return_cov=True)


def test_z_scores_do_not_depend_on_the_units_of_y():
    X, Y, Xq = data()
    yq = np.sin(3 * Xq[:, 0]) + Xq[:, 1] ** 2
    for fit in (lambda X, y: hkern.fit_exact(X, y, sigma=0.7, lam=LAM),
                lambda X, y: hkern.fit_hierarchical(X, y, r=16, sigma=0.7, lam=LAM, seed=0),
                FEATURE_FITS["falkon"]):
        z = [(c * yq - mean) / std for c in (1.0, 1000.0) for mean, std in
             [fit(X, c * Y[:, 0]).predict(Xq, return_std=True, include_noise=True)]]
        assert np.abs(z[0] - z[1]).max() < 1e-8

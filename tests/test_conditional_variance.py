"""The PCG fit's posterior variance without an n x n matrix (hkern.exact.variance): the
variance of f(x) given the nearest training targets y_N and global summaries Q^T y, checked
against the dense Gaussian conditioning it is by definition, against the exact posterior
variance it bounds from above, and in the PCG model, which uses it where the n x n factor
costs more or does not fit."""
import numpy as np
import pytest
from oracles import dense_kernel

import hkern
from hkern.exact import variance

LAM = 1e-2


def data(n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)
    return X, y, rng.uniform(-1.2, 1.2, size=(60, d))


@pytest.fixture
def small(monkeypatch):
    """Neighbours, summaries and groups small enough for n = 400."""
    monkeypatch.setattr(variance, "NEIGHBOURS", 120)
    monkeypatch.setattr(variance, "SUMMARIES", 40)
    monkeypatch.setattr(variance, "GROUP", 7)


def conditional(model, Xq, n_threads=2):
    Xs = model._check_X(Xq)
    return variance.conditional_variance(model.kernel, model._bandwidth, model.X_fit_,
                                         model.lam, Xs, np.ones(len(Xs)),
                                         n_threads=n_threads, max_memory=None)


def dense_variance(X, Xq, sigma, lam):
    """k(x, x) - k^T (K + lam I)^{-1} k from the definition (per-feature sigma: the
    Gaussian kernel of the scaled inputs)."""
    scale = np.asarray(sigma, dtype=float)
    A = dense_kernel(X / scale, X / scale, sigma=1.0) + lam * np.eye(len(X))
    k = dense_kernel(X / scale, Xq / scale, sigma=1.0)
    return 1.0 - np.einsum("ij,ij->j", k, np.linalg.solve(A, k))


@pytest.mark.parametrize("sigma", [0.4, [0.3, 0.8, 2.0]])
def test_every_row_as_neighbours_is_the_exact_variance(sigma):
    X, y, Xq = data()
    model = hkern.fit_exact(X, y, sigma=sigma, lam=LAM, solver="pcg", seed=0)
    np.testing.assert_allclose(conditional(model, Xq), dense_variance(X, Xq, sigma, LAM),
                               rtol=1e-9, atol=1e-12)


def test_it_is_gaussian_conditioning_on_the_neighbours_and_the_summaries(small):
    """var(x) = k(x, x) - b^T S^{-1} b, S = T^T A T, b = T^T k, T = [E_N Q], dense."""
    X, y, Xq = data()
    sigma = 0.4
    model = hkern.fit_exact(X, y, sigma=sigma, lam=LAM, solver="pcg", seed=0)
    got = conditional(model, Xq)
    summaries = variance._Summaries(model.kernel, model._bandwidth, X, LAM, 40, 2)
    np.testing.assert_allclose(summaries.Q.T @ summaries.Q, np.eye(40), atol=1e-12)
    A = dense_kernel(X, X, sigma=sigma) + LAM * np.eye(len(X))
    groups = variance._groups(Xq / sigma, 7)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(Xq)))
    assert max(map(len, groups)) <= 7 and len(groups) == 9           # ceil(60 / 7): the fewest
    for group in groups:
        k = dense_kernel(X, Xq[group], sigma=sigma)
        near = variance._nearest(k.T, 120)
        T = np.hstack([np.eye(len(X))[:, near], summaries.Q])
        b = T.T @ k
        want = 1.0 - np.einsum("ij,ij->j", b, np.linalg.solve(T.T @ A @ T, b))
        np.testing.assert_allclose(got[group], want, rtol=1e-8, atol=1e-12)


def test_it_bounds_the_exact_variance_and_the_summaries_tighten_it(small, monkeypatch):
    X, y, Xq = data()
    model = hkern.fit_exact(X, y, sigma=0.4, lam=LAM, solver="pcg", seed=0)
    exact = dense_variance(X, Xq, 0.4, LAM)
    with_summaries = conditional(model, Xq)
    monkeypatch.setattr(variance, "SUMMARIES", 0)
    neighbours_alone = conditional(model, Xq)
    assert np.all(with_summaries >= exact - 1e-12)
    assert np.all(neighbours_alone >= with_summaries - 1e-12)
    # the summaries take the error of the std down (0.57 times the median here)
    err = np.abs(np.sqrt(with_summaries) - np.sqrt(exact)) / np.sqrt(exact)
    alone = np.abs(np.sqrt(neighbours_alone) - np.sqrt(exact)) / np.sqrt(exact)
    assert np.all(err <= alone + 1e-12) and np.median(err) < 0.7 * np.median(alone)


def test_pcg_model_conditions_where_the_factor_costs_more_or_does_not_fit(small):
    X, y, Xq = data(n=1200)
    pcg = hkern.fit_exact(X, y, sigma=0.4, lam=LAM, solver="pcg", seed=0)
    direct = hkern.fit_exact(X, y, sigma=0.4, lam=LAM, solver="direct")
    n = len(X)
    assert not pcg._conditions(100, 10_000, None)                 # n within the neighbours
    for m in (1, 60, 1000):                                       # the cheaper of the two
        cheaper = variance.conditional_flops(n, m) < n ** 3 / 3 + n * n * m
        assert pcg._conditions(n, m, None) == cheaper
        assert pcg._conditions(n, m, 8 * n * n)                   # ... or the one that fits
    assert variance.variance_bytes(n, len(Xq)) < 8 * n * n
    _, std = pcg.predict(Xq, return_std=True, max_memory=8 * n * n)
    _, exact = direct.predict(Xq, return_std=True)
    np.testing.assert_allclose(std, np.sqrt(pcg.signal_variance_[0] * conditional(pcg, Xq)),
                               rtol=1e-12)
    assert np.all(std >= exact * (1 - 1e-9))
    with pytest.raises(MemoryError, match="n x n kernel matrix"):
        direct.predict(Xq, return_std=True, max_memory=8 * n * n)
    # in the units of y: 1000 y gives 1000 times the std (both solved to rounding, so that
    # the signal variances from their answers agree beyond the default tol)
    fits = [hkern.fit_exact(X, c * y, sigma=0.4, lam=LAM, solver="pcg", seed=0, tol=1e-12)
            for c in (1.0, 1000.0)]
    one, thousand = (fit.predict(Xq, return_std=True, max_memory=8 * n * n)[1] for fit in fits)
    np.testing.assert_allclose(thousand, 1000 * one, rtol=1e-9)


def test_the_default_sizes_condition_at_kin40k_and_factorise_at_ten_thousand_rows():
    """The measured crossover (doc/design.md): kin40k's 36 000 rows and 4 000 test points
    condition, 10 000 rows factorise (one 0.8 GB factor, seconds)."""
    model = hkern.fit_exact(*data()[:2], sigma=0.4, lam=LAM, solver="pcg", seed=0)
    assert model._conditions(36_000, 4000, None)
    assert not model._conditions(10_000, 4000, None)


def test_the_same_bits_for_any_thread_count(small):
    X, y, Xq = data()
    model = hkern.fit_exact(X, y, sigma=[0.3, 0.8, 2.0], lam=LAM, solver="pcg", seed=0)
    assert np.array_equal(conditional(model, Xq, 1), conditional(model, Xq, 2))


def test_memory_is_checked_before_anything_is_allocated():
    X, y, Xq = data()
    model = hkern.fit_exact(X, y, sigma=0.4, lam=LAM, solver="pcg", seed=0)
    need = variance.variance_bytes(len(X), len(Xq))
    with pytest.raises(MemoryError, match="posterior variance at 60 points of a PCG fit"):
        variance.conditional_variance(model.kernel, model._bandwidth, model.X_fit_, LAM,
                                      model._check_X(Xq), np.ones(60), n_threads=1,
                                      max_memory=need - 1)

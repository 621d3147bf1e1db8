"""GP-GRIEF against dense references built from the definitions (spec doc/specs/grief.md)."""
import itertools

import numpy as np
import pytest
from oracles import dense_gp_posterior, dense_kernel, dense_lml, grief_dense_phi, rel_max

import hkern
from hkern.grief import GriefBasis, _core, make_grids
from hkern.grief._lml import plain_lml, svd_lml, svd_transform
from hkern.grief._mala import lognormal_params
from hkern.grief._type2 import type2_lml

RTOL = 1e-10


@pytest.fixture
def small():
    rng = np.random.default_rng(3)
    X = rng.uniform(-1.5, 1.5, (40, 3))
    y = np.sin(X @ np.array([1.0, 0.5, -0.7])) + 0.1 * rng.normal(size=40)
    grids = make_grids(X, [5, 4, 3])
    ls = np.array([0.8, 1.3, 0.6])
    return X, y, grids, ls


# -- Algorithm 1 ------------------------------------------------------------------------------
@pytest.mark.parametrize("sizes,p", [([4, 3, 5], 17), ([2, 7], 14), ([3, 3, 3, 2], 1),
                                     ([6, 5], 100)])
def test_top_p_equals_full_sort(sizes, p):
    rng = np.random.default_rng(sum(sizes) + p)
    lams = [rng.uniform(0.01, 2.0, s) for s in sizes]
    idx, logv = _core.top_p([np.log(lam) for lam in lams], p)
    full = np.ones(1)
    for lam in lams:
        full = np.kron(full, lam)
    order = np.argsort(-full, kind="stable")[:p]
    assert idx.shape == (min(p, full.size), len(sizes))
    linear = np.ravel_multi_index(tuple(idx.T), sizes)
    np.testing.assert_array_equal(linear, order)
    np.testing.assert_allclose(np.exp(logv), full[order], rtol=1e-13)


# -- Phi -----------------------------------------------------------------------------------
def test_phi_equals_naive_kxu(small):
    X, _, grids, ls = small
    p = 25
    basis = GriefBasis(grids, ls, p)
    Phi = basis.phi(X)
    Phi_ref, lam_ref, _ = grief_dense_phi(X, grids, ls, p)
    assert np.all(-np.diff(lam_ref) > 1e-6 * lam_ref[0])     # distinct: columns are comparable
    assert rel_max(np.exp(basis.log_eigenvalues), lam_ref) < RTOL
    # Eigenvectors are defined up to sign: compare column by column after aligning signs.
    signs = np.sign(np.sum(Phi * Phi_ref, axis=0))
    assert rel_max(Phi * signs, Phi_ref) < RTOL
    assert rel_max(Phi @ Phi.T, Phi_ref @ Phi_ref.T) < RTOL


def test_phi_equals_kronecker_route_at_test_points(small):
    """K_X*U (kron Q_i) S_p' Lambda^-1/2 with the same per-dimension Q_i: exact column match."""
    _X, _, grids, ls = small
    rng = np.random.default_rng(0)
    Xt = rng.uniform(-2.0, 2.0, (15, 3))                     # also outside the grid range
    basis = GriefBasis(grids, ls, 30)
    Q, lam = np.ones((1, 1)), np.ones(1)
    for Qi, li in zip(basis.Qs, basis.lams):
        Q, lam = np.kron(Q, Qi), np.kron(lam, li)
    U = np.array(list(itertools.product(*grids)))
    lin = np.ravel_multi_index(tuple(basis.idx.T), [g.size for g in grids])
    ref = dense_kernel(Xt / ls, U / ls, sigma=1.0) @ Q[:, lin] / np.sqrt(lam[lin])
    assert rel_max(basis.phi(Xt), ref) < RTOL


def test_phi_threads_bitwise(small):
    X, _, grids, ls = small
    basis = GriefBasis(grids, ls, 30)
    np.testing.assert_array_equal(basis.phi(X, 1), basis.phi(X, 2))


def test_d100_no_overflow():
    """m = 10^100 grid points: the log-space product stays finite and k~(x, x) <= k(x, x) = 1."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-np.sqrt(3), np.sqrt(3), (200, 100))
    grids = make_grids(X, [10] * 100)
    basis = GriefBasis(grids, np.full(100, 3.0), 500)
    Phi = basis.phi(X)
    assert np.isfinite(Phi).all() and np.isfinite(basis.log_eigenvalues).all()
    diag = np.einsum("ij,ij->i", Phi, Phi)
    assert np.all(diag > 0) and np.all(diag <= 1 + 1e-8)
    gp = hkern.fit_grief(X, X[:, 0], r=100, grid_size=10, lengthscales=3.0, signal_variance=1.0,
                         noise=0.1, optimize=False)
    assert gp.m_ == 10**100 and np.isfinite(gp.predict(X[:5])).all()


# -- LML and gradients -------------------------------------------------------------------------
def test_plain_lml_and_gradients_match_dense(small):
    X, y, grids, ls = small
    basis = GriefBasis(grids, ls, 20)
    Phi = basis.phi(X)
    A, r = basis.gram(X, y)
    rng = np.random.default_rng(5)
    w, noise = rng.uniform(0.3, 2.0, basis.p), 0.07
    lml, dw, dnoise, _, _ = plain_lml(y @ y, r, A, len(y), w, noise)
    assert abs(lml - dense_lml(Phi @ np.diag(w) @ Phi.T, y, noise)) < RTOL * abs(lml)
    h = 1e-4                      # relative step: truncation and round-off both ~1e-9
    for k in [0, 7, 19]:
        e = np.zeros_like(w)
        e[k] = h * w[k]
        fd = (plain_lml(y @ y, r, A, len(y), w + e, noise, grad=False)[0]
              - plain_lml(y @ y, r, A, len(y), w - e, noise, grad=False)[0]) / (2 * e[k])
        assert abs(dw[k] - fd) < 1e-6 * abs(fd)
    fd = (plain_lml(y @ y, r, A, len(y), w, noise * (1 + h), grad=False)[0]
          - plain_lml(y @ y, r, A, len(y), w, noise * (1 - h), grad=False)[0]) / (2 * h * noise)
    assert abs(dnoise - fd) < 1e-6 * abs(fd)


def test_svd_lml_and_gradients_match_dense(small):
    X, y, grids, ls = small
    basis = GriefBasis(grids, ls, 20)
    Phi = basis.phi(X)
    A, r = basis.gram(X, y)
    s, V, uy = svd_transform(A, r)
    U = Phi @ V / s
    np.testing.assert_allclose(U.T @ U, np.eye(s.size), atol=1e-10)
    rho = uy**2
    rng = np.random.default_rng(6)
    w, noise = rng.uniform(0.3, 2.0, s.size), 0.05
    lml, dw, dnoise = svd_lml(y @ y, rho, len(y), w, noise)
    assert abs(lml - dense_lml(U @ np.diag(w) @ U.T, y, noise)) < RTOL * abs(lml)
    h = 1e-4                      # relative step: truncation and round-off both ~1e-9
    for k in [0, 5, s.size - 1]:
        e = np.zeros_like(w)
        e[k] = h * w[k]
        fd = (svd_lml(y @ y, rho, len(y), w + e, noise, False)[0]
              - svd_lml(y @ y, rho, len(y), w - e, noise, False)[0]) / (2 * e[k])
        assert abs(dw[k] - fd) < 1e-6 * abs(fd)
    fd = (svd_lml(y @ y, rho, len(y), w, noise * (1 + h), False)[0]
          - svd_lml(y @ y, rho, len(y), w, noise * (1 - h), False)[0]) / (2 * h * noise)
    assert abs(dnoise - fd) < 1e-6 * abs(fd)


def test_type2_lml_and_theta_gradient(small):
    """Every theta-gradient (lengthscales analytic through the 1-D eigenproblems) vs central FD."""
    X, y, grids, ls = small
    theta = np.concatenate([np.log(ls), [np.log(1.7), np.log(0.04)]])
    lml, g, basis, _, _ = type2_lml(theta, X, y, grids, 25)
    Phi = basis.phi(X)
    assert abs(lml - dense_lml(1.7 * Phi @ Phi.T, y, 0.04)) < RTOL * abs(lml)
    h = 1e-5
    for j in range(theta.size):
        e = np.zeros_like(theta)
        e[j] = h
        fd = (type2_lml(theta + e, X, y, grids, 25, idx=basis.idx, grad=False)[0]
              - type2_lml(theta - e, X, y, grids, 25, idx=basis.idx, grad=False)[0]) / (2 * h)
        assert abs(g[j] - fd) < 1e-6 * abs(fd), (j, g[j], fd)


def test_type2_gradient_blocks_and_threads(small, monkeypatch):
    """The row-block accumulation and the thread count do not change the gradient (bitwise)."""
    from hkern.grief import _basis
    X, y, grids, ls = small
    theta = np.concatenate([np.log(ls), [0.0, np.log(0.1)]])
    g1 = type2_lml(theta, X, y, grids, 25, n_threads=1)[1]
    g2 = type2_lml(theta, X, y, grids, 25, n_threads=2)[1]
    np.testing.assert_array_equal(g1, g2)
    monkeypatch.setattr(_basis, "BLOCK", 7)
    g3 = type2_lml(theta, X, y, grids, 25)[1]
    np.testing.assert_allclose(g3, g1, rtol=1e-10)


# -- the public model ---------------------------------------------------------------------------
def test_type2_predict_matches_dense_gp(small):
    X, y, _, _ = small
    y = 3.0 * y + 5.0
    gp = hkern.fit_grief(X, y, r=25, grid_size=[5, 4, 3], lengthscales=[0.8, 1.3, 0.6],
                         signal_variance=2.0, noise=0.3, optimize=False)
    rng = np.random.default_rng(2)
    Xt = rng.uniform(-1.5, 1.5, (10, 3))
    basis = gp._posterior.basis
    Phi, Pt = basis.phi(gp._standardise(X)), basis.phi(gp._standardise(Xt))
    s2, noise = gp.signal_variance_, gp.noise_                    # original units of y
    ym = y.mean()
    mean_ref, var_ref = dense_gp_posterior(s2 * Phi @ Phi.T, s2 * Pt @ Phi.T,
                                           s2 * np.sum(Pt**2, axis=1), y - ym, noise)
    mean_ref += ym
    mean, std = gp.predict(Xt, return_std=True)
    assert rel_max(mean, mean_ref) < RTOL
    assert rel_max(std**2, var_ref) < 1e-8        # a difference of two O(1) terms: cancellation
    _, std_y = gp.predict(Xt, return_std=True, include_noise=True)
    np.testing.assert_allclose(std_y**2, std**2 + noise, rtol=1e-14)
    lml_ref = dense_lml(s2 * Phi @ Phi.T, y - ym, noise)
    assert abs(gp.log_marginal_likelihood() - lml_ref) < RTOL * abs(lml_ref)
    np.testing.assert_allclose(gp.lengthscales_, [0.8, 1.3, 0.6], rtol=1e-14)


def test_type2_fit_improves_lml_and_is_deterministic():
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, (150, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.normal(size=150)
    gp0 = hkern.fit_grief(X, y, r=40, grid_size=8, seed=1, optimize=False)
    gp = hkern.fit_grief(X, y, r=40, grid_size=8, seed=1, max_iter=30)
    assert gp.log_marginal_likelihood() >= gp0.log_marginal_likelihood()
    truth = np.sin(2 * X[:, 0]) * np.cos(X[:, 1])
    assert np.sqrt(np.mean((gp.predict(X) - truth) ** 2)) < 0.05
    gp_b = hkern.fit_grief(X, y, r=40, grid_size=8, seed=1, max_iter=30, n_jobs=2)
    np.testing.assert_array_equal(gp.predict(X), gp_b.predict(X))


def _restart_data():
    rng = np.random.default_rng(11)
    X = rng.uniform(-2, 2, (160, 3))
    y = np.sin(3 * X[:, 0]) + 0.3 * X[:, 1] ** 2 + 0.1 * rng.normal(size=160)
    return X, y


def _lml_at(X, y, theta, **kw):
    """LML (original units) of the type-II model at standardised log-parameters theta."""
    xs, ys = X.std(axis=0), y.std()
    gp = hkern.fit_grief(X, y, lengthscales=np.exp(theta[:-2]) * xs,
                         signal_variance=np.exp(theta[-2]) * ys**2,
                         noise=np.exp(theta[-1]) * ys**2, optimize=False, **kw)
    return gp.log_marginal_likelihood()


def test_type2_restarts_keep_the_best_lml_and_are_deterministic():
    X, y = _restart_data()
    # Few iterations, so the searches end at different points and the selection matters.
    kw = {"r": 30, "grid_size": 6, "seed": 5, "max_iter": 4}
    gp = hkern.fit_grief(X, y, n_restarts=3, **kw)
    lmls = gp.restart_lmls_
    assert lmls.shape == (4,) and gp.restart_thetas_.shape == (4, 5)
    assert gp.restart_ == int(np.argmax(lmls))
    # The searches really end apart (otherwise the test checks nothing).
    assert np.ptp(gp.restart_thetas_[:, :3], axis=0).min() > 1e-3
    # Recorded LMLs are the LMLs of the models at the recorded parameters (1e-10 relative),
    # and the kept model is the best one.
    for theta, lml in zip(gp.restart_thetas_, lmls):
        assert abs(_lml_at(X, y, theta, r=30, grid_size=6) - lml) < RTOL * abs(lml)
    assert abs(gp.log_marginal_likelihood() - lmls.max()) < RTOL * abs(lmls.max())
    again = hkern.fit_grief(X, y, n_restarts=3, **kw)
    np.testing.assert_array_equal(again.restart_thetas_, gp.restart_thetas_)
    np.testing.assert_array_equal(again.predict(X), gp.predict(X))
    # n_restarts=0 is the paper's single search, which is also search 0 of a multi-start fit.
    single = hkern.fit_grief(X, y, n_restarts=0, **kw)
    np.testing.assert_array_equal(single.restart_thetas_[0], gp.restart_thetas_[0])
    assert single.restart_ == 0 and single.log_marginal_likelihood() <= lmls.max()


def test_type2_restarts_with_search_subset_compare_on_all_points():
    X, y = _restart_data()
    kw = {"r": 30, "grid_size": 6, "seed": 2, "max_iter": 15, "optimize_subset": 60}
    gp = hkern.fit_grief(X, y, n_restarts=2, **kw)
    for theta, lml in zip(gp.restart_thetas_, gp.restart_lmls_):
        assert abs(_lml_at(X, y, theta, r=30, grid_size=6) - lml) < RTOL * abs(lml)
    assert gp.restart_ == int(np.argmax(gp.restart_lmls_))
    assert np.isnan(hkern.fit_grief(X, y, n_restarts=0, **kw).restart_lmls_[0])


def test_n_iter_counts_the_lbfgsb_iterations_of_every_search(monkeypatch):
    import scipy.optimize

    from hkern.grief import _search
    X, y = _restart_data()
    counts = []

    def recording(fun, x0, **kwargs):
        result = scipy.optimize.minimize(fun, x0, **kwargs)
        if len(x0) > 2:         # a search over all d + 2 parameters, not the amplitude re-fit
            counts.append(result.nit)
        return result

    monkeypatch.setattr(_search, "minimize", recording)
    gp = hkern.fit_grief(X, y, r=30, grid_size=6, seed=5, max_iter=6, n_restarts=2)
    assert len(counts) == 3 and all(1 <= c <= 6 for c in counts)
    assert gp.restart_n_iter_.dtype.kind == "i"
    np.testing.assert_array_equal(gp.restart_n_iter_, counts)
    assert gp.n_iter_ == counts[gp.restart_] and isinstance(gp.n_iter_, int)
    # No search: no iteration.  Type I has no max_iter and no L-BFGS-B search: None.
    hyper = {"lengthscales": 1.0, "signal_variance": 1.0, "noise": 0.1}
    fixed = hkern.fit_grief(X, y, r=30, grid_size=6, optimize=False, **hyper)
    assert fixed.n_iter_ == 0 and list(fixed.restart_n_iter_) == [0]
    sampled = hkern.fit_grief(X, y, r=30, grid_size=6, seed=0, inference="type1", n_iter=200,
                              burn_in=100, thin=10, **hyper)
    assert sampled.n_iter_ is None and sampled.restart_n_iter_ is None


def test_model_attributes_are_declared_and_documented():
    # The constructor names every attribute (type-specific ones are None for the other
    # inference), and the docstring documents every public one.
    import inspect
    X, y = _restart_data()
    hyper = {"lengthscales": 1.0, "signal_variance": 1.0, "noise": 0.1}
    type2 = hkern.fit_grief(X, y, r=20, grid_size=6, max_iter=2, n_restarts=0, **hyper)
    type1 = hkern.fit_grief(X, y, r=20, grid_size=6, seed=0, inference="type1", n_iter=200,
                            burn_in=100, thin=10, **hyper)
    assert vars(type1).keys() == vars(type2).keys()
    params = inspect.signature(hkern.GriefGP).parameters
    assert all(p.kind == p.KEYWORD_ONLY for p in params.values())
    section = inspect.cleandoc(hkern.GriefGP.__doc__).split("Attributes\n----------\n")[1]
    documented = {name for line in section.splitlines() if " : " in line and line[0] != " "
                  for name in line.split(" : ")[0].split(", ")}
    # The argument of each attribute: its name without the trailing underscore (the root's
    # n_features for n_features_in_; p_ is the posterior basis's size).
    argument = {"n_features_in_": "n_features", "p_": "posterior"}
    for name, value in vars(type2).items():
        assert argument.get(name, name.strip("_")) in params, name
        if not name.startswith("_"):
            assert name in documented, name
        if value is None and name != "n_jobs":      # type I only
            assert getattr(type1, name) is not None, name
    assert type2.samples_ is None and type1.theta_ is None and type1.restart_ is None


def test_type1_mala():
    mu, s2 = lognormal_params(1.0, 100.0)
    assert abs(s2 - 1.2370) < 1e-4 and abs(mu - s2) < 1e-12          # spec section 4 numbers
    rng = np.random.default_rng(8)
    X = rng.uniform(-2, 2, (120, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=120)
    kw = {"r": 30, "grid_size": 8, "inference": "type1", "lengthscales": [1.0, 1.0],
          "signal_variance": 1.0,
              "noise": 0.02, "n_iter": 1500, "burn_in": 500, "thin": 10}
    gp = hkern.fit_grief(X, y, seed=3, **kw)
    assert gp.samples_.shape == (100, gp._posterior.s.size + 1)
    assert 0.3 < gp.acceptance_rate_ < 0.85
    # Prediction = average over samples of the dense GP mean with K~ = U~ W U~' + noise I.
    Xt = X[:7]
    Xs, Xts = gp._standardise(X), gp._standardise(Xt)
    U = gp._posterior.basis.phi(Xs) @ gp._posterior.V / gp._posterior.s
    Ut = gp._posterior.basis.phi(Xts) @ gp._posterior.V / gp._posterior.s
    ys = (y - y.mean()) / y.std()
    means = []
    for z in gp.samples_[::10]:
        w, noise = np.exp(z[:-1]), np.exp(z[-1])
        C = U @ np.diag(w) @ U.T + noise * np.eye(len(y))
        means.append(Ut @ np.diag(w) @ U.T @ np.linalg.solve(C, ys))
    gp_sub = np.mean([Ut @ gp._posterior.coef_samples[i] for i in range(0, 100, 10)], axis=0)
    assert rel_max(gp_sub, np.mean(means, axis=0)) < 1e-9
    assert np.sqrt(np.mean((gp.predict(X) - np.sin(X[:, 0])) ** 2)) < 0.1
    _mean, std = gp.predict(Xt, return_std=True)
    assert np.all(std > 0)
    again = hkern.fit_grief(X, y, seed=3, **kw)
    np.testing.assert_array_equal(again.samples_, gp.samples_)
    # The paper code's prior (mode 1 in the orthogonalised basis, spec 7.5): same checks.
    gk = hkern.fit_grief(X, y, seed=3, w_prior="unit", **kw)
    assert 0.3 < gk.acceptance_rate_ < 0.85
    assert np.sqrt(np.mean((gk.predict(X) - np.sin(X[:, 0])) ** 2)) < 0.1
    np.testing.assert_array_equal(hkern.fit_grief(X, y, seed=3, w_prior="unit", **kw).samples_,
                                  gk.samples_)
    assert not np.array_equal(gk.samples_, gp.samples_)


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,match", [
    ({"r": 0}, "r must be an integer >= 1"),
    ({"r": 2.5}, "r must be an integer"),
    ({"grid_size": 1}, "grid_size must be an integer >= 2"),
    ({"grid_size": [10, 1]}, r"grid_size\[1\] must be an integer >= 2"),
    ({"grid_size": [10, 10, 10]}, "grid_size has 3 entries"),
    ({"kernel": "laplace"}, "kernel must be 'gaussian'"),
    ({"inference": "type3"}, "inference must be one of"),
    ({"lengthscales": 1.0}, "give all of lengthscales"),
    ({"lengthscales": -1.0, "signal_variance": 1.0, "noise": 0.1}, "lengthscales must be"),
    ({"lengthscales": 1.0, "signal_variance": 1.0, "noise": 0.0},
     "noise must be None or a real number > 0, got 0.0"),
    ({"seed": -1}, "seed must be a non-negative"),
    ({"n_restarts": -1}, "n_restarts must be an integer >= 0"),
    ({"inference": "type1", "w_prior": "flat"}, "w_prior must be one of"),
])
def test_bad_arguments(kwargs, match):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=match):
        hkern.fit_grief(X, X[:, 0], **kwargs)


def test_bad_data():
    X = np.random.default_rng(0).normal(size=(20, 2))
    y = X[:, 0].copy()
    y[3] = np.nan
    with pytest.raises(ValueError, match="y contains NaN"):
        hkern.fit_grief(X, y)
    y[3] = np.inf
    with pytest.raises(ValueError, match="y contains infinity"):
        hkern.fit_grief(X, y)
    with pytest.raises(ValueError, match="every column of X is constant"):
        hkern.fit_grief(np.ones((20, 2)), X[:, 0])
    gp = hkern.fit_grief(X, X[:, 0], r=10, grid_size=4, seed=0, max_iter=3)
    with pytest.raises(ValueError, match="features"):
        gp.predict(np.ones((3, 5)))


def test_constant_column_is_ignored():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(60, 2))
    y = np.sin(X[:, 0]) + X[:, 1]
    X3 = np.column_stack([X[:, 0], np.full(60, 4.0), X[:, 1]])
    kw = {"r": 20, "grid_size": 6, "signal_variance": 1.0, "noise": 0.1, "optimize": False}
    gp3 = hkern.fit_grief(X3, y, lengthscales=[1.0, 1.0, 1.0], **kw)
    gp2 = hkern.fit_grief(X, y, lengthscales=[1.0, 1.0], **kw)
    np.testing.assert_array_equal(gp3.active_features_, [0, 2])
    assert np.isinf(gp3.lengthscales_[1])
    Xt = rng.normal(size=(5, 2))
    Xt3 = np.column_stack([Xt[:, 0], rng.normal(size=5), Xt[:, 1]])
    np.testing.assert_allclose(gp3.predict(Xt3), gp2.predict(Xt), rtol=1e-12)


def test_few_unique_values_cap_the_grid():
    X = np.column_stack([np.tile([0.0, 1.0, 2.0], 10), np.linspace(0, 1, 30)])
    grids = make_grids(X, [10, 10])
    np.testing.assert_array_equal(grids[0], [0.0, 1.0, 2.0])
    assert grids[1].size == 10
    gp = hkern.fit_grief(X, X[:, 1], r=1000, grid_size=10, lengthscales=1.0, signal_variance=1.0,
                         noise=0.1, optimize=False)
    assert gp.m_ == 30 and gp.p_ == 30                                 # p capped at m


def test_grid_inputs_widen_the_grid_and_nothing_else():
    """grid_inputs only move the grid: the grids span the standardised union of the training
    and the extra inputs, and the training inputs as grid_inputs change nothing."""
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (50, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    Xt = rng.uniform(-1, 2, (20, 2))
    kw = {"r": 30, "grid_size": 7, "lengthscales": 0.5, "signal_variance": 1.0, "noise": 0.01,
          "optimize": False}
    gp = hkern.fit_grief(X, y, **kw)
    wide = hkern.fit_grief(X, y, grid_inputs=Xt, **kw)
    same = hkern.fit_grief(X, y, grid_inputs=X[::3], **kw)
    Z = (np.vstack([X, Xt]) - X.mean(axis=0)) / X.std(axis=0)
    for i, g in enumerate(wide._posterior.basis.grids):
        np.testing.assert_allclose(g, np.linspace(Z[:, i].min(), Z[:, i].max(), 7), rtol=1e-14)
    np.testing.assert_array_equal(same.predict(Xt), gp.predict(Xt))
    assert wide.m_ == gp.m_ and not np.allclose(wide.predict(Xt), gp.predict(Xt))  # grid used
    with pytest.raises(ValueError, match="grid_inputs must have the 2 columns"):
        hkern.fit_grief(X, y, grid_inputs=Xt[:, :1], **kw)
    with pytest.raises(ValueError, match="grid_inputs contains NaN"):
        hkern.fit_grief(X, y, grid_inputs=np.full((2, 2), np.nan), **kw)


def test_unresolved_inputs_add_a_switched_off_search():
    """An initial lengthscale below the smallest gap of an input's grid flattens that input's
    1-D spectrum (mbar near-copies of every basis function compete for the p slots).  Then
    one more search runs from the same point with that input switched off, and the model kept
    is the search with the larger LML; resolved inputs add nothing."""
    from hkern.grief import _search
    from hkern.hyperparameters.exact_gp import BOUNDS
    rng = np.random.default_rng(6)
    n = 400
    x0 = rng.uniform(-2, 2, n)
    x1 = np.where(rng.random(n) < 0.02, 30.0, 0.0)            # sparse input, far outliers
    y = np.sin(2 * x0) + 0.05 * rng.normal(size=n)
    X = np.column_stack([x0, x1])
    grids = make_grids((X - X.mean(axis=0)) / X.std(axis=0), [10, 10])
    gap = np.min(np.diff(grids[1])) * X[:, 1].std()            # in the units of X
    assert gap > 2.0 * X[:, 1].std()                            # two values, far apart
    theta0 = np.array([0.0, np.log(0.5), 0.0, np.log(0.1)])
    off = _search.screened_start(theta0, grids)
    np.testing.assert_array_equal(off, [0.0, BOUNDS["log_ls"][1], 0.0, np.log(0.1)])
    assert _search.screened_start(np.array([0.0, np.log(50.0), 0.0, np.log(0.1)]), grids) is None
    kw = dict(r=20, grid_size=10, signal_variance=1.0, noise=0.01, n_restarts=0, max_iter=30,
              seed=0)
    gp = hkern.fit_grief(X, y, lengthscales=[1.0, 0.5 * X[:, 1].std()], **kw)
    assert gp.screened_ and len(gp.restart_lmls_) == 2
    assert gp.restart_thetas_[1][1] > np.log(100.0)            # the input stays off
    assert gp.restart_ == int(np.argmax(gp.restart_lmls_))
    assert gp.log_marginal_likelihood() == pytest.approx(gp.restart_lmls_.max(), rel=1e-10)
    assert gp.restart_lmls_[1] > gp.restart_lmls_[0]            # off is better here
    plain = hkern.fit_grief(X, y, lengthscales=[1.0, 50.0 * X[:, 1].std()], **kw)
    assert not plain.screened_ and len(plain.restart_lmls_) == 1

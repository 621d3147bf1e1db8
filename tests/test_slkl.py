"""SLKL (spec: doc/specs/slkl.md): the compiled state against dense references built from the
definitions, the fitted model against KRR with the learned kernel, and bad input."""
import numpy as np
import pytest
from hkern.slkl._core import SlklCore
from oracles import dense_kernel, rel_max, slkl_dense, slkl_G

import hkern
from hkern.slkl import STEPS
from hkern.slkl.api import descent_target

LAM, NU = 0.7, 0.05


def sinc_problem(n, seed, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-5, 5, size=(n, 2))
    r = np.linalg.norm(X, axis=1)
    return X, np.sin(r) / r + noise * rng.normal(size=n)


@pytest.fixture(scope="module")
def small():
    """n = 60 points, M = 25 candidates, the columns C (n, M) from the kernel's definition."""
    X, y = sinc_problem(60, 0)
    S = np.sort(np.random.default_rng(1).choice(60, 25, replace=False)).astype(np.intp)
    C = dense_kernel(X, X[S], sigma=1.0)
    return X, y, S, C


def make_core(small, step="exact", precompute=True, capacity=4, refresh=0, lam=LAM, nu=NU):
    X, y, S, C = small
    if precompute:
        extra = {"cols": np.ascontiguousarray(C.T)}
    else:
        extra = {"X": X, "xsq": np.einsum("ij,ij->i", X, X), "kind": 0, "sigma": 1.0}
    return SlklCore(y, lam, nu, STEPS[step], np.ones(len(S)), S, capacity=capacity,
                    refresh_every=refresh, **extra)


def check_state(core, small, tol=1e-12, lam=LAM, nu=NU):
    """G, a, b, F (tracked and from q, w) against their dense definitions."""
    _, y, _, C = small
    mu = core.weights
    act = core.active
    assert np.array_equal(np.sort(act), np.flatnonzero(mu > 0))
    if len(act):
        G_ref = slkl_G(C, mu, act, lam)
        assert np.abs(core.G_matrix - G_ref).max() <= tol * max(1.0, np.abs(G_ref).max())
        assert np.abs(core.C_matrix - C[:, act]).max() <= tol
    a_ref, b_ref, F_ref, _ = slkl_dense(C, mu, y, lam, nu)
    ab = np.array([core.ab(m) for m in range(len(mu))])
    assert np.abs(ab[:, 0] - a_ref).max() <= tol * max(1.0, np.abs(a_ref).max())
    assert np.abs(ab[:, 1] - b_ref).max() <= tol * max(1.0, b_ref.max())
    assert abs(core.F - F_ref) <= tol * F_ref
    assert abs(core.objective_direct() - F_ref) <= tol * F_ref
    return F_ref


# ---------------------------------------------------------------- the four updates of G (spec 2)

@pytest.mark.parametrize("precompute", [True, False])
def test_each_update_case_equals_direct_inversion(small, precompute):
    """Every case, many times, from varied states, without any refresh: G equals
    (D^-1 + C^T C / lam)^-1 and a, b, F equal their dense formulas to 1e-12."""
    core = make_core(small, precompute=precompute, capacity=2)
    rng = np.random.default_rng(2)
    seen = {1: 0, 2: 0, 3: 0, 4: 0}
    M = len(small[2])
    for _ in range(160):
        m = int(rng.integers(M))
        new = 0.0 if rng.random() < 0.3 else float(rng.uniform(0.05, 3.0))
        old = core.weights[m]
        case = core.set_weight(m, new)
        expected = 1 if old == 0 and new == 0 else 2 if old > 0 and new > 0 else \
            3 if old > 0 else 4
        assert case == expected
        seen[case] += 1
        check_state(core, small)
    assert core.n_refreshes == 0          # no refresh hid any drift
    assert min(seen.values()) >= 10, seen
    assert core.cap >= core.m0 and core.cap > 2    # the capacity grew


def test_swap_delete_keeps_bookkeeping(small):
    """Removing the first, a middle and the last active column keeps pos/act consistent."""
    core = make_core(small, capacity=25)
    for m in range(8):
        core.set_weight(m, 1.0 + m)
    for m in (0, 4, 7):
        assert core.set_weight(m, 0.0) == 3
        check_state(core, small)
    assert sorted(core.active) == [1, 2, 3, 5, 6]


def test_refresh_equals_updates(small):
    core = make_core(small)
    rng = np.random.default_rng(3)
    for _ in range(40):
        core.set_weight(int(rng.integers(25)), float(rng.uniform(0, 2)))
    G_updated, F_updated = core.G_matrix, core.F
    assert core.refresh() == 0
    assert np.abs(core.G_matrix - G_updated).max() <= 1e-12
    assert abs(core.F - F_updated) <= 1e-12 * F_updated
    check_state(core, small)


def test_periodic_refresh_keeps_state_exact(small):
    core = make_core(small, refresh=7)
    rng = np.random.default_rng(4)
    for _ in range(50):
        core.step(int(rng.integers(25)))
    assert core.n_refreshes >= 1
    check_state(core, small)


# ---------------------------------------------------------------- coordinate steps (spec 2, 5 A/B)

def test_exact_step_never_increases_F(small):
    """Over 600 random coordinate steps from many states: the dense F never increases (beyond
    1e-13 relative rounding), the tracked F matches it, and the step is the coordinate argmin."""
    _, y, _, C = small
    core = make_core(small, refresh=0)
    rng = np.random.default_rng(5)
    F_prev = slkl_dense(C, core.weights, y, LAM, NU)[2]
    moved = 0
    for _ in range(600):
        m = int(rng.integers(25))
        before = core.weights
        core.step(m)
        mu = core.weights
        F = slkl_dense(C, mu, y, LAM, NU)[2]
        assert F <= F_prev * (1 + 1e-13)
        assert abs(core.F - F) <= 1e-12 * F
        if mu[m] != before[m]:
            moved += 1
            for eps in (1e-4, -1e-4):           # neighbours along the coordinate are not lower
                trial = mu.copy()
                trial[m] = max(0.0, trial[m] + eps * max(mu[m], 1.0))
                assert slkl_dense(C, trial, y, LAM, NU)[2] >= F * (1 - 1e-13)
        F_prev = F
    assert moved > 50


@pytest.mark.parametrize("step", ["exact", "newton", "paper"])
def test_step_formulas(small, step):
    """The new weight is the spec's formula for the step rule, from the dense a and b."""
    _, y, _, C = small
    core = make_core(small, step=step)
    rng = np.random.default_rng(6)
    for _ in range(60):
        m = int(rng.integers(25))
        mu = core.weights
        a, b, _, _ = slkl_dense(C, mu, y, LAM, NU)
        a, b = a[m], b[m]
        if step == "exact":
            expected = mu[m] + (abs(a) * np.sqrt(LAM / NU) - 1) / b
        else:
            h = (2.0 if step == "newton" else 1.0) * LAM * a * a * b
            expected = mu[m] + (LAM * a * a - NU) / h
        expected = max(0.0, expected)
        if expected * b <= 1e-12:
            expected = 0.0
        core.step(m)
        assert abs(core.weights[m] - expected) <= 1e-10 * max(1.0, expected)


def test_final_weights_satisfy_kkt():
    """Run to the KKT test; the dense a_m give |lam a^2 - nu| <= 1e-6 on active and
    lam a^2 - nu <= 1e-6 on inactive candidates (nu the absolute penalty: fit_slkl's nu and
    kkt_tol are relative to the mean square of the descent's target t, the centred y on a grid
    of 2^-10 of its scale, which the descent fits; nu = NU up to that rounding)."""
    X, y = sinc_problem(120, 7)
    ms = np.mean((y - y.mean()) ** 2)
    model = hkern.fit_slkl(X, y, r=40, nu=NU / ms, lam=LAM, tol=None, kkt_tol=1e-8 / ms,
                           max_iter=200_000, seed=3, sigma=1.0)
    assert model.converged_.tolist() == [True]
    mu, F = model.weights_[:, 0], model.objective_[:, 0]      # the one output's column
    C = dense_kernel(X, X[model.candidates_], sigma=1.0)
    s, t = descent_target(y - y.mean())
    t = s * t
    nu = NU / ms * np.mean(t ** 2)
    a, _, _, _ = slkl_dense(C, mu, t, LAM, nu)
    g = LAM * a ** 2 - nu
    active = mu > 0
    assert 0 < active.sum() < 40
    assert np.abs(g[active]).max() <= 1e-6
    assert g[~active].max() <= 1e-6
    assert len(F) == model.n_iter_[0] + 1
    assert np.all(np.diff(F) <= 1e-13 * F[0])


# ---------------------------------------------------------------- the model

def test_prediction_equals_krr_with_learned_kernel():
    """predict(X*) = mean(y) + K~(X*, X) (K~(X, X) + lam I)^{-1} (y - mean(y)),
    with K~ = sum_m mu_m k(., x_m) k(x_m, .)."""
    X, y = sinc_problem(150, 8)
    Xt, _ = sinc_problem(40, 9)
    model = hkern.fit_slkl(X, y, r=60, nu=0.01, lam=LAM, sigma=1.2, seed=4)
    mu, S = model.weights_[:, 0], model.candidates_
    Kt = (dense_kernel(Xt, X[S], sigma=1.2) * mu) @ dense_kernel(X[S], X, sigma=1.2)
    K = (dense_kernel(X, X[S], sigma=1.2) * mu) @ dense_kernel(X[S], X, sigma=1.2)
    ref = y.mean() + Kt @ np.linalg.solve(K + LAM * np.eye(150), y - y.mean())
    pred = model.predict(Xt)
    assert rel_max(pred, ref) <= 1e-10
    assert np.array_equal(model.active_, S[mu > 0])
    assert model.landmarks_.shape == (model.m0_, 2) and model.m0_ < 60


def test_seed_and_column_modes():
    X, y = sinc_problem(200, 10)
    kw = {"r": 80, "nu": 0.01, "sigma": 1.0, "lam": 1.0, "seed": 5}
    a = hkern.fit_slkl(X, y, **kw)
    b = hkern.fit_slkl(X, y, **kw)
    c = hkern.fit_slkl(X, y, precompute_columns=False, **kw)
    d = hkern.fit_slkl(X, y, **{**kw, "seed": np.random.default_rng(5)})
    assert np.array_equal(a.weights_, b.weights_) and np.array_equal(a.weights_, d.weights_)
    assert np.array_equal(a.objective_, b.objective_)
    # on-the-fly columns: same draws, same decisions; values equal up to column rounding
    assert np.array_equal(c.n_iter_, a.n_iter_) and np.array_equal(c.active_, a.active_)
    assert np.abs(c.weights_ - a.weights_).max() <= 1e-9 * a.weights_.max()


def test_pivotal_hyperparameter():
    """Prop. 3: the predictor depends on (lam, nu) only through lam * nu."""
    X, y = sinc_problem(150, 11)
    a = hkern.fit_slkl(X, y, r=50, nu=0.02, lam=1.0, seed=6, sigma=1.0)
    b = hkern.fit_slkl(X, y, r=50, nu=0.01, lam=2.0, seed=6, sigma=1.0)
    assert np.array_equal(a.active_, b.active_)
    assert np.allclose(b.weights_, 2.0 * a.weights_, rtol=1e-9, atol=0)
    assert np.allclose(a.predict(X), b.predict(X), rtol=0, atol=1e-10)


def test_unif_and_krrm_baselines():
    X, y = sinc_problem(120, 12)
    Xt, _ = sinc_problem(30, 13)
    unif = hkern.fit_slkl_unif(X, y, r=40, mu=0.5, lam=LAM, seed=7, sigma=1.0)
    slkl = hkern.fit_slkl(X, y, r=40, nu=NU, lam=LAM, seed=7, sigma=1.0)
    krrm = hkern.fit_slkl_krrm(X, y, r=40, lam=LAM, seed=7, sigma=1.0)
    S = slkl.candidates_
    assert np.array_equal(unif.candidates_, S) and np.array_equal(krrm.candidates_, S)
    C, Ct = dense_kernel(X, X[S], sigma=1.0), dense_kernel(Xt, X[S], sigma=1.0)
    ref = y.mean() + 0.5 * Ct @ C.T @ np.linalg.solve(0.5 * C @ C.T + LAM * np.eye(120),
                                                      y - y.mean())
    assert rel_max(unif.predict(Xt), ref) <= 1e-10
    assert unif.m0_ == 40 and np.all(unif.weights_ == 0.5)
    Kss = dense_kernel(X[S], X[S], sigma=1.0)
    # (KRR on the candidates is fit_exact's model: their mean plus the GP of y[S] - mean)
    ref_m = y[S].mean() + Ct @ np.linalg.solve(Kss + LAM * np.eye(40), y[S] - y[S].mean())
    assert rel_max(krrm.predict(Xt), ref_m) <= 1e-10


def test_classification_one_vs_rest():
    rng = np.random.default_rng(14)
    centres = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    labels = rng.integers(3, size=240)
    X = centres[labels] + 0.7 * rng.normal(size=(240, 2))
    names = np.array(["a", "b", "c"])[labels]
    model = hkern.fit_slkl(X, names, r=60, nu=0.05, task="classification", seed=8, sigma=1.0,
                           lam=1.0)
    assert model.weights_.shape == (60, 3) and model.objective_.shape[1] == 3
    assert model.n_iter_.shape == model.converged_.shape == (3,)
    # each class's column of F runs to its own n_iter_, NaN after it
    for j in range(3):
        F = model.objective_[:, j]
        assert np.all(np.isfinite(F[:model.n_iter_[j] + 1]))
        assert np.all(np.isnan(F[model.n_iter_[j] + 1:]))
    assert list(model.classes_) == ["a", "b", "c"]
    assert np.mean(model.predict(X) == names) > 0.95
    # the union of active landmarks carries every class's beta
    used = np.flatnonzero((model.weights_ > 0).any(axis=1))
    assert np.array_equal(model.active_, model.candidates_[used])


def test_all_candidates_and_explicit_candidates():
    X, y = sinc_problem(50, 15)
    full = hkern.fit_slkl(X, y, r=50, seed=0, sigma=1.0, lam=1.0)
    assert np.array_equal(full.candidates_, np.arange(50))
    given = hkern.fit_slkl(X, y, candidates=[5, 1, 9, 30], seed=0, sigma=1.0, lam=1.0)
    assert np.array_equal(given.candidates_, [1, 5, 9, 30])


# ---------------------------------------------------------------- bad input

X_BAD, Y_BAD = sinc_problem(20, 16)


@pytest.mark.parametrize("kwargs, message", [
    ({"nu": 0.0}, "nu must be a real number > 0"),
    ({"nu": -1.0}, "nu must be a real number > 0"),
    ({"lam": 0.0}, "lam must be a real number > 0"),
    ({"lam": -0.5}, "lam must be a real number > 0"),
    ({"r": 0}, "r must be an integer >= 1"),
    ({"step": "gradient"}, "step must be one of"),
    ({"tol": -1e-4}, "tol must be None or a real number > 0"),
    ({"kkt_tol": 0.0}, "kkt_tol must be None or a real number > 0"),
    ({"max_iter": 0}, "max_iter must be None or an integer >= 1"),
    ({"refresh": -1}, "refresh must be an integer >= 0"),
    ({"sigma": 0.0}, "sigma must be a real number > 0"),
    ({"candidates": [1, 1, 2]}, "repeated"),
    ({"candidates": [0, 20]}, "candidates must index rows"),
    ({"seed": -1}, "seed must be a non-negative"),
])
def test_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hkern.fit_slkl(X_BAD, Y_BAD, **{"r": 10, **kwargs})


@pytest.mark.parametrize("fit", [hkern.fit_slkl_unif, hkern.fit_slkl_krrm])
def test_bad_input_baselines(fit):
    with pytest.raises(ValueError, match="lam must be a real number > 0"):
        fit(X_BAD, Y_BAD, r=5, lam=0.0)
    with pytest.warns(UserWarning, match="r=30 is larger than the number of training samples "
                                         "n=20; using r=20"):
        assert len(fit(X_BAD, Y_BAD, r=30).candidates_) == 20
    with pytest.raises(ValueError, match="y has 19 rows"):
        fit(X_BAD, Y_BAD[:19], r=5)


def test_predict_checks_features():
    model = hkern.fit_slkl(X_BAD, Y_BAD, r=10, seed=0, sigma=1.0, lam=1.0)
    with pytest.raises(ValueError, match="features"):
        model.predict(np.zeros((3, 5)))

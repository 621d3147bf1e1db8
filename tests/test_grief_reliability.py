"""GP-GRIEF under hostile inputs (issue 16): type-I sampling on small problems, the MALA
schedule, data of extreme magnitude, constant and tiny columns, input checks, read-only
inputs, thread limits, determinism across n_jobs and the memory guard.

GRIEF standardises X and y, so the model of c X (or c y) must be the model of X (or c times
the model of y); with c a power of two the standardised data are the same bits.
"""
import time

import numpy as np
import pytest
import threadpoolctl
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_probe import assert_estimate_close
from reliability_helpers import hostile_data, record_blas_threads

import hkern
from hkern._memory import MemoryLimitError
from hkern.grief import _mala
from hkern.grief._lml import plain_lml, svd_lml

FAST = {"r": 20, "grid_size": 6, "max_iter": 5, "n_restarts": 0, "seed": 0}
MALA = {"n_iter": 400, "burn_in": 100, "thin": 10}


def data(n=80, d=2, seed=0, noise=0.05):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(X[:, 0]) + noise * rng.normal(size=n)


# ------------------------------------------------------------------ defect 10: type I


def small_problem(seed):
    """A random small problem of the issue's sweep (n < 40, d <= 3, targets of any scale)."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(3, 40)), int(rng.integers(1, 4))
    X = rng.normal(size=(n, d))
    y = rng.normal(size=n) * 10 ** rng.uniform(-3, 3)
    if rng.uniform() < 0.5:
        y = np.sin(X[:, 0]) + 1e-3 * rng.normal(size=n)
    return X, y, int(rng.integers(1, 30)), int(rng.integers(2, 8))


@pytest.mark.parametrize("seed", [0, 8, 14, 23])
def test_type1_on_small_problems_gives_finite_results(seed):
    # On these the first MALA proposals jump far into the tail of log(noise) (the gradient at
    # the prior mode is large); the square of exp(log noise) raised OverflowError in svd_lml.
    # Such a proposal has zero acceptance probability and must simply be rejected.
    X, y, p, grid_size = small_problem(seed)
    gp = hkern.fit_grief(X, y, r=p, grid_size=grid_size, inference="type1", seed=seed,
                         n_iter=500, burn_in=100, thin=10)
    mean, std = gp.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std >= 0)
    assert np.isfinite(gp.log_marginal_likelihood())
    assert gp.samples_.shape == (40, gp._posterior.s.size + 1) and np.all(np.isfinite(gp.samples_))
    assert 0.0 < gp.acceptance_rate_ < 1.0


def test_likelihoods_do_not_raise_when_the_noise_overflows():
    rho, yy, n = np.array([0.5, 0.2]), 1.0, 10
    with np.errstate(over="ignore"):        # the derivative in the noise does overflow
        lml, dw, dnoise = svd_lml(yy, rho, n, np.ones(2), 1e200)
        assert np.isfinite(lml) and np.isfinite(dw).all()
        A, r = np.eye(2), np.array([0.3, 0.1])
        lml, *_ = plain_lml(yy, r, A, n, np.ones(2), 1e200)
        assert np.isfinite(lml)
    # the sampler's target: a proposal beyond double precision is reported as impossible
    mu, s2 = np.zeros(3), np.ones(3)
    for z in ([0.0, 0.0, 800.0], [0.0, 0.0, -800.0], [800.0, 0.0, 0.0]):
        logp, grad = _mala._log_target(np.array(z), yy, rho, n, mu, s2)
        assert logp == -np.inf and grad is None
    logp, grad = _mala._log_target(np.zeros(3), yy, rho, n, mu, s2)
    assert np.isfinite(logp) and np.isfinite(grad).all()


def test_mala_schedule_is_checked_up_front():
    X, y = data(30)
    with pytest.raises(ValueError, match="thin"):
        hkern.fit_grief(X, y, r=5, inference="type1", n_iter=200, burn_in=100, thin=500)
    with pytest.raises(ValueError, match="burn_in"):
        hkern.fit_grief(X, y, r=5, inference="type1", n_iter=200, burn_in=200)
    with pytest.raises(ValueError, match="n_iter"):
        hkern.fit_grief(X, y, r=5, inference="type1", n_iter=0)
    with pytest.raises(ValueError, match="thin"):
        hkern.fit_grief(X, y, r=5, inference="type1", thin=0)
    with pytest.raises(ValueError, match="optimize"):
        hkern.fit_grief(X, y, r=5, optimize="no")
    # thin = n_iter - burn_in keeps exactly one sample
    gp = hkern.fit_grief(X, y, r=5, inference="type1", n_iter=200, burn_in=100, thin=100,
                         seed=0)
    assert gp.samples_.shape[0] == 1 and np.all(np.isfinite(gp.predict(X)))


def test_type1_noise_outside_the_search_box_is_refused():
    X, y = data(30)
    kw = {"r": 5, "inference": "type1", "lengthscales": 1.0, "signal_variance": 1.0, **MALA}
    for noise in (1e-300, 1e30):
        with pytest.raises(ValueError, match="noise"):
            hkern.fit_grief(X, y, noise=noise * y.var(), **kw)
    with pytest.raises(ValueError, match="lengthscales must be one positive number or 2"):
        hkern.fit_grief(X, y, noise=0.1, **{**kw, "lengthscales": [1.0, 2.0, 3.0]})


# ------------------------------------------------------------------ defect 9: magnitudes


def test_given_hyperparameters_beyond_double_precision_are_refused():
    # y ~ 1e-200: var(y) ~ 1e-400 is not a double, so no signal_variance in y^2 units can be
    # passed (it was divided by an underflowed 0, or std(y) = 0 was replaced by 1 silently).
    X, y = data()
    with pytest.raises(ValueError, match="signal_variance or noise"):
        hkern.fit_grief(X, y * 1e-200, r=10, lengthscales=1.0, signal_variance=1e-300,
                        noise=1e-302, optimize=False)
    gp = hkern.fit_grief(X, y * 1e-100, r=10, lengthscales=1.0, signal_variance=1e-200,
                         noise=1e-202, optimize=False)
    ref = hkern.fit_grief(X, y, r=10, lengthscales=1.0, signal_variance=1.0, noise=0.01,
                          optimize=False)
    np.testing.assert_allclose(gp.predict(X) * 1e100, ref.predict(X), rtol=1e-12, atol=1e-12)



@pytest.mark.parametrize("k", [495, -560, -1000])
def test_inputs_scaled_by_a_power_of_two_give_the_same_model(k):
    # 2^495 ~ 1e149, 2^-560 ~ 3e-169, 2^-1000 ~ 9e-302: the standardised inputs are the same
    # bits.  Data below 1e-154 had a standard deviation of 0 (squares underflow) and were
    # refused as constant.
    X, y = data()
    ref = hkern.fit_grief(X, y, **FAST)
    gp = hkern.fit_grief(X * 2.0**k, y, **FAST)
    np.testing.assert_array_equal(gp.predict(X * 2.0**k, return_std=True),
                                  ref.predict(X, return_std=True))
    np.testing.assert_allclose(gp.lengthscales_, ref.lengthscales_ * 2.0**k, rtol=1e-14)
    assert gp.log_marginal_likelihood() == ref.log_marginal_likelihood()


@pytest.mark.parametrize("k", [495, -500, -1000])
def test_targets_scaled_by_a_power_of_two_scale_the_predictions(k):
    X, y = data()
    for inference in ("type2", "type1"):
        kw = {**FAST, "inference": inference, **MALA}
        ref = hkern.fit_grief(X, y, **kw)
        gp = hkern.fit_grief(X, y * 2.0**k, **kw)
        mean, std = gp.predict(X, return_std=True)
        ref_mean, ref_std = ref.predict(X, return_std=True)
        np.testing.assert_array_equal(mean, ref_mean * 2.0**k)
        # standard deviations are in y's units (formed in standardised units, then scaled:
        # the variance 2^-2000 var would underflow), so they scale exactly too
        np.testing.assert_array_equal(std, ref_std * 2.0**k)


@pytest.mark.parametrize("scale", [1e149, 1e-150])
def test_inputs_at_the_bounds_of_the_accepted_range(scale):
    # Not a power of two: the standardised inputs differ from those of X by rounding only.
    X, y = data()
    kw = {"r": 20, "grid_size": 6, "lengthscales": [0.8, 1.2], "signal_variance": 1.0,
          "noise": 0.01, "optimize": False}
    ref = hkern.fit_grief(X, y, **kw)
    gp = hkern.fit_grief(X * scale, y, **{**kw, "lengthscales": [0.8 * scale, 1.2 * scale]})
    np.testing.assert_allclose(gp.predict(X * scale), ref.predict(X), rtol=0, atol=1e-9)
    gp = hkern.fit_grief(X * scale, y, **FAST)
    assert np.sqrt(np.mean((gp.predict(X * scale) - np.sin(X[:, 0])) ** 2)) < 0.1


def test_constant_and_tiny_columns():
    X, y = data()
    ref = hkern.fit_grief(X, y, **FAST)
    # a constant column far from 0: the rounding of its mean gave it a standard deviation of
    # 1e84, a one-point grid and "zero-size array to reduction operation minimum"
    Xc = np.column_stack([np.full(len(X), 3e100), X])
    gp = hkern.fit_grief(Xc, y, **FAST)
    assert list(gp.active_features_) == [1, 2] and gp.lengthscales_[0] == np.inf
    np.testing.assert_array_equal(gp.predict(Xc), ref.predict(X))
    # a varying column of size 1e-300 is an input like any other (it was taken for constant)
    Xt = np.column_stack([X[:, 0], X[:, 1] * 2.0**-1000])
    gp = hkern.fit_grief(Xt, y, **FAST)
    assert list(gp.active_features_) == [0, 1]
    np.testing.assert_array_equal(gp.predict(Xt), ref.predict(X))


def test_duplicated_points_and_far_prediction_points():
    X, y = data(20)
    Xd, yd = np.repeat(X, 5, axis=0), np.repeat(y, 5)
    gp = hkern.fit_grief(Xd, yd, **FAST)
    mean, std = gp.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std >= 0)
    # points 1e150 standard deviations away get the prior mean and variance, not NaN
    tiny = hkern.fit_grief(X * 1e-150, y, **FAST)
    mean, std = tiny.predict(np.full((3, 2), 1e150), return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std))
    np.testing.assert_allclose(mean, y.mean(), rtol=1e-12)


# ------------------------------------------------------------------ defects 12 and 6: inputs


def test_predict_checks_its_input_and_converts_layouts(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = data()
    gp = hkern.fit_grief(X, y, **FAST)
    ref = gp.predict(X, return_std=True)
    np.save(tmp_path / "X.npy", X)
    for variant in (np.asfortranarray(X), np.load(tmp_path / "X.npy", mmap_mode="r"),
                    pd.DataFrame(X), np.repeat(X, 2, axis=1)[:, ::2]):
        np.testing.assert_array_equal(gp.predict(variant, return_std=True), ref)
    X32 = X.astype(np.float32)
    np.testing.assert_array_equal(gp.predict(X32), gp.predict(X32.astype(np.float64)))
    for bad, match in [(np.where(X > 1, np.nan, X), "NaN"), (X[:, :1], "features"),
                       (X[0], "2-D")]:
        with pytest.raises(ValueError, match=match):
            gp.predict(bad)
    for flag in ("return_std", "include_noise"):
        with pytest.raises(ValueError, match=flag):
            gp.predict(X, **{flag: "yes"})


def test_read_only_and_pandas_training_data(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = data()
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    Xr, yr = np.load(tmp_path / "X.npy", mmap_mode="r"), np.load(tmp_path / "y.npy", mmap_mode="r")
    for inference in ("type2", "type1"):
        kw = {**FAST, "inference": inference, **MALA}
        ref = hkern.fit_grief(X, y, **kw).predict(X)
        for Xa, ya in ((Xr, yr), (pd.DataFrame(X), pd.Series(y))):
            np.testing.assert_array_equal(hkern.fit_grief(Xa, ya, grid_inputs=Xr, **kw)
                                          .predict(X),
                                          hkern.fit_grief(X, y, grid_inputs=X, **kw).predict(X))
            np.testing.assert_array_equal(hkern.fit_grief(Xa, ya, **kw).predict(Xr), ref)


# ------------------------------------------------------------------ defect 7: thread limits


def test_n_jobs_bounds_blas_threads_in_fit_and_predict(monkeypatch):
    import scipy.optimize

    from hkern.grief import _lml, _search, _type2
    from hkern.hyperparameters import exact_gp
    X, y = data(300, 3)
    seen = record_blas_threads(monkeypatch, [
        (np.linalg, "eigh"), (_search, "minimize"), (exact_gp, "minimize"), (_type2, "plain_lml"),
        (_lml, "svd_transform"), (_search, "type2_lml"), (_mala, "svd_lml")])
    assert scipy.optimize.minimize is not _search.minimize
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        gp2 = hkern.fit_grief(X, y, r=40, grid_size=8, seed=0, max_iter=3, n_jobs=1)
        gp1 = hkern.fit_grief(X, y, r=40, grid_size=8, seed=0, inference="type1", n_jobs=1,
                              **MALA)
        n_fit = len(seen)
        gp2.predict(X, return_std=True)
        gp1.predict(X, return_std=True)
    assert n_fit > 20 and set(seen) == {1}, seen


# ------------------------------------------------------------------ determinism


def test_fits_are_bitwise_identical_for_any_n_jobs():
    # Large enough for OpenBLAS to split its work between threads (two blocks of Phi, a
    # 300 x 300 eigendecomposition for type I).
    X, y = data(4500, 3, noise=0.1)
    kw = {"r": 300, "grid_size": 10, "seed": 0, "init_subset": 200}
    runs = {}
    for n_jobs in (1, 2):
        a = hkern.fit_grief(X, y, max_iter=2, n_restarts=0, n_jobs=n_jobs, **kw)
        b = hkern.fit_grief(X, y, inference="type1", n_iter=200, burn_in=100, thin=10,
                            n_jobs=n_jobs, **kw)
        runs[n_jobs] = [a.theta_, *a.predict(X, return_std=True), b.samples_,
                        *b.predict(X, return_std=True)]
    for one, two in zip(runs[1], runs[2]):
        np.testing.assert_array_equal(one, two)


# ------------------------------------------------------------------ defect 11: memory guard

SETUP = """
rng = np.random.default_rng(0)
X = rng.uniform(-2, 2, size=({n}, 3))
y = np.sin(X[:, 0]) + 0.1 * rng.normal(size={n})
HYPER = dict(lengthscales=1.0, signal_variance=1.0, noise=0.1)
"""


@pytest.mark.parametrize("n, call", [
    (3000, "hkern.fit_grief(X, y, r=1000, grid_size=12, max_iter=1, n_restarts=0, **HYPER)"),
    (8000, "hkern.fit_grief(X, y, r=1500, grid_size=12, optimize=False, **HYPER)"),
    (8000, "hkern.fit_grief(X, y, r=1500, grid_size=12, inference='type1', n_iter=200, "
           "burn_in=100, thin=1, **HYPER)"),
])
def test_fit_grief_memory_estimate_matches_peak_rss(n, call):
    assert_estimate_close(SETUP.format(n=n), call)


def test_too_small_max_memory_is_refused_before_any_work():
    X, y = data(50_000, 3)
    start = time.perf_counter()
    with pytest.raises(MemoryLimitError, match="smaller r") as info:
        hkern.fit_grief(X, y, r=5000, grid_size=20, max_memory=100 * 2**20)
    assert time.perf_counter() - start < 1.0
    assert "n=50000" in str(info.value) and "max_memory" in str(info.value)
    with pytest.raises(ValueError, match="max_memory"):
        hkern.fit_grief(X[:50], y[:50], r=5, max_memory=0)


# ------------------------------------------------------------------ property: any input


@settings(max_examples=25, deadline=None)
@given(data=hostile_data(), y_exp=st.integers(-150, 149),
       inference=st.sampled_from(["type2", "type1"]), p=st.integers(1, 30),
       grid_size=st.integers(2, 8))
def test_fit_grief_gives_finite_results_or_a_value_error(data, y_exp, inference, p, grid_size):
    X, _, rng = data
    n = X.shape[0]
    if n < 2:
        return
    y = rng.normal(size=n) * 10.0**y_exp
    try:
        gp = hkern.fit_grief(X, y, r=p, grid_size=grid_size, inference=inference, seed=0,
                             max_iter=5, n_restarts=1, init_subset=30, **MALA)
    except ValueError as exc:
        assert "constant" in str(exc)          # the only refusal these inputs deserve
        assert np.all(X == X[0])
        return
    mean, std = gp.predict(X, return_std=True)
    assert mean.shape == std.shape == (n,)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(std)) and np.all(std >= 0)
    assert np.isfinite(gp.log_marginal_likelihood())

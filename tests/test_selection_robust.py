"""Hyperparameter selection on awkward data (hkern/hyperparameters/robust.py): one outlying row,
constant, nearly constant and binary features, targets of zeros, hold-out fits with r close
to n, and sharded fits asking for a selection.  Each case is a regression test of a reported
failure, checked against an explicit reference: a fit at known good numbers, the statistics
computed here with numpy, the message of the fit without selection."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import hkern
from hkern.hyperparameters import exact_gp
from hkern.hyperparameters.robust import LengthscaleBounds, feature_scales
from hkern.slkl import fit_slkl_krrm, fit_slkl_unif
from hkern.slkl._candidates import holdout_rows

# Every kernel ridge fit with selection, small enough for 60-100 rows.
FITS = {
    "exact": (hkern.fit_exact, {}),
    "nystrom": (hkern.fit_nystrom, {"r": 40}),
    "rff": (hkern.fit_rff, {"r": 60}),
    "hierarchical": (hkern.fit_hierarchical, {"r": 16}),
    "independent": (hkern.fit_independent, {"r": 16}),
    "meka": (hkern.fit_meka, {"r": 8, "n_clusters": 3}),
    "slkl": (hkern.fit_slkl, {"r": 20, "max_iter": 200}),
    "slkl_unif": (fit_slkl_unif, {"r": 20}),
    "slkl_krrm": (fit_slkl_krrm, {"r": 20}),
}
HOLDOUT = ["meka", "slkl", "slkl_unif", "slkl_krrm"]
OFF = exact_gp.OFF_FACTOR
SMALLEST = float(np.exp(exact_gp.BOUNDS["log_ls"][0]))     # 1e-3 robust spreads


def rmse(model, X, y):
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def sine(n=60, seed=0):
    """The reported problem: y = sin(x_0) + noise on three standard normal features."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=n)


TEST = np.random.default_rng(1).normal(size=(500, 3))


# --------------------------------------------------------------------------------------------
# 1. One outlying row
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(FITS))
def test_one_outlying_row_does_not_set_the_bandwidth(name):
    """X[0, 1] = 1e6 made the mean/std standardisation's common scale 7.4e4: fit_exact chose
    sigma 4504, lam 3021 and predicted about 0 everywhere (test RMSE 0.66 against 0.11)."""
    fit, kw = FITS[name]
    X, y = sine()
    X[0, 1] = 1e6
    good = fit(X, y, sigma=2.0, lam=1e-2, seed=0, n_jobs=1, **kw)
    model = fit(X, y, sigma="auto", lam="auto", seed=0, n_jobs=1, **kw)
    assert 0.5 < model.sigma_ < 5.0, model.selection_.summary()
    assert rmse(model, TEST, np.sin(TEST[:, 0])) < 1.25 * rmse(good, TEST, np.sin(TEST[:, 0]))


def test_search_cannot_reach_a_bandwidth_that_predicts_the_mean():
    """Constant targets pulled the bandwidth up without end (before: 27 146 for fit_exact) when
    the model had no mean; the search's bound stops at the switched-off value OFF_FACTOR
    sqrt(d) robust spreads.  Now the mean is the model's: constant targets are zeros once it is
    taken out, the selection has nothing to choose by (the zero-target warning), and the fit
    predicts the constant exactly."""
    X, _ = sine()
    scales = feature_scales(X)
    upper = scales.bounds("auto").upper
    assert upper == OFF * math.sqrt(3) * scales.common
    for name in [name for name in FITS if not name.startswith("slkl")]:   # SLKL: no mean yet
        fit, kw = FITS[name]
        with pytest.warns(UserWarning, match="y is constant, .* predicts the constant"):
            model = fit(X, np.full(60, 3.0), sigma="auto", lam="auto", seed=0, n_jobs=1, **kw)
        assert model.sigma_ <= upper
        np.testing.assert_array_equal(model.predict(TEST[:50]), 3.0)


# --------------------------------------------------------------------------------------------
# 2. Robust scales and the lengthscales the data resolve
# --------------------------------------------------------------------------------------------
def awkward_columns(n=2000, seed=0):
    """Columns: normal, normal with one outlier, binary (10% ones), a grid of 5 values, nearly
    constant (0.3, two rows at 50.3 and 100.3: a subsample without them has a standard
    deviation of rounding noise, 5.6e-17 on 500 rows), constant 5."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, 6))
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = 2.0 * rng.normal(size=n)
    X[0, 1] = 1e6
    X[:, 2] = (rng.uniform(size=n) < 0.1).astype(float)
    X[:, 3] = rng.integers(0, 5, size=n) * 0.5
    X[:, 4] = 0.3
    X[[3, 17], 4] = [50.3, 100.3]
    X[:, 5] = 5.0
    return X


def test_feature_scales_are_the_median_and_interquartile_range_with_fallbacks():
    X = awkward_columns()
    s = feature_scales(X)
    q1, q2, q3 = np.percentile(X, [25, 50, 75], axis=0)
    np.testing.assert_array_equal(s.centre, q2)
    for j in (0, 1, 3):                 # an interquartile range
        assert s.spread[j] == (q3[j] - q1[j]) / 1.3489795003921634
    assert abs(s.spread[1] - 2.0) < 0.15        # the outlier moves nothing
    # Binary with 10% ones: the median is 0, the departures are 1.
    assert (s.centre[2], s.spread[2], s.resolution[2]) == (0.0, 1.0, 1.0)
    assert s.resolution[3] == 0.5
    # Nearly constant: the median departure of the two other rows.
    assert s.spread[4] == 75.0 and s.resolution[4] == 50.0 and not s.constant[4]
    # Constant: flagged, spread 1.
    assert s.constant.tolist() == [False] * 5 + [True] and s.spread[5] == 1.0
    rms = math.sqrt(np.sum(s.spread[:5] ** 2) / 6)
    assert s.common == rms


def test_a_column_of_rounding_noise_is_constant():
    """np.std of 1000 copies of 0.1 is 1.4e-17, not 0: the old standardisation divided by it."""
    X = np.column_stack([np.random.default_rng(0).normal(size=1000), np.full(1000, 0.1)])
    X[::7, 1] = np.nextafter(0.1, 1.0)          # one ulp apart
    assert X[:, 1].std() > 0
    assert feature_scales(X).constant.tolist() == [False, True]


def test_bounds_are_a_quarter_spacing_and_the_switched_off_value():
    s = feature_scales(awkward_columns())
    off = OFF * math.sqrt(6)
    ard = s.bounds("ard")
    for j in range(5):
        assert ard.lower[j] == max(0.25 * s.resolution[j], SMALLEST * s.spread[j])
        assert ard.upper[j] == off * s.spread[j]
    assert ard.lower[2] == 0.25 and ard.lower[4] == 12.5 and ard.upper[4] == off * 75.0
    assert ard.lower[5] == ard.upper[5] == off * s.common      # constant: switched off
    auto = s.bounds("auto")
    assert auto.upper == off * s.common
    assert auto.lower == max(min(0.25 * s.resolution[:5]), SMALLEST * s.common)
    assert s.bounds("given") is None
    b = LengthscaleBounds(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    np.testing.assert_array_equal(b.clip([0.5, 5.0]), [1.0, 4.0])
    inside = np.array([1.5, 2.5])
    assert np.array_equal(b.clip(inside), inside)
    assert LengthscaleBounds(1.0, 3.0).clip(7) == 3.0


def test_ard_lengthscales_stay_within_what_the_data_resolve():
    """Elevators (features 14, 16: one value but for 2 of 14 940 rows) gave lengthscales of
    2e-17: a 500-row subsample saw the column as constant, with a standard deviation of
    rounding noise.  The same here on column 4 (before: its lengthscale 1.4e-16 and test RMSE
    0.073)."""
    X = awkward_columns()
    X[0, 1] = 0.0
    rng = np.random.default_rng(3)
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.5 * X[:, 2] + 0.05 * rng.normal(size=len(X))
    model = hkern.fit_nystrom(X, y, r=100, sigma="ard", lam="auto", seed=0, n_jobs=1)
    bounds = feature_scales(X).bounds("ard")
    record = model.selection_
    ard = record.candidates[:record.isotropic_from] if record.isotropic_from >= 0 \
        else record.candidates        # (then the one-bandwidth search, bounded as one)
    for c in ard:
        assert np.all(c.sigma >= bounds.lower) and np.all(c.sigma <= bounds.upper)
    assert model.sigma_[4] >= 12.5                  # a quarter of the spacing 50
    assert model.sigma_[5] == bounds.upper[5]       # constant: switched off
    assert model.sigma_[0] < 5.0 and model.sigma_[2] < bounds.upper[2]   # relevant
    X_test = awkward_columns(500, seed=1)
    X_test[0, 1] = 0.0
    y_test = np.sin(X_test[:, 0]) + 0.3 * X_test[:, 1] + 0.5 * X_test[:, 2]
    assert rmse(model, X_test, y_test) < 0.03


@pytest.mark.parametrize("name", ["exact", "nystrom", "hierarchical", "meka"])
def test_binary_and_constant_features(name):
    """A 0/1 feature that matters, a constant one and an outlying row: "ard" within 1.25x of a
    fit at hand-picked lengthscales, "auto" within 1.25x of the best of a grid of bandwidths."""
    fit, kw = FITS[name]

    def problem(n, seed):
        rng = np.random.default_rng(seed)
        X = np.column_stack([rng.normal(size=n), (rng.uniform(size=n) < 0.3).astype(float),
                             np.full(n, 7.0)])
        return X, np.sin(X[:, 0]) + X[:, 1]

    X, f = problem(200, 0)
    y = f + 0.1 * np.random.default_rng(5).normal(size=200)
    X[0, 0] = 1e5
    X_test, y_test = problem(400, 1)
    kw = dict(kw, seed=0, n_jobs=1)
    ard = fit(X, y, sigma="ard", lam="auto", **kw)
    hand = fit(X, y, sigma=[1.0, 1.0, 100.0], lam=1e-2, **kw)
    assert rmse(ard, X_test, y_test) < 1.25 * rmse(hand, X_test, y_test)
    auto = fit(X, y, sigma="auto", lam="auto", **kw)
    grid = min(rmse(fit(X, y, sigma=s, lam=1e-2, **kw), X_test, y_test)
               for s in (0.5, 1.0, 2.0, 4.0))
    assert rmse(auto, X_test, y_test) < 1.25 * grid


# --------------------------------------------------------------------------------------------
# 3. Targets: zeros, a constant, one nonzero value
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", ["auto", 1.5])
@pytest.mark.parametrize("name", sorted(FITS))
def test_zero_targets_fit_at_fixed_values_with_a_warning(name, sigma):
    """Before: KeyError: 'point' from the likelihood fits (every candidate -inf), a sigma of
    764 chosen among equal hold-out errors from the others.  Zeros give nothing to select by,
    and a default call (which selects) must not fail on them: the fit warns and fits at
    sigma = 1 (or the given one) and lam = 1e-2, which predicts 0."""
    fit, kw = FITS[name]
    X, _ = sine()
    with pytest.warns(UserWarning, match=r"y is constant, so there is nothing to select sigma "
                                         rf"and lam by .*sigma={1 if sigma == 'auto' else 1.5}, "
                                         r"lam=0\.01, and predicts the constant"):
        model = fit(X, np.zeros(60), sigma=sigma, lam="auto", seed=0, **kw)
    assert model.selection_ is None and model.lam == 1e-2
    assert np.all(model.predict(TEST[:20]) == 0)
    # with numbers there is nothing to select: the model predicts 0, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = fit(X, np.zeros(60), sigma=1.5, lam=1e-2, seed=0, **kw)
    assert np.all(model.predict(TEST[:20]) == 0)


def test_a_zero_target_column_is_named():
    X, y = sine()
    with pytest.raises(ValueError, match=r"^y\[:, 1\] is constant"):
        hkern.fit_hierarchical(X, np.column_stack([y, np.zeros(60)]), r=16, sigma="auto",
                               lam="auto", seed=0)


@pytest.mark.parametrize("name", sorted(FITS))
def test_constant_and_single_spike_targets_give_sane_models(name):
    fit, kw = FITS[name]
    X, _ = sine()
    kw = dict(kw, seed=0, n_jobs=1)
    const = fit(X, np.full(60, 3.0), sigma="auto", lam="auto", **kw)
    # (HCK chooses lam ~ 1e-11 for a constant, where its factorisation is 1.7% off)
    np.testing.assert_allclose(const.predict(TEST[:50]), 3.0, atol=0.1)
    spike = np.zeros(60)
    spike[5] = 1.0
    model = fit(X, spike, sigma="auto", lam="auto", **kw)
    bounds = feature_scales(X).bounds("auto")
    assert bounds.lower <= model.sigma_ <= bounds.upper
    # one row's value is no trend: near 0 away from it (a fit at given numbers does as well)
    assert np.max(np.abs(model.predict(TEST))) < 0.35
    assert np.sqrt(np.mean(model.predict(TEST) ** 2)) < 0.05


# --------------------------------------------------------------------------------------------
# 4. Hold-out fits with r close to n
# --------------------------------------------------------------------------------------------
HOLDOUT_SIZES = {"meka": {"r": 90, "n_clusters": 2}, "slkl": {"r": 90, "max_iter": 200},
                 "slkl_unif": {"r": 90}, "slkl_krrm": {"r": 90}}


@pytest.mark.parametrize("name", HOLDOUT)
def test_any_r_valid_for_the_data_is_valid_with_selection(name):
    """The hold-out fits see 80 of the 100 rows; r = 90 was refused with "n=80"."""
    fit = FITS[name][0]
    kw = dict(HOLDOUT_SIZES[name], seed=0, n_jobs=1)
    X, y = sine(100)
    model = fit(X, y, sigma="auto", lam="auto", **kw)
    again = fit(X, y, sigma=model.sigma_, lam=model.lam_, **kw)     # r = 90 on all the data
    np.testing.assert_array_equal(model.predict(TEST[:20]), again.predict(TEST[:20]))
    if name != "meka":
        assert len(model.candidates_) == 90
    assert rmse(model, TEST, np.sin(TEST[:, 0])) < 0.2


@pytest.mark.parametrize("name", HOLDOUT)
def test_r_above_n_is_reduced_against_the_n_the_user_passed(name):
    """r = 101 on 100 rows: reduced to 100 with the fit's own warning, naming the user's n (not
    the 80 rows of the hold-out fits), with or without selection."""
    fit = FITS[name][0]
    kw = dict(HOLDOUT_SIZES[name], seed=0, r=101)
    X, y = sine(100)
    for sigma, lam in [(1.0, 1e-2), ("auto", "auto")]:
        with pytest.warns(UserWarning, match="r=101 is larger than the number of training "
                                             "samples n=100; using r=100"):
            model = fit(X, y, sigma=sigma, lam=lam, **kw)
        assert np.all(np.isfinite(model.predict(TEST[:20])))


@pytest.mark.parametrize("name,change", [(name, {"r": 0}) for name in HOLDOUT]
                         + [("meka", {"n_clusters": 101})])
def test_bad_r_is_refused_with_the_message_of_the_fit_alone(name, change):
    fit = FITS[name][0]
    kw = dict(HOLDOUT_SIZES[name], seed=0, **change)
    X, y = sine(100)
    with pytest.raises(ValueError) as alone:
        fit(X, y, sigma=1.0, lam=1e-2, **kw)
    with pytest.raises(ValueError) as selected:
        fit(X, y, sigma="auto", lam="auto", **kw)
    assert str(selected.value) == str(alone.value)
    assert "n = 100" in str(alone.value) or ">= 1" in str(alone.value)


def test_given_candidates_are_renumbered_for_the_holdout_fits():
    rows = np.array([1, 5, 6, 7, 8])
    out = holdout_rows({"r": 3, "candidates": [9, 7, 5, 0]}, 10, rows)
    assert out["candidates"].tolist() == [1, 3]         # rows 5 and 7 of X are X[rows][1, 3]
    assert holdout_rows({"r": 9, "candidates": None}, 10, rows)["r"] == 5
    with pytest.warns(UserWarning, match="r=11 is larger than the number of training samples "
                                         "n=10; using r=10"):
        assert holdout_rows({"r": 11, "candidates": None}, 10, rows)["r"] == 5
    with pytest.raises(ValueError, match="all 2 given rows fell in the fifth"):
        holdout_rows({"r": 3, "candidates": [0, 9]}, 10, rows)
    # End to end: candidates among the last 20 rows were indices out of range for the 80 rows
    # of the hold-out fits, or silently other rows.
    X, y = sine(100)
    model = hkern.fit_slkl(X, y, candidates=np.arange(80, 100), sigma="auto", lam="auto",
                           seed=0, max_iter=200)
    assert model.candidates_.tolist() == list(range(80, 100))


# --------------------------------------------------------------------------------------------
# 5. Sharded fits select as the serial fits do
# --------------------------------------------------------------------------------------------
SHARDED = {"fit_hierarchical": {"r": 16}, "fit_nystrom": {"r": 20, "solver": "pcg"}}


@pytest.mark.parametrize("label", sorted(SHARDED))
def test_sharded_fits_select_as_the_serial_fit(label):
    """The sharded fits refused a selection with a message naming
    hkern.select_hyperparameters, which does not exist; they now select on the shards
    (hkern.hyperparameters.sharded; several ranks: tests/test_mpi_fits.py).  On a one-rank
    communicator every mode gives the serial choice, and a criterion the shards cannot
    compare by is refused by name."""
    MPI = pytest.importorskip("mpi4py.MPI")
    comm = MPI.COMM_WORLD
    fit = getattr(hkern, label)
    X, y = sine(200)
    kw = dict(SHARDED[label], seed=0)
    for sigma, lam in (("auto", 1e-2), (1.0, "auto"), ("ard", "auto")):
        serial = fit(X, y, sigma=sigma, lam=lam, **kw)
        model = fit(X, y, sigma=sigma, lam=lam, comm=comm, **kw)
        np.testing.assert_allclose(model.sigma_, serial.sigma_, rtol=1e-9)
        assert model.lam_ == pytest.approx(serial.lam_, rel=1e-9)
        assert len(model.selection_.candidates) == len(serial.selection_.candidates)
    assert rmse(model, TEST, np.sin(TEST[:, 0])) < 0.2
    other = "holdout" if label == "fit_hierarchical" else "likelihood"
    with pytest.raises(ValueError, match=f"on sharded data .*pass criterion='auto' or "
                                         f"'{'likelihood' if other == 'holdout' else 'holdout'}'"):
        fit(X, y, sigma="auto", criterion=other, comm=comm, **kw)


def test_a_lam_at_the_edge_of_the_search_warns_and_says_why():
    # Exact duplicate rows with equal targets: the likelihood rises as lam falls, without end
    # (issue 52: lam 7.9e-16 chosen silently).  The same rows once: an interior optimum.
    X, y = sine()
    with warnings.catch_warnings():
        warnings.simplefilter("error", hkern.SelectionWarning)
        assert 1e-3 < hkern.fit_exact(X, y, seed=0).lam_ < 1e-1
    with pytest.warns(hkern.SelectionWarning,
                      match=r"fit_exact: the selection chose lam=.*, the smallest value it "
                            r"searched, .*still improving.*remove the duplicate rows"):
        model = hkern.fit_exact(np.vstack([X, X]), np.concatenate([y, y]), seed=0)
    assert model.lam_ < 1e-9
    # A ridge the fit profiles itself: the bound of its interval (a smooth target without
    # noise, which a long bandwidth fits).
    with pytest.warns(hkern.SelectionWarning, match=r"fit_nystrom: .*lam=1e-08, the smallest"):
        hkern.fit_nystrom(X, 3.0 + X[:, 0], 30, sigma="auto", lam="auto", seed=0)

"""Property-based tests of the newer surfaces (issue 31, item 5): hyperparameter selection, PCG
and FALKON, ``return_std``.

On random valid data:

* every fit and every selection returns finite predictions, and ``return_std`` is
  non-negative and at most the prior's standard deviation;
* PCG equals the direct solve to its tolerance, and ``converged`` is never reported when the
  true residual, computed here from the dense matrix, exceeds ``tol``;
* the same seed gives the same answer, bit for bit, for n_jobs 1 and 2;
* the y-scale law (y times c gives predictions times c) and the joint (X, sigma) law (X and
  sigma times c give the same model) hold;
* a bad argument always gives a ValueError that names it.

Run by tests/test_properties.py in its own interpreter, beside tests/properties_api.py (whose
strategies and contract it shares); run directly with ``pytest tests/properties_solvers.py``.
``HKERN_HYPOTHESIS_EXAMPLES`` scales the number of examples (a fifth of it per property here:
these fits select hyperparameters or iterate).
"""
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from properties_api import EXAMPLES, returns_or_refuses
from property_examples import SCALE_LAW_NYSTROM, SCALE_LAW_PCG

import hkern

SETTINGS = settings(max_examples=max(10, EXAMPLES // 5), deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


@st.composite
def problems(draw, min_n=12, max_n=60, max_d=4):
    """(X, y, X_test): a smooth function of standard normal inputs plus noise, at a random
    scale of the targets; valid data (the awkward forms are properties_api.py's)."""
    n = draw(st.integers(min_n, max_n))
    d = draw(st.integers(1, max_d))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    noise = draw(st.sampled_from([1e-3, 0.1, 1.0]))
    y = np.sin(X @ w) + noise * rng.normal(size=n)
    return X, y, rng.normal(size=(7, d))


FITS = {
    "exact_cholesky": lambda X, y, **kw: hkern.fit_exact(X, y, solver="direct", **kw),
    "exact_pcg": lambda X, y, **kw: hkern.fit_exact(X, y, solver="pcg", r=min(8, len(X) - 1),
                                                    **kw),
    "nystrom": lambda X, y, **kw: hkern.fit_nystrom(X, y, r=min(10, len(X)), **kw),
    "falkon": lambda X, y, **kw: hkern.fit_nystrom(X, y, r=min(10, len(X)), solver="pcg",
                                                   **kw),
    "hierarchical": lambda X, y, **kw: hkern.fit_hierarchical(X, y, r=4, **kw),
    "rff": lambda X, y, **kw: hkern.fit_rff(X, y, r=16, **kw),
}
# The default tol of the iterative fits (their answers are accurate to it).
ITERATIVE_TOL = {"exact_pcg": 1e-3, "falkon": 1e-4}
# Fits whose posterior standard deviation return_std gives.
WITH_STD = ("exact_cholesky", "hierarchical")


@pytest.mark.parametrize("name", sorted(FITS))
def test_selection_gives_finite_predictions(name):
    """sigma "auto"/"ard", lam "auto" or a number, every criterion the fit accepts: finite
    predictions (or a ValueError, e.g. data too small for the selection's hold-out)."""
    @SETTINGS
    @given(problem=problems(), sigma=st.sampled_from(["auto", "ard", 1.0]),
           lam=st.sampled_from(["auto", 1e-2]),
           criterion=st.sampled_from(["auto", "likelihood", "holdout"]),
           seed=st.integers(0, 2**31))
    def prop(problem, sigma, lam, criterion, seed):
        X, y, X_test = problem
        model = returns_or_refuses(FITS[name], X, y, sigma=sigma, lam=lam, criterion=criterion,
                                   seed=seed, n_jobs=1)
        if model is None:
            return
        pred = model.predict(X_test)
        assert np.isfinite(pred).all()
        assert np.all(np.asarray(model.sigma_) > 0) and model.lam_ > 0
        if name in WITH_STD:
            mean, std = model.predict(X_test, return_std=True)
            np.testing.assert_array_equal(mean, pred)
            # The prior's standard deviation of f is sqrt(s2 k(x, x)) = sqrt(s2) for these
            # kernels, s2 the fitted signal variance.
            limit = np.sqrt(model.signal_variance_[0]) * (1 + 1e-12)
            assert np.all(std >= 0) and np.all(std <= limit)
    prop()


@SETTINGS
@given(problem=problems(min_n=20, max_n=80), sigma=st.sampled_from([0.3, 1.0, 3.0]),
       lam=st.sampled_from([1e-6, 1e-3, 1e-1]), tol=st.sampled_from([1e-2, 1e-4, 1e-7]),
       r=st.integers(1, 15))
def test_pcg_equals_the_direct_solve_to_its_tolerance(problem, sigma, lam, tol, r):
    """The true residual ||y - (K + lam I) alpha|| / ||y||, computed here from the dense
    matrix, is what the trace records; converged means it is at most tol; and never above
    the start's (1).  Converged coefficients match Cholesky's to tol times the condition."""
    X, y, _ = problem
    r = min(r, len(X) - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hkern.ConvergenceWarning)
        model = hkern.fit_exact(X, y, solver="pcg", sigma=sigma, lam=lam, tol=tol, r=r, seed=0,
                                n_jobs=1)
    if not np.any(y - model.y_mean_[0]):
        return          # constant y: nothing left to solve for once its mean is taken out
    y = y - model.y_mean_[0]        # the system solved: y minus its mean, the same bits
    A = hkern.kernel_matrix(X, X, sigma=sigma) + lam * np.eye(len(X))
    alpha = model.dual_coef_[:, 0]
    true = np.linalg.norm(y - A @ alpha) / np.linalg.norm(y)
    # The rounding of a computed residual: n eps (|A| |alpha| + |y|), relative to ||y||.
    rounding = len(y) * 1e-15 * np.linalg.norm(np.abs(A) @ np.abs(alpha) + np.abs(y)) \
        / np.linalg.norm(y)
    trace = model.solver_trace_
    assert trace.true_residual[0] == pytest.approx(true, rel=1e-6, abs=rounding)
    assert trace.converged == (trace.true_residual[0] <= tol)
    if trace.converged:
        assert true <= tol + rounding
    assert true <= 1.0 + rounding
    if trace.converged:
        exact = np.linalg.solve(A, y)
        bound = tol * np.linalg.cond(A) * 1.01 + 1e-10
        assert np.linalg.norm(alpha - exact) <= bound * np.linalg.norm(exact)


@pytest.mark.parametrize("name", ["exact_pcg", "falkon", "hierarchical", "nystrom"])
def test_same_seed_same_answer_for_any_n_jobs(name):
    """With and without selection: predictions bit for bit equal for n_jobs 1 and 2."""
    @SETTINGS
    @given(problem=problems(), sigma=st.sampled_from(["ard", 0.7]),
           lam=st.sampled_from(["auto", 1e-2]), seed=st.integers(0, 2**31))
    def prop(problem, sigma, lam, seed):
        X, y, X_test = problem
        one = returns_or_refuses(FITS[name], X, y, sigma=sigma, lam=lam, seed=seed, n_jobs=1)
        if one is None:
            return
        two = FITS[name](X, y, sigma=sigma, lam=lam, seed=seed, n_jobs=2)
        np.testing.assert_array_equal(one.predict(X_test), two.predict(X_test))
        np.testing.assert_array_equal(np.asarray(one.sigma_), np.asarray(two.sigma_))
    prop()


@pytest.mark.parametrize("select", [False, True])
@pytest.mark.parametrize("name", sorted(FITS))
def test_scale_laws(name, select):
    """y times c: predictions times c (the solvers are linear in y; a selection's criteria
    profile y's scale out and its tolerances are relative).  X and sigma times c: the same
    model, predictions at X_test times c equal."""
    @SETTINGS
    @given(problem=problems(), c=st.sampled_from([1e-12, 1e-6, 1e-3, 1e3, 1e6, 1e12]),
           seed=st.integers(0, 2**31))
    @example(**SCALE_LAW_PCG)
    @example(**SCALE_LAW_NYSTROM)
    def prop(problem, c, seed):
        X, y, X_test = problem
        kw = dict(sigma="ard" if select else 0.8, lam="auto" if select else 1e-2, seed=seed,
                  n_jobs=1)
        base = returns_or_refuses(FITS[name], X, y, **kw)
        if base is None:
            return
        # Equal to rounding, relative to the targets' scale: 1e-6 of max |y| for the direct
        # solvers.  An iterative one stops once its residual is at most tol ||y|| (the 2-norm
        # over the n targets, not the largest one): a prediction k_x^T alpha is then within
        # ||(K + lam I)^{-1} k_x|| tol ||y|| of the exact one, and the rounding of a scaled
        # problem moves CG's iterates anywhere within that (at lam 6e-7 two runs from the same
        # start, both converged, differed by 2.4 tol ||y|| after 25 iterations, n = 44).
        accuracy = 10 * ITERATIVE_TOL.get(name, 1e-7)
        y_scale = np.linalg.norm(y) if name in ITERATIVE_TOL else np.abs(y).max()
        scaled = FITS[name](X, y * c, **kw)
        if select:
            # The selection is invariant: the same values to rounding (the exact GP's start and
            # the iterative solvers' candidates see y / rms(y) on a grid, hkern._targets, and
            # make the same choice; the direct solvers' search compares criteria of y itself).
            np.testing.assert_allclose(scaled.sigma_, base.sigma_, rtol=1e-6)
            assert scaled.lam_ == pytest.approx(base.lam_, rel=1e-6)
            if not (np.array_equal(scaled.sigma_, base.sigma_) and scaled.lam_ == base.lam_):
                # A choice moved by rounding can make an ill-conditioned model (lam 4e-7 on
                # 12 points moved the predictions by 1e-3 for a change of lam by 1e-8): the
                # fit's own law at the scaled choice.  The same choice: the same model (an
                # iterative final fit starts from the same candidate, times the scale).
                base = FITS[name](X, y, **dict(kw, sigma=scaled.sigma_, lam=scaled.lam_))
        np.testing.assert_allclose(scaled.predict(X_test), c * base.predict(X_test),
                                   rtol=1e-6, atol=accuracy * c * y_scale)
        if not select:
            wide = FITS[name](X * c, y, **dict(kw, sigma=0.8 * c))
            np.testing.assert_allclose(wide.predict(X_test * c), base.predict(X_test),
                                       rtol=1e-6, atol=accuracy * y_scale)
    prop()


BAD = {
    "sigma": [0.0, -1.0, np.nan, np.inf, "wide"],
    "lam": [0.0, -1e-3, np.nan, "best"],
    "tol": [0.0, -1.0, 1.0, 2.0, np.nan],
    "max_iter": [0, -5, 2.5],
    "r": [0, -1, 2.5],          # above n is reduced with a warning (tests/test_validation.py)
    "criterion": ["loo", 3],
    "seed": [-1, "x"],
    "n_jobs": [0, "two"],
}
TAKES = {"tol": ("exact_pcg", "falkon"), "max_iter": ("exact_pcg", "falkon"),
         "r": ("exact_pcg", "nystrom", "falkon", "hierarchical", "rff")}


@SETTINGS
@given(problem=problems(max_n=30), name=st.sampled_from(sorted(FITS)),
       argument=st.sampled_from(sorted(BAD)), data=st.data())
def test_a_bad_argument_gives_a_value_error_naming_it(problem, name, argument, data):
    X, y, _ = problem
    if argument in TAKES and name not in TAKES[argument]:
        return
    value = data.draw(st.sampled_from(BAD[argument]))
    select = data.draw(st.booleans())
    kw = dict(sigma="auto" if select and argument != "sigma" else 1.0,
              lam="auto" if select and argument != "lam" else 1e-2, seed=0, n_jobs=1)
    kw[argument] = value
    fit = FITS[name]
    if argument == "r":
        fit = {"exact_pcg": lambda X, y, **k: hkern.fit_exact(X, y, solver="pcg", **k),
               "nystrom": lambda X, y, **k: hkern.fit_nystrom(X, y, **k),
               "falkon": lambda X, y, **k: hkern.fit_nystrom(X, y, solver="pcg", **k),
               "hierarchical": lambda X, y, **k: hkern.fit_hierarchical(X, y, **k),
               "rff": lambda X, y, **k: hkern.fit_rff(X, y, **k)}[name]
    with pytest.raises(ValueError) as info:
        fit(X, y, **kw)
    assert re.search(rf"\b{argument}\b", str(info.value)), (argument, value, str(info.value))

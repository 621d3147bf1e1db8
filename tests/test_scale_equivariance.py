"""Fitting c * y predicts c times the predictions for y (issue 16).

Where the fit is linear in y (every kernel ridge solve) this holds to rounding: 1e-8 relative
to the largest prediction.  GP-GRIEF standardises y before choosing its hyperparameters, so
it holds there too.  SLKL's objective is not scale-equivariant (the l1 penalty nu does not
scale with ||y||^2); what must hold there is that the fit's training error, relative to std(y),
does not grow with c (the scale hid a silent wrong answer: issue 16 defect 1).
"""
import numpy as np
import pytest
from oracles import rel_max

import hkern

SCALES = [1e-6, 3.7, 1e9]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.uniform(-2, 2, size=(700, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.05 * rng.normal(size=700)
    return X, y, rng.uniform(-2, 2, size=(50, 3))


LINEAR_FITS = {
    "exact": lambda X, y: hkern.fit_exact(X, y, sigma=1.0, lam=1e-2),
    "nystrom": lambda X, y: hkern.fit_nystrom(X, y, r=100, sigma=1.0, seed=0),
    "nystrom_oasis": lambda X, y: hkern.fit_nystrom(X, y, r=100, sigma=1.0, landmarks="oasis",
                                                    seed=0),
    "rff": lambda X, y: hkern.fit_rff(X, y, r=200, sigma=1.0, seed=0),
    "rff_dual": lambda X, y: hkern.fit_rff(X, y, r=900, sigma=1.0, seed=0),
    "hierarchical": lambda X, y: hkern.fit_hierarchical(X, y, r=32, sigma=1.0, seed=0),
    "independent": lambda X, y: hkern.fit_independent(X, y, r=32, sigma=1.0, seed=0),
    "meka_direct": lambda X, y: hkern.fit_meka(X, y, 8, n_clusters=4, sigma=1.0, seed=0),
    "meka_cg": lambda X, y: hkern.fit_meka(X, y, 8, n_clusters=4, sigma=1.0, seed=0, solver="cg"),
    "slkl_unif": lambda X, y: hkern.fit_slkl_unif(X, y, r=60, sigma=1.0, seed=0),
    "slkl_krrm": lambda X, y: hkern.fit_slkl_krrm(X, y, r=60, sigma=1.0, seed=0),
}


def assert_scaled(got, ref, c):
    assert rel_max(got, c * ref) <= 1e-8


@pytest.mark.parametrize("name", sorted(LINEAR_FITS))
@pytest.mark.parametrize("c", SCALES)
def test_linear_fits(name, c, data):
    X, y, X_new = data
    ref = LINEAR_FITS[name](X, y).predict(X_new)
    assert_scaled(LINEAR_FITS[name](X, c * y).predict(X_new), ref, c)


@pytest.mark.parametrize("c", SCALES)
def test_grief(c, data):
    X, y, X_new = data
    kw = dict(r=50, grid_size=6, seed=0, max_iter=30, n_restarts=0, init_subset=300)
    ref_mean, ref_std = hkern.fit_grief(X, y, **kw).predict(X_new, return_std=True)
    mean, std = hkern.fit_grief(X, c * y, **kw).predict(X_new, return_std=True)
    assert_scaled(mean, ref_mean, c)
    assert_scaled(std, ref_std, c)


@pytest.mark.parametrize("precompute", [True, False])
def test_slkl_error_relative_to_std_does_not_grow_with_the_scale(precompute, data):
    X, y, _ = data
    errors = []
    for c in [1.0, 1e3, 1e6, 1e10]:
        model = hkern.fit_slkl(X, c * y, r=80, nu=1e-3, sigma=1.0, seed=0,
                               precompute_columns=precompute)
        rmse = np.sqrt(np.mean((model.predict(X) - c * y) ** 2))
        errors.append(rmse / np.std(c * y))
    # The descent's own stopping tolerance (tol = 1e-4 relative decrease of F) bounds how far
    # two runs may end apart; 1e-4 relative to std(y) is that scale.
    assert max(errors) <= errors[0] + 1e-4, errors

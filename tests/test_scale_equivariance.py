"""Fitting c * y predicts c times the predictions for y (issue 16).

Where the fit is linear in y (every kernel ridge solve) this holds to rounding: 1e-8 relative
to the largest prediction.  GP-GRIEF standardises y before choosing its hyperparameters, so
it holds there too.  SLKL's l1 penalty is nu mean(y^2) ||mu||_1 (issue 31: with nu in units
of y^2, y * 1e-12 kept no landmark), so it holds there as well.
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
@pytest.mark.parametrize("c", SCALES)
def test_slkl(c, precompute, data):
    """nu is relative to mean(y^2) (issue 31): c * y selects the same landmarks and weights."""
    X, y, X_new = data
    kw = dict(r=80, nu=1e-3, sigma=1.0, seed=0, precompute_columns=precompute)
    ref = hkern.fit_slkl(X, y, **kw)
    model = hkern.fit_slkl(X, c * y, **kw)
    assert np.array_equal(model.active_, ref.active_)
    assert_scaled(model.predict(X_new), ref.predict(X_new), c)

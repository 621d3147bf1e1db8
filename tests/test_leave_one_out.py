"""The leave-one-out check that keeps sigma="ard"'s per-feature lengthscales only where they
predict left-out rows at least as well as one bandwidth (hkern.hyperparameters.leave_one_out)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from oracles import dense_kernel

import hkern
from hkern.hyperparameters.leave_one_out import keeps_per_feature, leave_one_out_mse
from hkern.hyperparameters.record import Candidate, HyperparameterSelection
from hkern.hyperparameters.rows import LocalRows
from hkern.hyperparameters.search import best_of_origins


def brute_force_loo(X, Y, sigma, lam, kernel):
    """Each row of the targets centred on all rows (as the closed form centres them) predicted
    by kernel ridge on the other rows, from the definition: n solves."""
    Yc = Y - Y.mean(axis=0)
    Z = X / np.asarray(sigma)
    K = dense_kernel(Z, Z, kernel=kernel, sigma=1.0)
    n = len(X)
    residuals = np.empty_like(Yc)
    for i in range(n):
        rest = np.arange(n) != i
        alpha = np.linalg.solve(K[np.ix_(rest, rest)] + lam * np.eye(n - 1), Yc[rest])
        residuals[i] = Yc[i] - K[i, rest] @ alpha
    return float(np.mean(residuals ** 2))


@pytest.mark.parametrize("kernel", ["gaussian", "laplace", "matern32"])
@pytest.mark.parametrize("sigma", [0.7, [0.5, 2.0, 1.3]])
def test_closed_form_equals_refitting_without_each_row(kernel, sigma):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] * X[:, 2]]) + 0.1 * rng.normal(size=(60, 2))
    got = leave_one_out_mse(X, Y, np.asarray(sigma) if np.ndim(sigma) else sigma, 1e-2, kernel)
    assert got == pytest.approx(brute_force_loo(X, Y, sigma, 1e-2, kernel), rel=1e-10)


def test_not_positive_definite_is_infinite():
    X = np.zeros((5, 2))                            # K = ones: singular without lam
    assert leave_one_out_mse(X, np.arange(5.0)[:, None], 1.0, 0.0, "gaussian") == math.inf


def test_irrelevant_lengthscale_loses_to_one_bandwidth():
    """A per-feature end that tunes a noise feature to a short lengthscale overfits; the
    isotropic end of the same data predicts left-out rows better, and the check says so."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    data = LocalRows(X, y[:, None])
    overfit = Candidate(sigma=np.array([1.0, 0.05]), lam=1e-3, value=0.0, seconds=0.0)
    smooth = Candidate(sigma=1.0, lam=1e-2, value=0.0, seconds=0.0)
    keep, (ard, iso), rows = keeps_per_feature(data, "gaussian", overfit, smooth, 0, None)
    assert not keep and ard > iso and rows == 300
    relevant = Candidate(sigma=np.array([1.0, 50.0]), lam=1e-2, value=0.0, seconds=0.0)
    assert keeps_per_feature(data, "gaussian", relevant, smooth, 0, None)[0]


def test_same_rows_for_c_y_and_on_shards_of_any_order():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2500, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=2500)
    a = Candidate(sigma=np.array([1.0, 3.0]), lam=1e-2, value=0.0, seconds=0.0)
    b = Candidate(sigma=1.5, lam=1e-2, value=0.0, seconds=0.0)
    first = keeps_per_feature(LocalRows(X, y[:, None]), "gaussian", a, b, 7, None)
    scaled = keeps_per_feature(LocalRows(X, 3.7e5 * y[:, None]), "gaussian", a, b, 7, None)
    assert first[2] == 2000 and first == scaled


def test_best_of_origins_gives_the_isotropic_end_when_the_check_says_so():
    record = HyperparameterSelection(sigma_mode="ard", lam_mode="auto", criterion="c")
    values, index = [], {}

    def search(o, lam0):
        point = (o, 0.0, 0.0)
        index[point] = len(record.candidates)
        record.candidates.append(Candidate(sigma=[1.0, 2.0] if o == 0 else 1.5, lam=lam0,
                                           value=[5.0, 1.0][o], seconds=0.0))
        values.append([5.0, 1.0][o])
        return point, values[-1], {}

    origins = [(None, 1e-2, None), (None, 1e-3, None)]
    seen = []

    def refuse(per_feature, isotropic):
        seen.append((per_feature.sigma, isotropic.sigma))
        return False

    best, _ = best_of_origins(record, origins, values, index, search, refuse)
    assert best == (1, 0.0, 0.0) and seen == [([1.0, 2.0], 1.5)]
    record.candidates.clear(), values.clear()
    best, _ = best_of_origins(record, origins, values, index, search, lambda *_: True)
    assert best == (0, 0.0, 0.0)


def test_energy_like_design_keeps_the_bandwidth_that_generalises():
    """A design on a grid with one feature that matters less: the fit's record holds the check,
    and the kept end is the one of smaller leave-one-out error."""
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.integers(0, 4, 400), rng.integers(0, 3, 400),
                         rng.normal(size=400)]).astype(float)
    y = X[:, 0] + 0.5 * X[:, 1] + np.sin(X[:, 2]) + 0.05 * rng.normal(size=400)
    model = hkern.fit_exact(X, y, seed=0)
    record = model.selection_
    if record.leave_one_out is None:        # the criterion chose the one bandwidth
        assert np.ndim(model.sigma_) == 0
    else:
        ard, iso = record.leave_one_out
        assert (np.ndim(model.sigma_) == 1) == (ard <= iso)
        assert record.leave_one_out_rows == 400 and "leave-one-out" in record.summary()

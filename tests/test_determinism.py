"""Every fit gives bitwise identical results for n_jobs=1 and n_jobs=2 (issue 16).

The README promises it.  Sizes are above the tile sizes of the parallel cores (512 x 512 in the
shim, 128 x 256 in the kernel engine), so the two runs really split the work differently.
"""
import numpy as np
import pytest

import hkern

N, D = 1300, 4


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(N, D))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.normal(size=N)
    labels = np.array(["a", "b", "c"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 1)]
    return X, y, labels


# name -> (fit(X, y, n_jobs, task), what of the model to compare besides predictions)
FITS = {
    "exact": lambda X, y, j, t: hkern.fit_exact(X, y, sigma=1.0, lam=1e-2, task=t, n_jobs=j),
    "nystrom": lambda X, y, j, t: hkern.fit_nystrom(X, y, r=300, sigma=1.0, seed=1, task=t,
                                                    n_jobs=j),
    "nystrom_oasis": lambda X, y, j, t: hkern.fit_nystrom(X, y, r=200, landmarks="oasis",
                                                          sigma=1.0, seed=1, task=t, n_jobs=j),
    "nystrom_rpcholesky": lambda X, y, j, t: hkern.fit_nystrom(
        X, y, r=200, landmarks="rpcholesky", sigma=1.0, seed=1, task=t, n_jobs=j),
    "rff": lambda X, y, j, t: hkern.fit_rff(X, y, r=600, sigma=1.0, seed=1, task=t, n_jobs=j),
    "rff_dual": lambda X, y, j, t: hkern.fit_rff(X, y, r=1500, sigma=1.0, seed=1, task=t,
                                                 n_jobs=j),
    "hierarchical": lambda X, y, j, t: hkern.fit_hierarchical(X, y, r=64, sigma=1.0, seed=1,
                                                              task=t, n_jobs=j),
    "independent": lambda X, y, j, t: hkern.fit_independent(X, y, r=64, sigma=1.0, seed=1,
                                                            task=t, n_jobs=j),
    "meka_direct": lambda X, y, j, t: hkern.fit_meka(X, y, 16, n_clusters=4, sigma=1.0, seed=1,
                                                     task=t, n_jobs=j),
    "meka_cg": lambda X, y, j, t: hkern.fit_meka(X, y, 16, n_clusters=4, sigma=1.0, seed=1, task=t,
                                                 solver="pcg", n_jobs=j),
    "slkl": lambda X, y, j, t: hkern.fit_slkl(X, y, r=120, nu=1e-3, sigma=1.0,
                                              seed=1, task=t, n_jobs=j),
    "slkl_lazy_columns": lambda X, y, j, t: hkern.fit_slkl(
        X, y, r=120, nu=1e-3, sigma=1.0, seed=1, task=t, precompute_columns=False,
        n_jobs=j),
    "slkl_unif": lambda X, y, j, t: hkern.fit_slkl_unif(X, y, r=120, sigma=1.0,
                                                        seed=1, task=t, n_jobs=j),
    "slkl_krrm": lambda X, y, j, t: hkern.fit_slkl_krrm(X, y, r=120, sigma=1.0,
                                                        seed=1, task=t, n_jobs=j),
}


def _same(a, b):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", sorted(FITS))
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_fit_and_predict_do_not_depend_on_n_jobs(name, task, data):
    X, y, labels = data
    target = y if task == "regression" else labels
    one = FITS[name](X, target, 1, task)
    two = FITS[name](X, target, 2, task)
    X_new = X[::7] + 0.1
    _same(one.decision_function(X_new), two.decision_function(X_new))
    one.n_jobs, two.n_jobs = 2, 1           # and predictions do not depend on theirs
    _same(one.decision_function(X_new), two.decision_function(X_new))
    for attr in ("dual_coef_", "coef_", "weights_"):
        if getattr(one, attr, None) is not None:
            _same(getattr(one, attr), getattr(two, attr))


@pytest.mark.parametrize("inference", ["type2", "type1"])
def test_grief_does_not_depend_on_n_jobs(inference, data):
    X, y, _ = data
    kw = dict(r=60, grid_size=6, seed=3, inference=inference)
    kw.update(dict(n_iter=300, burn_in=50, thin=10) if inference == "type1" else
              dict(max_iter=20, n_restarts=0, init_subset=300))
    one = hkern.fit_grief(X[:600], y[:600], n_jobs=1, **kw)
    two = hkern.fit_grief(X[:600], y[:600], n_jobs=2, **kw)
    m1, s1 = one.predict(X[600:800], return_std=True)
    m2, s2 = two.predict(X[600:800], return_std=True)
    _same(m1, m2)
    _same(s1, s2)


def test_hierarchical_operators_do_not_depend_on_n_jobs(data):
    X, y, _ = data
    one = hkern.fit_hierarchical(X, y, r=64, sigma=1.0, seed=1, n_jobs=1)
    two = hkern.fit_hierarchical(X, y, r=64, sigma=1.0, seed=1, n_jobs=2)
    B = np.column_stack([y, y ** 2])
    _same(one.matvec(B), two.matvec(B))
    _same(one.solve(B), two.solve(B))
    assert one.logdet() == two.logdet()


@pytest.mark.parametrize("method", ["oasis", "greedy", "rpcholesky", "uniform"])
def test_column_selection_does_not_depend_on_n_jobs(method, data):
    X, _, _ = data
    one = hkern.select_columns(X, 80, method=method, sigma=1.0, seed=2, n_jobs=1)
    two = hkern.select_columns(X, 80, method=method, sigma=1.0, seed=2, n_jobs=2)
    for attr in ("indices_", "C_", "W_inv_", "F_"):
        _same(getattr(one, attr), getattr(two, attr))


def test_meka_approximation_does_not_depend_on_n_jobs(data):
    X, _, _ = data
    one = hkern.meka(X, 16, n_clusters=4, sigma=1.0, seed=2, n_jobs=1)
    two = hkern.meka(X, 16, n_clusters=4, sigma=1.0, seed=2, n_jobs=2)
    v = np.cos(np.arange(N))
    _same(one.matvec(v), two.matvec(v))
    labels_one, blocks_one = one.features(X[:50])
    labels_two, blocks_two = two.features(X[:50])
    _same(labels_one, labels_two)
    for (rows_one, w_one), (rows_two, w_two) in zip(blocks_one, blocks_two):
        _same(rows_one, rows_two)
        _same(w_one, w_two)

"""Per-feature lengthscales (ARD, issue 18 item 1): ``sigma`` may be an array of d lengthscales.

k(x, z) with lengthscales l is the isotropic kernel with bandwidth 1 at x / l, z / l, applied once
in the foundation (hkern._model.prepare_fit, FittedModel._check_X, the kernel functions).  So
every entry point fitted with ``sigma=l`` on X must give bitwise what it gives with ``sigma=1``
on X / l, its model's predictions on X_test those of the scalar model on X_test / l; the kernel
functions must equal the dense oracle on X / l; bad lengthscales are refused with a ValueError
naming sigma; results do not depend on n_jobs.
"""
import pickle

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from oracles import KERNELS, dense_kernel, rel_max

import hkern
from hkern._memory import recorded_estimates
from hkern._model import prepare_fit
from hkern._validation import check_sigma, scale_inputs
from hkern.slkl import fit_slkl_krrm, fit_slkl_unif

D = 3
L = np.array([0.6, 2.5, 9.0])       # very different scales: the third feature barely matters


def data(n=240, n_test=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) * np.array([1.0, 3.0, 5.0])
    y = np.sin(X[:, 0]) + 0.3 * np.cos(X[:, 1] / 2.5) + 0.01 * rng.normal(size=n)
    return X, y, rng.normal(size=(n_test, D)) * np.array([1.0, 3.0, 5.0])


# Every kernel ridge fit: (function, extra keyword arguments).
# lam given (SLKL's at its paper's 1): the tests compare fits at given values; the selection
# of lam has its own tests (test_selection*.py).
FITS = {
    "exact": (hkern.fit_exact, dict(lam=1e-2, seed=1)),
    "nystrom": (hkern.fit_nystrom, dict(r=60, lam=1e-2, seed=1)),
    "nystrom_oasis": (hkern.fit_nystrom, dict(r=60, lam=1e-2, seed=1, landmarks="oasis")),
    "rff": (hkern.fit_rff, dict(r=80, lam=1e-2, seed=1)),
    "hierarchical": (hkern.fit_hierarchical, dict(r=20, lam=1e-2, seed=1)),
    "independent": (hkern.fit_independent, dict(r=20, lam=1e-2, seed=1)),
    "meka": (hkern.fit_meka, dict(r=10, n_clusters=3, lam=1e-2, seed=1)),
    "slkl": (hkern.fit_slkl, dict(r=60, nu=1e-3, lam=1.0, seed=1)),
    "slkl_unif": (fit_slkl_unif, dict(r=60, lam=1.0, seed=1)),
    "slkl_krrm": (fit_slkl_krrm, dict(r=60, lam=1.0, seed=1)),
}


@pytest.mark.parametrize("name", sorted(FITS))
@pytest.mark.parametrize("task", ["regression", "classification"])
def test_fit_equals_scalar_fit_on_scaled_inputs(name, task):
    fit, kw = FITS[name]
    X, y, X_test = data()
    if task == "classification":
        y = np.where(y > 0.2, "a", "b")
    kw = dict(kw, lam=1e-2)
    ard = fit(X, y, sigma=L, task=task, **kw)
    iso = fit(X / L, y, sigma=1.0, task=task, **kw)
    assert_array_equal(ard.decision_function(X_test), iso.decision_function(X_test / L))
    assert_array_equal(ard.predict(X_test), iso.predict(X_test / L))
    assert_array_equal(ard.sigma, L)
    assert ard.sigma is not L and not ard.sigma.flags.writeable     # the model's own copy
    assert "sigma=[0.6, 2.5, 9]" in repr(ard)
    again = pickle.loads(pickle.dumps(ard))
    assert_array_equal(again.predict(X_test), ard.predict(X_test))


@pytest.mark.parametrize("fit", [hkern.fit_exact, hkern.fit_hierarchical, hkern.fit_independent],
                         ids=lambda f: f.__name__)
def test_gp_face_equals_scalar_gp_on_scaled_inputs(fit):
    X, y, X_test = data()
    kw = {} if fit is hkern.fit_exact else dict(r=20, seed=1)
    ard = fit(X, y, sigma=L, lam=1e-2, **kw)
    iso = fit(X / L, y, sigma=1.0, lam=1e-2, **kw)
    for a, b in zip(ard.predict(X_test, return_std=True), iso.predict(X_test / L,
                                                                        return_std=True)):
        assert_array_equal(a, b)
    assert ard.log_marginal_likelihood() == iso.log_marginal_likelihood()


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_matrix_equals_dense_oracle_on_scaled_inputs(kernel):
    X, _, Y = data(n=50, n_test=30)
    K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=L)
    assert rel_max(K, dense_kernel(X / L, Y / L, kernel=kernel, sigma=1.0)) < 1e-12
    assert rel_max(hkern.kernel_matrix(X, kernel=kernel, sigma=L),
                   dense_kernel(X / L, kernel=kernel, sigma=1.0)) < 1e-12
    assert_array_equal(K, hkern.kernel_matrix(X / L, Y / L, kernel=kernel, sigma=1.0))
    B = np.random.default_rng(3).normal(size=(30, 2))
    assert_array_equal(hkern.kernel_matvec(X, Y, B, kernel=kernel, sigma=L),
                       hkern.kernel_matvec(X / L, Y / L, B, kernel=kernel, sigma=1.0))
    assert_array_equal(hkern.kernel_diag(X, kernel=kernel, sigma=L), np.ones(50))


def test_kernel_matrix_ard_is_product_over_features_for_laplace():
    """An independent check: the L1 Laplace kernel factorises over features."""
    X, _, Y = data(n=20, n_test=10)
    K = hkern.kernel_matrix(X, Y, kernel="laplace", sigma=L)
    prod = np.ones((20, 10))
    for j in range(D):
        prod *= dense_kernel(X[:, [j]], Y[:, [j]], kernel="laplace", sigma=L[j])
    assert rel_max(K, prod) < 1e-12


def test_rff_frequencies_for_lengthscales():
    """RFF with lengthscales samples frequencies at bandwidth 1 and applies them to X / l; the
    transformer, which applies its frequencies to X itself, stores them divided by l."""
    X, y, X_test = data()
    model = hkern.fit_rff(X, y, r=80, sigma=L, seed=1)
    iso = hkern.fit_rff(X / L, y, r=80, sigma=1.0, seed=1)
    assert_array_equal(model.frequencies_, iso.frequencies_)
    from hkern.sklearn import RFFTransformer
    t_ard = RFFTransformer(r=80, sigma=L, random_state=1).fit(X)
    t_iso = RFFTransformer(r=80, sigma=1.0, random_state=1).fit(X / L)
    assert_array_equal(t_ard.frequencies_, t_iso.frequencies_ / L)
    assert rel_max(t_ard.transform(X_test), t_iso.transform(X_test / L)) < 1e-12


def test_meka_approximation_equals_scalar_on_scaled_inputs():
    X, _, X_test = data()
    G = hkern.meka(X, 10, n_clusters=3, sigma=L, seed=2)
    G0 = hkern.meka(X / L, 10, n_clusters=3, sigma=1.0, seed=2)
    assert_array_equal(G.to_dense(), G0.to_dense())
    labels, feats = G.features(X_test)
    labels0, feats0 = G0.features(X_test / L)
    assert_array_equal(labels, labels0)
    for (s, f), (s0, f0) in zip(feats, feats0):
        assert_array_equal(s, s0)
        assert_array_equal(f, f0)
    assert_array_equal(G.sigma, L)
    assert G.rel_error(seed=0) == G0.rel_error(seed=0)
    # fit_meka's approximation takes the user's coordinates too
    model = hkern.fit_meka(X, np.sin(X[:, 0]), 10, n_clusters=3, sigma=L, seed=2)
    assert_array_equal(model.approximation_.features(X_test)[0], labels0)


@pytest.mark.parametrize("method", ["oasis", "greedy", "rpcholesky", "uniform"])
def test_select_columns_equals_scalar_on_scaled_inputs(method):
    X, _, _ = data()
    a = hkern.select_columns(X, 30, method=method, sigma=L, seed=4)
    b = hkern.select_columns(X / L, 30, method=method, sigma=1.0, seed=4)
    assert_array_equal(a.indices_, b.indices_)
    assert_array_equal(a.C_, b.C_)
    assert_array_equal(a.W_inv_, b.W_inv_)
    c = hkern.oasis(X, 30, sigma=L, seed=4)
    assert_array_equal(c.indices_, hkern.oasis(X / L, 30, sigma=1.0, seed=4).indices_)


def test_oasis_mpi_single_rank_equals_serial():
    pytest.importorskip("mpi4py")
    from hkern.oasis.sharded import oasis_mpi
    X, _, _ = data()
    got = oasis_mpi(X, 30, sigma=L, seed=4)
    ref = hkern.oasis(X / L, 30, sigma=1.0, seed=4)
    assert_array_equal(got.indices_, ref.indices_)
    assert_array_equal(got.C_, ref.C_)


@pytest.mark.parametrize("name", ["ExactRegressor", "NystromRegressor", "RFFRegressor",
                                  "HierarchicalRegressor", "IndependentRegressor",
                                  "MekaRegressor", "SlklRegressor", "NystromTransformer",
                                  "MekaTransformer"])
def test_sklearn_estimators_accept_lengthscales(name):
    from sklearn.base import clone

    import hkern.sklearn as hs
    X, y, X_test = data()
    cls = getattr(hs, name)
    kw = {} if name == "ExactRegressor" else dict(random_state=0)
    if not name.endswith("Transformer"):
        kw.update(lam=1.0 if "Slkl" in name else 1e-2)
    if "Meka" in name:
        kw.update(r=10, n_clusters=3)
    elif name != "ExactRegressor":
        kw.update(r=40)
    ard = clone(cls(sigma=L, **kw)).fit(X, y)
    iso = cls(sigma=1.0, **kw).fit(X / L, y)
    out = "transform" if name.endswith("Transformer") else "predict"
    assert rel_max(getattr(ard, out)(X_test), getattr(iso, out)(X_test / L)) < 1e-12
    assert_array_equal(ard.get_params()["sigma"], L)


def test_grid_search_over_lengthscales():
    from sklearn.model_selection import GridSearchCV

    from hkern.sklearn import ExactRegressor
    X, y, _ = data()
    grid = GridSearchCV(ExactRegressor(), {"sigma": [L, 2 * L, 1.0]}, cv=3).fit(X, y)
    assert any(np.array_equal(np.atleast_1d(grid.best_params_["sigma"]), np.atleast_1d(s))
               for s in (L, 2 * L, 1.0))


def test_scalar_sigma_path_keeps_the_inputs():
    """A scalar sigma divides nothing: the fit sees the checked X itself (bitwise as before)."""
    X, y, _ = data()
    inputs = prepare_fit(X, y, kernel="gaussian", sigma=2.0, lam=1e-2, task="regression")
    assert inputs.sigma == inputs.bandwidth == 2.0 and inputs.lengthscales is None
    assert_array_equal(inputs.X, X)
    assert scale_inputs(X, None) is X
    assert check_sigma(np.float32(2.0), D) == (2.0, None)
    assert check_sigma(np.array(2.0), D) == (2.0, None)     # 0-d arrays are scalars
    model = hkern.fit_exact(X, y, sigma=2.0)
    assert model.sigma == 2.0 and "sigma=2," in repr(model)


def test_one_feature_array_equals_scalar_to_rounding():
    X, y, X_test = data()
    X1, T1 = X[:, :1], X_test[:, :1]
    a = hkern.fit_exact(X1, y, sigma=np.array([0.7]))
    b = hkern.fit_exact(X1, y, sigma=0.7)
    assert rel_max(a.predict(T1), b.predict(T1)) < 1e-12


BAD = [
    (np.ones(D - 1), "array of 3 lengthscales > 0"),
    (np.ones(D + 1), r"shape \(4,\) \(X has 3 feature\(s\)\)"),
    ([1.0, 0.0, 1.0], r"sigma\[1\] = 0.0"),
    ([1.0, 1.0, -2.0], r"sigma\[2\] = -2.0"),
    ([np.nan, 1.0, 1.0], r"finite; sigma\[0\] = nan"),
    ([1.0, np.inf, 1.0], r"finite; sigma\[1\] = inf"),
    (np.ones((1, D)), r"shape \(1, 3\)"),
    (np.ones((D, D)), r"shape \(3, 3\)"),
    ("1.0", "got the string '1.0'"),
    (None, "sigma must be a real number > 0"),
    ([1.0, 1j, 1.0], "complex"),
    (np.array([], dtype=float), r"shape \(0,\)"),
    (0.0, "sigma must be a real number > 0, got 0.0"),
    (-1.0, "sigma must be a real number > 0, got -1.0"),
    (np.nan, "sigma must be a real number > 0, got nan"),
    (True, "sigma must be a real number"),
]
ENTRY_POINTS = {
    "kernel_matrix": lambda X, y, s: hkern.kernel_matrix(X, sigma=s),
    "kernel_matvec": lambda X, y, s: hkern.kernel_matvec(X, X, y, sigma=s),
    "kernel_diag": lambda X, y, s: hkern.kernel_diag(X, sigma=s),
    "select_columns": lambda X, y, s: hkern.select_columns(X, 5, sigma=s),
    "meka": lambda X, y, s: hkern.meka(X, 5, n_clusters=2, sigma=s),
    **{name: (lambda f, kw: lambda X, y, s: f(X, y, sigma=s, **kw))(*FITS[name])
       for name in sorted(FITS)},
    "sklearn": lambda X, y, s: __import__("hkern.sklearn").sklearn.ExactRegressor(
        sigma=s).fit(X, y),
}


@pytest.mark.parametrize("sigma,match", BAD, ids=[repr(b[0])[:20] for b in BAD])
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_bad_sigma_refused(entry, sigma, match):
    X, y, _ = data(n=100)
    with pytest.raises(ValueError, match=match) as info:
        ENTRY_POINTS[entry](X, y, sigma)
    assert "sigma" in str(info.value)


# Selected sigma ("auto", "ard") is for fits only: what is not a fit refuses the strings.
NOT_FITS = {
    "kernel_matrix": ENTRY_POINTS["kernel_matrix"],
    "kernel_matvec": ENTRY_POINTS["kernel_matvec"],
    "kernel_diag": ENTRY_POINTS["kernel_diag"],
    "select_columns": ENTRY_POINTS["select_columns"],
    "meka_approximation": lambda X, y, s: hkern.meka(X, 5, n_clusters=2, sigma=s),
}


@pytest.mark.parametrize("sigma", ["auto", "ard"])
@pytest.mark.parametrize("entry", sorted(NOT_FITS))
def test_selection_strings_refused_outside_fits(entry, sigma):
    X, y, _ = data(n=100)
    with pytest.raises(ValueError, match=f"got the string '{sigma}'"):
        NOT_FITS[entry](X, y, sigma)


def test_string_sigma_names_the_accepted_forms():
    X, y, _ = data(n=50)
    with pytest.raises(ValueError, match=r"a real number > 0 \(one bandwidth for every feature\) "
                                         r"or a 1-D array of 3 lengthscales > 0 \(one per "):
        hkern.kernel_matrix(X, sigma="auto")
    with pytest.raises(ValueError, match=r"a number > 0, an array of one lengthscale per feature, "
                                         r"'auto' \(one bandwidth, selected\) or 'ard'"):
        hkern.fit_exact(X, y, sigma="median")


def test_tiny_lengthscales_overflowing_the_inputs_are_refused():
    X, y, _ = data(n=50)
    with pytest.raises(ValueError, match=r"X / sigma has values up to .* lengthscales in sigma "
                                         "are too small"):
        hkern.fit_exact(X, y, sigma=[1e-160, 1.0, 1.0])
    model = hkern.fit_exact(X, y, sigma=[1e-5, 1.0, 1.0])
    with pytest.raises(ValueError, match="X / sigma has values up to 1e[+]151"):
        model.predict(np.full((2, D), 1e146))      # within the bound, but not once scaled


def test_memory_of_the_scaled_copy_is_checked_first():
    """The scaled copy of X (8 n d bytes) is checked before it is made."""
    X, y, _ = data(n=100)
    with pytest.raises(hkern.MemoryLimitError, match="divided by the lengthscales"):
        hkern.fit_nystrom(X, y, r=10, sigma=L, max_memory=8 * X.size - 1)
    with pytest.raises(hkern.MemoryLimitError, match="divided by the lengthscales"):
        hkern.meka(X, 5, n_clusters=2, sigma=L, max_memory=8 * X.size - 1)
    # kernel_matrix counts the scaled copies of X and Y in its estimate.
    need_iso = 8 * (100 * 100 + 2 * 100 * D)
    hkern.kernel_matrix(X, sigma=1.0, max_memory=need_iso)
    with pytest.raises(hkern.MemoryLimitError):
        hkern.kernel_matrix(X, sigma=L, max_memory=need_iso)


@pytest.mark.parametrize("name", sorted(FITS))
def test_fit_estimates_count_the_scaled_copy(name):
    """Each fit's peak estimate with lengthscales is the scalar one plus the 8 n d bytes of the
    scaled copy of X, which lives as long as the fit (max_memory bounds the whole fit)."""
    fit, kw = FITS[name]
    X, y, _ = data()
    with recorded_estimates() as scalar:
        fit(X / L, y, sigma=1.0, **kw)
    with recorded_estimates() as ard:
        fit(X, y, sigma=L, **kw)
    copy = ("the inputs divided by the lengthscales", 8 * X.size)
    assert ard[0][0].startswith(copy[0]) and ard[0][1] == copy[1]
    assert [what for what, _ in ard[1:]] == [what for what, _ in scalar]
    # The fit's own estimates (the first after the copy) add the copy; fit_slkl_krrm's inner
    # fit_exact on the candidate rows holds no copy of its own.
    assert ard[1][1] == scalar[0][1] + 8 * X.size
    assert [need for _, need in ard[2:]] == [need for _, need in scalar[1:]]


def test_column_selection_estimate_counts_the_scaled_copy():
    X, _, _ = data()
    with recorded_estimates() as scalar:
        hkern.select_columns(X / L, 30, sigma=1.0, seed=0)
    with recorded_estimates() as ard:
        hkern.select_columns(X, 30, sigma=L, seed=0)
    assert ard[-1][1] == scalar[-1][1] + 8 * X.size


@pytest.mark.parametrize("name", ["hierarchical", "independent", "slkl", "meka", "nystrom_oasis",
                                  "exact"])
def test_same_answer_for_any_n_jobs(name):
    fit, kw = FITS[name]
    X, y, X_test = data()
    one = fit(X, y, sigma=L, n_jobs=1, **kw)
    two = fit(X, y, sigma=L, n_jobs=2, **kw)
    assert_array_equal(one.predict(X_test), two.predict(X_test))
    assert_array_equal(hkern.kernel_matrix(X, sigma=L, n_jobs=1),
                       hkern.kernel_matrix(X, sigma=L, n_jobs=2))


def test_caller_array_may_change_after_the_fit():
    X, y, X_test = data()
    sigma = L.copy()
    model = hkern.fit_exact(X, y, sigma=sigma)
    before = model.predict(X_test)
    sigma[:] = 1.0
    assert_array_equal(model.predict(X_test), before)

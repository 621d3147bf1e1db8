"""Bad input gets a ValueError naming the argument; awkward-but-valid input is converted."""
import numpy as np
import pytest

import hkern
from hkern._memory import MemoryLimitError
from hkern._threads import available_cpus, resolve_n_jobs
from hkern._validation import (
    check_array,
    check_int,
    check_n_features,
    check_positive,
    check_rank,
    check_seed,
    check_targets,
)

FITS = [
    lambda X, y, **kw: hkern.fit_exact(X, y, sigma=1.0, lam=0.1, **kw),
    lambda X, y, **kw: hkern.fit_nystrom(X, y, r=kw.pop("r", 5), sigma=1.0, lam=0.1, seed=0, **kw),
    lambda X, y, **kw: hkern.fit_rff(X, y, r=kw.pop("r", 5), sigma=1.0, lam=0.1, seed=0, **kw),
]
FIT_IDS = ["exact", "nystrom", "rff"]


def _raw_fit(fit):
    """The public fit function behind a FITS entry, and the extra arguments it needs."""
    name = FIT_IDS[FITS.index(fit)]
    f = {"exact": hkern.fit_exact, "nystrom": hkern.fit_nystrom, "rff": hkern.fit_rff}[name]
    return f, ({} if name == "exact" else {"r": 5})


@pytest.fixture
def data(rng):
    return rng.normal(size=(20, 3)), rng.normal(size=20)


@pytest.mark.parametrize("fit", FITS, ids=FIT_IDS)
class TestEveryFitRejects:
    def test_nan_in_X(self, fit, data):
        X, y = data
        X[3, 1] = np.nan
        with pytest.raises(ValueError, match=r"X contains NaN \(first at index \[3, 1\]"):
            fit(X, y)

    def test_inf_in_X(self, fit, data):
        X, y = data
        X[0, 0] = -np.inf
        with pytest.raises(ValueError, match="X contains infinity"):
            fit(X, y)

    def test_nan_in_y(self, fit, data):
        X, y = data
        y[5] = np.nan
        with pytest.raises(ValueError, match=r"y contains NaN \(first at index \[5\]"):
            fit(X, y)

    def test_1d_X(self, fit, data):
        X, y = data
        with pytest.raises(ValueError, match=r"X must be 2-D .* X\.reshape\(-1, 1\)"):
            fit(X[:, 0], y)

    def test_3d_X(self, fit, data):
        X, y = data
        with pytest.raises(ValueError, match="X must be 2-D .* 3 dimension"):
            fit(X[:, :, None], y)

    def test_length_mismatch(self, fit, data):
        X, y = data
        with pytest.raises(ValueError, match="y has 19 rows but X has 20 samples"):
            fit(X, y[:-1])

    def test_zero_samples(self, fit):
        with pytest.raises(ValueError, match=r"X has 0 sample\(s\)"):
            fit(np.zeros((0, 3)), np.zeros(0))

    def test_zero_features(self, fit):
        with pytest.raises(ValueError, match="X has 0 features"):
            fit(np.zeros((4, 0)), np.zeros(4))

    def test_complex_X(self, fit, data):
        X, y = data
        with pytest.raises(ValueError, match="X has a complex dtype"):
            fit(X + 1j, y)

    def test_sparse_X_names_the_dense_copy(self, fit, data):
        from scipy import sparse
        X, y = data
        message = (r"X is a scipy.sparse matrix \(shape \(20, 3\), 60 stored entries\)"
                   r".*X.toarray\(\)")
        with pytest.raises(ValueError, match=message):
            fit(sparse.csr_matrix(X), y)
        with pytest.raises(ValueError, match=message):
            fit(X, y).predict(sparse.csc_matrix(X))

    def test_string_X(self, fit, data):
        _, y = data
        with pytest.raises(ValueError, match="X must be an array of real numbers"):
            fit(np.full((20, 2), "a"), y)

    def test_wrong_n_features_at_predict(self, fit, data):
        X, y = data
        model = fit(X, y)
        with pytest.raises(ValueError, match="X has 2 features, but the model was fitted with 3"):
            model.predict(X[:, :2])

    def test_nan_at_predict(self, fit, data):
        X, y = data
        model = fit(X, y)
        X2 = X.copy()
        X2[1, 1] = np.nan
        with pytest.raises(ValueError, match="X contains NaN"):
            model.predict(X2)

    @pytest.mark.parametrize("sigma", [0.0, -1.0, np.nan, np.inf])
    def test_bad_sigma(self, fit, data, sigma):
        X, y = data
        f, kw = _raw_fit(fit)
        with pytest.raises(ValueError, match="sigma must be"):
            f(X, y, sigma=sigma, lam=0.1, **kw)

    @pytest.mark.parametrize("lam", [0.0, -1e-3, np.nan])
    def test_bad_lam(self, fit, data, lam):
        X, y = data
        f, kw = _raw_fit(fit)
        with pytest.raises(ValueError, match="lam must be"):
            f(X, y, sigma=1.0, lam=lam, **kw)

    def test_bad_kernel(self, fit, data):
        X, y = data
        with pytest.raises(ValueError, match="kernel must be one of"):
            fit(X, y, kernel="polynomial")

    def test_bad_task(self, fit, data):
        X, y = data
        with pytest.raises(ValueError, match="task must be one of 'regression', 'classification'"):
            fit(X, y, task="ranking")

    def test_single_class(self, fit, data):
        X, _ = data
        with pytest.raises(ValueError, match="y has a single class .* at least 2 classes"):
            fit(X, np.full(20, "a"), task="classification")

    def test_y_with_three_dims(self, fit, data):
        X, y = data
        with pytest.raises(ValueError, match=r"y must have shape \(n_samples,\) or"):
            fit(X, y[:, None, None])


@pytest.mark.parametrize("name", ["nystrom", "rff"])
def test_bad_r(data, name):
    X, y = data
    f = {"nystrom": hkern.fit_nystrom, "rff": hkern.fit_rff}[name]
    with pytest.raises(ValueError, match="r must be an integer >= 1, got 0"):
        f(X, y, r=0)
    with pytest.raises(ValueError, match="r must be an integer"):
        f(X, y, r=2.5)


def test_r_larger_than_n_is_reduced(data):
    X, y = data
    with pytest.warns(UserWarning, match=r"r=21 is larger than the number of training samples "
                                         r"n=20; using r=20"):
        model = hkern.fit_nystrom(X, y, r=21, sigma=1.0, lam=1e-2)
    assert len(model.landmarks_) == 20


def test_rff_accepts_r_above_n(data):
    X, y = data  # random features are not a subset of the data, so r > n is legitimate
    assert hkern.fit_rff(X, y, r=40, seed=0, sigma=1.0, lam=1e-2).predict(X).shape == (20,)


def test_rff_rejects_kernel_without_sampler(data):
    X, y = data
    with pytest.raises(ValueError, match="random Fourier features are not available for "
                                         "kernel='imq'"):
        hkern.fit_rff(X, y, r=5, kernel="imq", sigma=1.0, lam=1e-2)


def test_exact_refuses_above_memory_budget(data):
    X, y = data
    with pytest.raises(MemoryLimitError, match=r"fit_exact with n=20 \(the n x n kernel matrix\) "
                                               r"needs about .* more than max_memory="):
        hkern.fit_exact(X, y, solver="direct", max_memory=1000, sigma=1.0, lam=1e-2)
    # solver="auto" (the default) turns to PCG when the n x n matrix does not fit; nor does it
    with pytest.raises(MemoryLimitError, match=r"fit_exact\(solver='pcg'\) with n=20"):
        hkern.fit_exact(X, y, max_memory=1000, sigma=1.0, lam=1e-2)


class TestConversions:
    """float32, Fortran order, strided views, ints and lists are accepted and converted."""

    @pytest.mark.parametrize("convert", [
        lambda X: np.asfortranarray(X),
        lambda X: np.repeat(X, 2, axis=1)[:, ::2],
        lambda X: X.tolist(),
    ], ids=["fortran", "strided", "list"])
    def test_same_result(self, convert, rng):
        X = rng.normal(size=(30, 3))
        y = rng.normal(size=30)
        ref = hkern.fit_nystrom(X, y, r=10, seed=1, sigma=1.0, lam=1e-2).predict(X)
        got = hkern.fit_nystrom(convert(X), y, r=10, seed=1, sigma=1.0,
                                lam=1e-2).predict(convert(X))
        np.testing.assert_array_equal(got, ref)

    def test_float32(self, rng):
        X = rng.normal(size=(30, 3)).astype(np.float32)
        y = rng.normal(size=30).astype(np.float32)
        ref = hkern.fit_nystrom(X.astype(np.float64), y.astype(np.float64), r=10, seed=1,
                                sigma=1.0, lam=1e-2)
        got = hkern.fit_nystrom(X, y, r=10, seed=1, sigma=1.0, lam=1e-2)
        np.testing.assert_array_equal(got.predict(X), ref.predict(X.astype(np.float64)))
        assert got.predict(X).dtype == np.float64

    def test_integer_input(self):
        X = np.arange(12).reshape(6, 2)
        assert check_array(X).dtype == np.float64
        assert check_array(X).flags.c_contiguous

    def test_check_array_returns_contiguous_copy_of_strided(self, rng):
        X = rng.normal(size=(10, 6))[:, ::2]
        out = check_array(X)
        assert out.flags.c_contiguous and np.array_equal(out, X)


class TestScalarChecks:
    def test_positive(self):
        assert check_positive(2, "sigma") == 2.0
        for bad, shown in [(0, "0"), (-1, "-1"), (np.nan, "nan"), (np.inf, "inf"),
                           ("1", "'1'"), (True, "True"), (None, "None")]:
            with pytest.raises(ValueError, match=f"^sigma must be a real number > 0, got {shown}$"):
                check_positive(bad, "sigma")

    def test_int(self):
        assert check_int(np.int64(3), "r", low=1) == 3
        with pytest.raises(ValueError, match="r must be an integer"):
            check_int(True, "r")
        with pytest.raises(ValueError, match="split must be an integer <= 9, got 10"):
            check_int(10, "split", high=9)

    def test_rank(self):
        assert check_rank(5, 5) == 5
        with pytest.warns(UserWarning, match="r=6 is larger than the number of training samples "
                                             "n=5; using r=5"):
            assert check_rank(6, 5) == 5

    def test_n_features(self, rng):
        with pytest.raises(ValueError, match="X has 4 features, but the model was fitted with 3"):
            check_n_features(rng.normal(size=(2, 4)), 3)

    def test_targets_shapes(self):
        assert check_targets([1, 2, 3], 3).shape == (3,)
        assert check_targets(np.ones((3, 2)), 3).shape == (3, 2)
        with pytest.raises(ValueError, match="y has 0 outputs"):
            check_targets(np.ones((3, 0)), 3)
        with pytest.raises(ValueError, match="y must have shape"):
            check_targets(5.0, 3)


class TestSeed:
    def test_accepted_forms(self):
        g = np.random.default_rng(3)
        assert check_seed(g) is g
        assert isinstance(check_seed(None), np.random.Generator)
        assert check_seed(7).integers(1 << 30) == np.random.default_rng(7).integers(1 << 30)
        expected = np.random.default_rng(7).integers(1 << 30)
        assert check_seed(np.int32(7)).integers(1 << 30) == expected

    @pytest.mark.parametrize("bad", [-1, 1.5, "0", True, np.random.RandomState(0)])
    def test_rejected(self, bad):
        with pytest.raises(ValueError, match="seed must be"):
            check_seed(bad)

    def test_fit_rejects_bad_seed(self, data):
        X, y = data
        with pytest.raises(ValueError, match="seed must be None, a non-negative int or a "
                                             "numpy.random.Generator"):
            hkern.fit_nystrom(X, y, r=5, seed="abc", sigma=1.0, lam=1e-2)


class TestNJobs:
    def test_values(self):
        assert resolve_n_jobs(1) == 1
        assert resolve_n_jobs(3) == min(3, available_cpus())
        assert resolve_n_jobs(1000) == available_cpus()          # capped (issue 31)
        assert resolve_n_jobs(None) >= 1
        assert resolve_n_jobs(-1) == available_cpus()

    @pytest.mark.parametrize("bad", [0, 1.5, "2", True])
    def test_rejected(self, bad):
        with pytest.raises(ValueError, match="n_jobs must be None or a non-zero integer"):
            resolve_n_jobs(bad)


@pytest.mark.parametrize("call", [
    lambda X, y: hkern.fit_hierarchical(X, y, r=4, sigma=1.0, lam=0.1, seed=0),
    lambda X, y: hkern.fit_meka(X, y, 4, n_clusters=2, sigma=1.0, lam=0.1, seed=0),
    lambda X, y: hkern.fit_slkl(X, y, r=4, sigma=1.0, lam=0.1, seed=0),
    lambda X, y: hkern.fit_grief(X, y, r=4, grid_size=3, seed=0, max_iter=1),
    lambda X, y: hkern.select_columns(X, 4, sigma=1.0, seed=0),
    lambda X, y: hkern.kernel_matrix(X, sigma=1.0),
], ids=["hierarchical", "meka", "slkl", "grief", "select_columns", "kernel_matrix"])
def test_sparse_X_everywhere(call, rng):
    """scipy.sparse X: a clear error naming the dense copy, not NumPy's "setting an array
    element with a sequence"."""
    from scipy import sparse
    X = sparse.random(30, 3, density=0.5, random_state=0, format="csr")
    with pytest.raises(ValueError, match=r"X is a scipy.sparse matrix .*X.toarray\(\)"):
        call(X, rng.normal(size=30))

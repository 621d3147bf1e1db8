"""Kernels and the baseline fits at the edges of what they accept (issue 16).

Read-only and pandas inputs (defect 6), extreme but accepted magnitudes (defect 9), and the
smaller defects of item 12 (complex right-hand sides, missing labels, rcond = 1).
"""
import numpy as np
import pytest
from oracles import KERNELS, dense_kernel
from reliability_helpers import read_only

import hkern

pd = pytest.importorskip("pandas")


@pytest.fixture
def problem(rng):
    X = rng.normal(size=(60, 3))
    return X, np.sin(X[:, 0]) + 0.1 * X[:, 1]


FITS = {
    "exact": lambda X, y, **kw: hkern.fit_exact(X, y, seed=0, **kw),
    "nystrom": lambda X, y, **kw: hkern.fit_nystrom(X, y, r=20, seed=0, **kw),
    "rff": lambda X, y, **kw: hkern.fit_rff(X, y, r=40, seed=0, **kw),
    "rff_dual": lambda X, y, **kw: hkern.fit_rff(X, y, r=100, seed=0, **kw),
}


class TestReadOnlyAndPandas:
    """Defect 6: "buffer source array is read-only" for pandas 3 Series and memory maps."""

    @pytest.mark.parametrize("fit", sorted(FITS))
    def test_read_only_X_y_and_series(self, fit, problem):
        X, y = problem
        ref = FITS[fit](X, y).predict(X)
        np.testing.assert_array_equal(FITS[fit](read_only(X), read_only(y)).predict(read_only(X)),
                                      ref)
        series = pd.Series(y)
        np.testing.assert_array_equal(FITS[fit](pd.DataFrame(X), series).predict(X), ref)

    def test_memory_mapped_X(self, problem, tmp_path):
        X, y = problem
        np.save(tmp_path / "X.npy", X)
        Xm = np.load(tmp_path / "X.npy", mmap_mode="r")
        assert not Xm.flags.writeable
        np.testing.assert_array_equal(hkern.fit_rff(Xm, y, r=40, seed=0, sigma=1.0,
                                                    lam=1e-2).predict(Xm),
                                      hkern.fit_rff(X, y, r=40, seed=0, sigma=1.0,
                                                    lam=1e-2).predict(X))

    def test_kernel_functions(self, problem):
        X, _ = problem
        B = np.arange(2 * len(X), dtype=float).reshape(-1, 2)
        ref = hkern.kernel_matrix(X) @ B
        got = hkern.kernel_matvec(read_only(X), read_only(X), read_only(B))
        np.testing.assert_allclose(got, ref, rtol=1e-12)
        np.testing.assert_array_equal(hkern.kernel_matrix(read_only(X)), hkern.kernel_matrix(X))

    def test_classification_labels_from_pandas(self, problem):
        X, y = problem
        labels = pd.Series(np.where(y > 0, "up", "down"), dtype="string")
        model = hkern.fit_nystrom(X, labels, r=20, seed=0, task="classification", sigma=1.0,
                                  lam=1e-2)
        assert list(model.classes_) == ["down", "up"]


class TestExtremeMagnitudes:
    """Defect 9: sigma = 1e-300, or data and sigma near 1e150 / 1e-150, gave NaN or errors."""

    @pytest.mark.parametrize("kernel", KERNELS)
    @pytest.mark.parametrize("sigma, expected", [(1e-300, "identity"), (1e300, "ones")])
    def test_kernel_matrix_limits(self, kernel, sigma, expected, problem):
        X, _ = problem
        X = np.vstack([X, X[:1], np.zeros((2, 3))])        # a duplicate and two zero rows
        K = hkern.kernel_matrix(X, kernel=kernel, sigma=sigma)
        same = (np.abs(X[:, None, :] - X[None, :, :]).sum(axis=2) == 0).astype(float)
        np.testing.assert_array_equal(K, same if expected == "identity" else np.ones_like(K))

    @pytest.mark.parametrize("kernel", KERNELS)
    @pytest.mark.parametrize("scale", [1e149, 1e-150])
    def test_kernel_depends_on_X_over_sigma_only(self, kernel, scale, problem):
        X, _ = problem
        ref = hkern.kernel_matrix(X, kernel=kernel, sigma=1.3)
        got = hkern.kernel_matrix(X * scale, kernel=kernel, sigma=1.3 * scale)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)

    @pytest.mark.parametrize("fit", ["exact", "nystrom", "rff"])
    @pytest.mark.parametrize("scale", [1e149, 1e-150])
    def test_fits_depend_on_X_over_sigma_only(self, fit, scale, problem):
        X, y = problem
        ref = FITS[fit](X, y, sigma=1.3).predict(X[:10])
        got = FITS[fit](X * scale, y, sigma=1.3 * scale).predict(X[:10] * scale)
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)

    @pytest.mark.parametrize("fit", ["exact", "nystrom"])
    def test_tiny_sigma_is_the_identity_kernel(self, fit, problem):
        # K = I: alpha = (y - mean) / (1 + lam); Nystrom with W = I gives K~ = the landmark
        # indicator times 1 / (1 + jitter), and predictions mean + k (y - mean) / (k + lam)
        # there; elsewhere (no kernel mass) the mean.
        X, y = problem
        lam = 0.1
        model = FITS[fit](X, y, sigma=1e-300, lam=lam)
        pred, mu = model.predict(X), y.mean()
        if fit == "exact":
            np.testing.assert_allclose(pred - mu, (y - mu) / (1 + lam), rtol=1e-13)
        else:
            on = np.isin(np.arange(len(X)), model.landmark_indices_)
            k = 1 / (1 + model.jitter_)
            np.testing.assert_allclose(pred[on] - mu, (y[on] - mu) * k / (k + lam), rtol=1e-13)
            np.testing.assert_array_equal(pred[~on], model.y_mean_[0])
        np.testing.assert_array_equal(model.predict(X[:5] + 0.5), model.y_mean_[0])

    @pytest.mark.parametrize("fit", ["exact", "nystrom"])
    def test_huge_sigma_is_the_constant_kernel(self, fit, problem):
        # K = 1 1^T: f = mean + 1^T (1 1^T + lam I)^{-1} (y - mean) = the mean everywhere.
        X, y = problem
        lam = 0.1
        pred = FITS[fit](X, y, sigma=1e300, lam=lam).predict(np.vstack([X, X + 5]))
        np.testing.assert_allclose(pred, y.mean(), rtol=1e-10)

    def test_rff_at_huge_sigma_is_constant_and_finite(self, problem):
        X, y = problem
        pred = hkern.fit_rff(X, y, r=40, sigma=1e300, seed=0, lam=1e-2).predict(np.vstack([X,
                                                                                           X + 5]))
        assert np.isfinite(pred).all()
        np.testing.assert_allclose(pred, pred[0], rtol=1e-12)

    def test_rff_refuses_phases_that_overflow(self, problem):
        X, y = problem
        with pytest.raises(ValueError, match="sigma is too small next to X for random Fourier"):
            hkern.fit_rff(X, y, r=40, sigma=1e-300, seed=0, lam=1e-2)

    @pytest.mark.parametrize("call", [
        lambda X, s: hkern.kernel_matrix(X, sigma=s),
        lambda X, s: hkern.kernel_matvec(X, X, np.ones(len(X)), sigma=s),
        lambda X, s: hkern.fit_exact(X, X[:, 0], sigma=s, lam=1e-2),
        lambda X, s: hkern.fit_nystrom(X, X[:, 0], r=5, sigma=s, lam=1e-2),
        lambda X, s: hkern.oasis(X, 3, sigma=s),
        lambda X, s: hkern.meka(X, 2, n_clusters=2, sigma=s),
        lambda X, s: hkern.fit_hierarchical(X, X[:, 0], r=4, sigma=s, lam=1e-2),
    ], ids=["kernel_matrix", "kernel_matvec", "exact", "nystrom", "oasis", "meka", "hck"])
    def test_data_and_sigma_both_below_1e152_refused(self, call, problem):
        # Squared norms of data below 1e-154 underflow: at 2^-530 (3e-160) the kernel matrix
        # was off by 0.98.  With a sigma that makes the distances negligible it is still right.
        X = problem[0] * 2.0**-530
        with pytest.raises(ValueError, match="squared distances of values below 1e-152 "
                                             "underflow"):
            call(X, 2.0**-530)
        np.testing.assert_array_equal(hkern.kernel_matrix(X, sigma=1.0), 1.0)

    @pytest.mark.parametrize("name", ["X", "y"])
    def test_values_above_1e150_refused(self, name, problem):
        X, y = problem
        args = {"X": X * 1e200, "y": y} if name == "X" else {"X": X, "y": y * 1e200}
        with pytest.raises(ValueError, match=f"{name} has values up to .* hkern accepts "
                                             r"\|values\| <= 1e\+150"):
            hkern.fit_exact(args["X"], args["y"], sigma=1.0, lam=1e-2)


class TestSmallDefects:
    """Defect 12 items in the kernels, the targets and the Nystrom fit."""

    def test_complex_rhs_refused(self, problem):
        X, _ = problem
        with pytest.raises(ValueError, match="B has a complex dtype"):
            hkern.kernel_matvec(X, X, np.ones(len(X)) * (1 + 1j))

    @pytest.mark.parametrize("labels, match", [
        (["a", None, "b"], r"y contains a missing label \(None first at index \[1\]"),
        (["a", np.nan, "b"], r"y contains a missing label \(nan first"),
        (["a", 1, "b"], r"y has class labels of types \['int', 'str'\] that cannot be compared"),
    ])
    def test_bad_labels(self, labels, match, problem):
        X, _ = problem
        y = np.array(labels * 20, dtype=object)
        with pytest.raises(ValueError, match=match):
            hkern.fit_nystrom(X, y, r=10, task="classification", sigma=1.0, lam=1e-2)

    def test_pandas_missing_label(self, problem):
        X, _ = problem
        y = pd.Series(["a", pd.NA, "b"] * 20, dtype=object)
        with pytest.raises(ValueError, match="y contains a missing label"):
            hkern.fit_exact(X, y, task="classification", sigma=1.0, lam=1e-2)

    @pytest.mark.parametrize("rcond", [1, 1.5])
    def test_rcond_that_drops_every_eigenvalue_refused(self, rcond, problem):
        X, y = problem
        with pytest.raises(ValueError, match=r"rcond must be a real number in \[0, 1\)"):
            hkern.fit_nystrom(X, y, r=10, rcond=rcond, sigma=1.0, lam=1e-2)

    def test_rcond_just_below_one_is_a_jitter_of_w_s_size(self, problem):
        # A jitter as large as W's trace is a strong shrinkage, not an error: the model is
        # KRR with C (W + jitter I)^{-1} C^T.
        X, y = problem
        model = hkern.fit_nystrom(X, y, r=10, rcond=0.999999, seed=0, sigma=1.0, lam=1e-2)
        assert model.rank_ == 10 and model.jitter_ == pytest.approx(0.999999 * 10)
        C = dense_kernel(X, model.landmarks_, sigma=1.0)
        W = dense_kernel(model.landmarks_, model.landmarks_, sigma=1.0)
        K_nys = C @ np.linalg.solve(W + model.jitter_ * np.eye(10), C.T)
        alpha = np.linalg.solve(K_nys + 1e-2 * np.eye(len(X)), y - y.mean())
        assert np.abs(model.predict(X) - y.mean() - K_nys @ alpha).max() < 1e-10 * np.abs(y).max()

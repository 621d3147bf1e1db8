"""Baselines against dense references built from their mathematical definitions."""
import numpy as np
import pytest
import scipy.linalg
from oracles import dense_kernel, nystrom_krr, rel_norm, rff_features
from problems import smooth_regression

import hkern


@pytest.fixture
def problem(rng):
    return smooth_regression(rng)


class TestExact:
    def test_equals_dense_solve(self, problem):
        X, y, X_test = problem
        sigma, lam = 0.7, 1e-2
        model = hkern.fit_exact(X, y, sigma=sigma, lam=lam)
        K = dense_kernel(X, X, sigma=sigma)
        # the model: y's mean plus the GP posterior of y - mean (hkern._gp)
        alpha = scipy.linalg.solve(K + lam * np.eye(len(X)), y - y.mean(), assume_a="pos")
        assert rel_norm(model.dual_coef_[:, 0], alpha) < 1e-10
        assert rel_norm(model.predict(X_test),
                        y.mean() + dense_kernel(X_test, X, sigma=sigma) @ alpha) < 1e-10

    def test_blocked_cholesky_path(self, rng):
        # n above the 4096-row Cholesky block: the solve goes through several dpotrf blocks.
        X = rng.normal(size=(4500, 2))
        y = np.cos(X[:, 0])
        model = hkern.fit_exact(X, y, sigma=1.0, lam=0.1)
        K = dense_kernel(X, X, sigma=1.0)
        yc = y - y.mean()
        residual = K @ model.dual_coef_[:, 0] + 0.1 * model.dual_coef_[:, 0] - yc
        assert np.linalg.norm(residual) / np.linalg.norm(yc) < 1e-10

    def test_multi_output(self, problem):
        X, y, X_test = problem
        Y = np.column_stack([y, -2 * y + 1])
        model = hkern.fit_exact(X, Y, sigma=0.7, lam=1e-2)
        single = [hkern.fit_exact(X, Y[:, j], sigma=0.7, lam=1e-2).predict(X_test) for j in (0, 1)]
        pred = model.predict(X_test)
        assert pred.shape == (60, 2)
        for j in (0, 1):
            assert rel_norm(pred[:, j], single[j]) < 1e-12

    @pytest.mark.parametrize("kernel", ["laplace", "imq", "matern12", "matern32", "matern52"])
    def test_other_kernels(self, problem, kernel):
        X, y, X_test = problem
        model = hkern.fit_exact(X, y, kernel=kernel, sigma=0.9, lam=1e-2)
        K = dense_kernel(X, kernel=kernel, sigma=0.9)
        alpha = scipy.linalg.solve(K + 1e-2 * np.eye(len(X)), y - y.mean(), assume_a="pos")
        assert rel_norm(model.dual_coef_[:, 0], alpha) < 1e-10


class TestNystrom:
    def test_equals_dense_closed_form(self, problem):
        """KRR with the kernel matrix C W^{-1} C^T, solved densely at small n."""
        X, y, X_test = problem
        sigma, lam, r = 0.5, 1e-2, 25
        model = hkern.fit_nystrom(X, y, r=r, sigma=sigma, lam=lam, seed=3)
        Z = X[model.landmark_indices_]
        np.testing.assert_array_equal(Z, model.landmarks_)
        K_nys, alpha, reference = nystrom_krr(X, Z, y - y.mean(), lam, sigma=sigma,
                                              X_test=X_test)
        assert rel_norm(model.predict(X_test), y.mean() + reference) < 1e-9
        assert rel_norm(model.predict(X), y.mean() + K_nys @ alpha) < 1e-9

    def test_all_points_as_landmarks_is_exact_krr(self, problem):
        X, y, X_test = problem
        X, y = X[:80], y[:80]
        nys = hkern.fit_nystrom(X, y, r=80, sigma=0.5, lam=1e-2, seed=0, rcond=0.0)
        exact = hkern.fit_exact(X, y, sigma=0.5, lam=1e-2)
        assert rel_norm(nys.predict(X_test), exact.predict(X_test)) < 1e-8

    def test_landmarks_uniform_without_replacement(self, problem):
        X, y, _ = problem
        model = hkern.fit_nystrom(X, y, r=100, seed=0, sigma=1.0, lam=1e-2)
        idx = model.landmark_indices_
        assert len(np.unique(idx)) == 100 and idx.min() >= 0 and idx.max() < len(X)

    def test_rank_deficient_landmarks_are_handled(self, rng):
        # Duplicated landmarks make W exactly singular: the jitter on its diagonal (rcond times
        # its trace, grown where W needs more) makes it positive definite and changes
        # nothing else.  The coefficients solve the fit's normal equations
        # (C^T C + lam (W + jitter I)) beta = C^T y to a backward error of rounding (an
        # explicit inverse of W + jitter I, condition 1e12, is no reference), and the
        # predictions are the pseudo-inverse form's to the jitter's size.
        X = np.repeat(rng.normal(size=(30, 2)), 2, axis=0)
        y = np.sin(X[:, 0])
        model = hkern.fit_nystrom(X, y, r=60, sigma=1.0, lam=1e-2, seed=0)
        assert model.rank_ == 60 and 60e-12 <= model.jitter_ <= 60e-9
        C = dense_kernel(X, model.landmarks_, sigma=1.0)
        W = dense_kernel(model.landmarks_, model.landmarks_, sigma=1.0)
        A = C.T @ C + 1e-2 * (W + model.jitter_ * np.eye(60))
        beta, b = model.coef_[:, 0], C.T @ (y - y.mean())
        backward = np.linalg.norm(A @ beta - b) / (np.linalg.norm(A, 2) * np.linalg.norm(beta)
                                                   + np.linalg.norm(b))
        assert backward < 1e-14
        K_nys = C @ np.linalg.pinv(W, rcond=1e-12, hermitian=True) @ C.T
        alpha = np.linalg.solve(K_nys + 1e-2 * np.eye(len(X)), y - y.mean())
        assert rel_norm(model.predict(X), y.mean() + K_nys @ alpha) < 1e-8


class TestRFF:
    def test_equals_dense_ridge_on_its_features(self, problem):
        X, y, X_test = problem
        lam = 1e-2
        model = hkern.fit_rff(X, y, r=50, sigma=0.8, lam=lam, seed=1)
        Z = rff_features(X, model.frequencies_, model.offsets_)
        w = np.linalg.solve(Z.T @ Z + lam * np.eye(50), Z.T @ (y - y.mean()))
        assert rel_norm(model.coef_[:, 0], w) < 1e-10
        assert rel_norm(model.predict(X_test), y.mean() + rff_features(
            X_test, model.frequencies_, model.offsets_) @ w) < 1e-10

    @pytest.mark.parametrize("kernel", ["gaussian", "laplace", "matern32"])
    def test_features_approximate_the_kernel(self, rng, kernel):
        X = rng.normal(size=(40, 3))
        model = hkern.fit_rff(X, np.zeros(40), r=20000, kernel=kernel, sigma=1.5, seed=0, lam=1e-2)
        Z = rff_features(X, model.frequencies_, model.offsets_)
        K = dense_kernel(X, kernel=kernel, sigma=1.5)
        # Each entry is a mean of 20000 bounded terms: standard error <= 1/sqrt(20000) = 0.007.
        assert np.abs(Z @ Z.T - K).max() < 0.05


class TestClassification:
    @pytest.mark.parametrize("fit", ["exact", "nystrom", "rff"])
    def test_three_classes_with_string_labels(self, rng, fit):
        centres = np.array([[0, 0], [4, 0], [0, 4]])
        labels = np.array(["a", "b", "c"])
        codes = rng.integers(0, 3, size=300)
        X = centres[codes] + 0.5 * rng.normal(size=(300, 2))
        f = getattr(hkern, f"fit_{fit}")
        kw = {} if fit == "exact" else {"r": 60, "seed": 0}
        model = f(X, labels[codes], sigma=1.0, lam=1e-2, task="classification", **kw)
        assert list(model.classes_) == ["a", "b", "c"]
        pred = model.predict(X)
        assert pred.dtype == labels.dtype and np.mean(pred == labels[codes]) > 0.97
        assert model.decision_function(X).shape == (300, 3)

    def test_one_solve_equals_per_class_regressions(self, rng):
        X = rng.normal(size=(100, 2))
        y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
        model = hkern.fit_exact(X, y, sigma=1.0, lam=0.1, task="classification")
        # each class's scores: kernel ridge regression of its +-1 column (no mean: the
        # one-vs-rest targets are fitted as they are)
        K = dense_kernel(X, X, sigma=1.0)
        for j, c in enumerate(model.classes_):
            ovr = K @ np.linalg.solve(K + 0.1 * np.eye(100), np.where(y == c, 1.0, -1.0))
            assert rel_norm(model.decision_function(X)[:, j], ovr) < 1e-10

    def test_binary(self, rng):
        X = rng.normal(size=(100, 2))
        y = np.where(X[:, 0] > 0, 5, -5)
        model = hkern.fit_nystrom(X, y, r=30, sigma=1.0, lam=1e-2, seed=0, task="classification")
        assert set(model.predict(X)) <= {5, -5}
        assert np.mean(model.predict(X) == y) > 0.95


class TestReproducibility:
    @pytest.mark.parametrize("fit", ["nystrom", "rff"])
    def test_same_seed_same_model(self, problem, fit):
        X, y, X_test = problem
        f = getattr(hkern, f"fit_{fit}")
        a = f(X, y, r=30, seed=5).predict(X_test)
        b = f(X, y, r=30, seed=5).predict(X_test)
        c = f(X, y, r=30, seed=6).predict(X_test)
        np.testing.assert_array_equal(a, b)
        assert not np.array_equal(a, c)

    def test_generator_seed(self, problem):
        X, y, X_test = problem
        a = hkern.fit_nystrom(X, y, r=30, seed=np.random.default_rng(5), sigma=1.0,
                              lam=1e-2).predict(X_test)
        b = hkern.fit_nystrom(X, y, r=30, seed=5, sigma=1.0, lam=1e-2).predict(X_test)
        np.testing.assert_array_equal(a, b)

    @pytest.mark.parametrize("fit", ["exact", "nystrom", "rff"])
    def test_n_jobs_1_and_2_identical(self, rng, fit):
        X = rng.normal(size=(3000, 5))
        y = np.sin(X).sum(1)
        f = getattr(hkern, f"fit_{fit}")
        kw = {} if fit == "exact" else {"r": 300, "seed": 0}
        one = f(X, y, sigma=2.0, lam=1e-2, n_jobs=1, **kw)
        two = f(X, y, sigma=2.0, lam=1e-2, n_jobs=2, **kw)
        one.n_jobs = two.n_jobs = 1
        p1, p2 = one.predict(X[:500]), two.predict(X[:500])
        np.testing.assert_array_equal(p1, p2)


def test_nbytes_counts_model_arrays(problem):
    X, y, _ = problem
    model = hkern.fit_nystrom(X, y, r=30, seed=0, sigma=1.0, lam=1e-2)
    # and the two r x r factors of its posterior (the predictive variance), and its mean,
    # signal and noise variances (one per output)
    expected = model.landmarks_.nbytes + model.coef_.nbytes + model.landmark_indices_.nbytes \
        + 2 * 8 * 30 * 30 + 3 * 8
    assert model.nbytes == expected


def test_rff_dual_path_equals_primal(rng):
    """r > n goes through the n x n dual system; it must give the primal ridge solution."""
    X = rng.normal(size=(30, 2))
    y = np.sin(X[:, 0])
    model = hkern.fit_rff(X, y, r=80, sigma=1.0, lam=1e-2, seed=0)
    Z = rff_features(X, model.frequencies_, model.offsets_)
    w = np.linalg.solve(Z.T @ Z + 1e-2 * np.eye(80), Z.T @ (y - y.mean()))
    assert rel_norm(model.coef_[:, 0], w) < 1e-10

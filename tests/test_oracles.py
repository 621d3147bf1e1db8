"""The oracles of tests/oracles.py against independent facts at small n.

Every test file checks hkern against these oracles, so each is held here to something that does
not share its code: values worked out by hand at known distances, scikit-learn's independent
kernels, SciPy's Gaussian density, the conditioning of a joint Gaussian through its precision
matrix, Woodbury's identity, and limits where a method is exact.  (The HCK oracle has its own
file, test_oracles_hck.py.)
"""
import math

import numpy as np
import pytest
import scipy.stats
from numpy.testing import assert_allclose
from oracles import (
    KERNELS,
    dense_gp_posterior,
    dense_kernel,
    dense_lml,
    dense_logdet,
    grief_dense_phi,
    meka_link,
    nystrom_krr,
    nystrom_map,
    rel_max,
    rel_norm,
    rff_features,
    slkl_beta,
    slkl_dense,
    slkl_G,
)
from sklearn.gaussian_process.kernels import Matern, RationalQuadratic
from sklearn.metrics.pairwise import laplacian_kernel, rbf_kernel


# --------------------------------------------------------------------------------------------
# relative errors
# --------------------------------------------------------------------------------------------
def test_rel_norm_and_rel_max_known_values():
    ref = np.array([[3.0, 0.0], [0.0, -4.0]])                  # ||ref||_F = 5, max|ref| = 4
    got = ref + np.array([[0.0, 1.0], [0.0, 0.0]])
    assert rel_norm(got, ref) == 0.2
    assert rel_max(got, ref) == 0.25
    assert rel_norm(ref, ref) == rel_max(ref, ref) == 0.0
    # a zero reference: the absolute error
    assert rel_norm([0.0, 1e-20], [0.0, 0.0]) == 1e-20
    assert rel_max([0.0, -2e-20], [0.0, 0.0]) == 2e-20
    assert rel_max(np.empty((0, 3)), np.empty((0, 3))) == 0.0
    # no broadcasting: (n,) against (n, 1) is an error, not an n x n comparison
    with pytest.raises(AssertionError, match="shapes differ"):
        rel_norm(np.ones(3), np.ones((3, 1)))
    with pytest.raises(AssertionError, match="shapes differ"):
        rel_max(np.ones(3), np.ones(4))


# --------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------
def _by_hand(kernel, r, l1, s):
    """k at Euclidean distance r and L1 distance l1, bandwidth s, with the math module."""
    if kernel == "gaussian":
        return math.exp(-r * r / (2 * s * s))
    if kernel == "laplace":
        return math.exp(-l1 / s)
    if kernel == "imq":
        return s / math.sqrt(r * r + s * s)
    if kernel == "matern12":
        return math.exp(-r / s)
    if kernel == "matern32":
        a = math.sqrt(3) * r / s
        return (1 + a) * math.exp(-a)
    a = math.sqrt(5) * r / s
    return (1 + a + a * a / 3) * math.exp(-a)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("sigma", [0.5, 2.0, 5.0])
def test_kernel_at_known_distances(kernel, sigma):
    # x - y = (3, 4): Euclidean 5, L1 7; (1, 0): 1 and 1; (0, 0): 0.
    X = np.array([[0.0, 0.0], [1.0, 2.0]])
    Y = np.array([[3.0, 4.0], [1.0, 2.0], [2.0, 2.0]])
    K = dense_kernel(X, Y, kernel=kernel, sigma=sigma)
    expected = np.array([[_by_hand(kernel, 5.0, 7.0, sigma),
                          _by_hand(kernel, math.sqrt(5.0), 3.0, sigma),
                          _by_hand(kernel, math.sqrt(8.0), 4.0, sigma)],
                         [_by_hand(kernel, math.sqrt(8.0), 4.0, sigma), 1.0,
                          _by_hand(kernel, 1.0, 1.0, sigma)]])
    assert K.shape == (2, 3)
    assert_allclose(K, expected, rtol=1e-14, atol=0)
    assert K[1, 1] == 1.0                               # k(x, x) = 1 exactly


def test_gaussian_at_one_bandwidth_is_exp_minus_half():
    X = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.7]])
    assert dense_kernel(X, sigma=1.7)[0, 1] == np.exp(-0.5)
    assert dense_kernel(X, sigma=1.7)[1, 0] == np.exp(-0.5)


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_equals_scikit_learn(kernel):
    """scikit-learn's own implementations of the same functions, on random points."""
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(30, 4)), rng.normal(size=(20, 4))
    sigma = 1.3
    if kernel == "gaussian":
        ref = rbf_kernel(X, Y, gamma=1 / (2 * sigma**2))
    elif kernel == "laplace":
        ref = laplacian_kernel(X, Y, gamma=1 / sigma)
    elif kernel == "imq":                               # (1 + r^2 / (2 alpha l^2))^-alpha
        ref = RationalQuadratic(length_scale=sigma, alpha=0.5)(X, Y)
    else:
        nu = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}[kernel]
        ref = Matern(length_scale=sigma, nu=nu)(X, Y)
    assert_allclose(dense_kernel(X, Y, kernel=kernel, sigma=sigma), ref, rtol=1e-12, atol=0)


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_symmetry_default_y_and_positive_definiteness(kernel):
    X = np.random.default_rng(1).normal(size=(25, 3))
    K = dense_kernel(X, kernel=kernel, sigma=0.9)
    np.testing.assert_array_equal(K, dense_kernel(X, X, kernel=kernel, sigma=0.9))
    np.testing.assert_array_equal(K, K.T)
    np.testing.assert_array_equal(np.diag(K), 1.0)
    assert np.linalg.eigvalsh(K).min() > 0


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_at_extreme_bandwidths(kernel):
    """sigma -> 0: the identity on distinct points (1 on repeated ones); sigma -> infinity: all
    ones; the Matern kernels at an infinite scaled distance are 0, not inf * 0 = NaN."""
    X = np.array([[0.0, 0.0], [1.0, -1.0], [0.0, 0.0], [1e-3, 0.0]])
    same = np.array([[1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 1]], dtype=float)
    np.testing.assert_array_equal(dense_kernel(X, kernel=kernel, sigma=1e-300), same)
    np.testing.assert_array_equal(dense_kernel(X, kernel=kernel, sigma=1e300), 1.0)
    far = dense_kernel(np.zeros((1, 1)), np.array([[1e200]]), kernel=kernel, sigma=1e-200)
    assert far[0, 0] == 0.0
    # and it depends on X / sigma only
    assert_allclose(dense_kernel(X * 1e149, kernel=kernel, sigma=1.3e149),
                    dense_kernel(X, kernel=kernel, sigma=1.3), rtol=1e-14, atol=1e-300)


def test_kernel_refuses_an_unknown_family():
    with pytest.raises(ValueError, match="kernel must be one of"):
        dense_kernel(np.zeros((1, 1)), kernel="cauchy", sigma=1.0)


# --------------------------------------------------------------------------------------------
# Gaussian processes
# --------------------------------------------------------------------------------------------
def _spd(n, seed):
    A = np.random.default_rng(seed).normal(size=(n, n))
    return A @ A.T / n + 0.5 * np.eye(n)


def test_logdet_and_lml_against_scipy():
    n = 12
    K = _spd(n, 2)
    y = np.random.default_rng(3).normal(size=n)
    sign, ld = np.linalg.slogdet(K)
    assert sign > 0 and abs(dense_logdet(K) - ld) <= 1e-12 * abs(ld)
    ref = scipy.stats.multivariate_normal(mean=np.zeros(n), cov=K).logpdf(y)
    assert abs(dense_lml(K, y) - ref) <= 1e-12 * abs(ref)
    # noise adds to the diagonal; columns of Y are independent draws: the sum
    ref_noise = scipy.stats.multivariate_normal(mean=np.zeros(n), cov=K + 0.3 * np.eye(n))
    assert abs(dense_lml(K, y, 0.3) - ref_noise.logpdf(y)) <= 1e-12 * abs(ref_noise.logpdf(y))
    Y = np.column_stack([y, np.cos(np.arange(n))])
    cols = sum(ref_noise.logpdf(Y[:, j]) for j in range(2))
    assert abs(dense_lml(K, Y, 0.3) - cols) <= 1e-12 * abs(cols)
    # the standard normal in two dimensions at its mean: log(1 / (2 pi))
    assert abs(dense_lml(np.eye(2), np.zeros(2)) + math.log(2 * math.pi)) < 1e-15
    with pytest.raises(ValueError, match="not positive definite"):
        dense_logdet(-np.eye(3))
    with pytest.raises(ValueError, match="n x n"):
        dense_lml(np.eye(3), np.ones(4))


def test_gp_posterior_equals_conditioning_through_the_joint_precision():
    """For the joint Gaussian of (y, f*) with covariance S and precision P = S^-1, the law of f*
    given y has covariance P_**^-1 and mean -P_**^-1 P_*y y: no solve with K + noise I."""
    rng = np.random.default_rng(4)
    X, Xs = rng.normal(size=(15, 2)), rng.normal(size=(4, 2))
    A = np.vstack([X, Xs])
    S = dense_kernel(A, sigma=1.1)
    noise = 0.2
    S[:15, :15] += noise * np.eye(15)
    y = rng.normal(size=15)
    P = np.linalg.inv(S)
    cov = np.linalg.inv(P[15:, 15:])
    mean_ref = -cov @ P[15:, :15] @ y
    mean, var = dense_gp_posterior(dense_kernel(X, sigma=1.1), dense_kernel(Xs, X, sigma=1.1),
                                   np.ones(4), y, noise)
    assert rel_norm(mean, mean_ref) < 1e-10
    assert rel_norm(var, np.diag(cov)) < 1e-10
    # at a training point with tiny noise the posterior interpolates and the variance vanishes
    mean0, var0 = dense_gp_posterior(dense_kernel(X, sigma=1.1), dense_kernel(X[:3], X, sigma=1.1),
                                     np.ones(3), y, 1e-12)
    assert rel_norm(mean0, y[:3]) < 1e-8 and np.abs(var0).max() < 1e-8


# --------------------------------------------------------------------------------------------
# Nystrom and random features
# --------------------------------------------------------------------------------------------
def test_nystrom_with_every_point_a_landmark_is_exact_krr():
    rng = np.random.default_rng(5)
    X, Xt = rng.uniform(-1, 1, size=(40, 2)), rng.uniform(-1, 1, size=(7, 2))
    y = np.sin(3 * X[:, 0])
    K_nys, alpha, pred = nystrom_krr(X, X, y, 0.1, sigma=0.3, X_test=Xt)
    K = dense_kernel(X, sigma=0.3)
    assert rel_max(K_nys, K) < 1e-11              # cond(K) ~ 3e4: K K^-1 K costs ~cond * eps
    alpha_ref = np.linalg.solve(K + 0.1 * np.eye(40), y)
    assert rel_norm(alpha, alpha_ref) < 1e-11
    assert rel_norm(pred, dense_kernel(Xt, X, sigma=0.3) @ alpha_ref) < 1e-11
    _, _, none = nystrom_krr(X, X[:5], y, 0.1, sigma=0.3)
    assert none is None


def test_nystrom_is_exact_on_landmark_rows():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(50, 3))
    idx = [3, 17, 29, 41]
    K_nys, _, _ = nystrom_krr(X, X[idx], np.ones(50), 1.0, kernel="matern32", sigma=0.8)
    K = dense_kernel(X, kernel="matern32", sigma=0.8)
    assert rel_max(K_nys[idx], K[idx]) < 1e-12
    assert np.abs(K_nys - K).max() > 1e-3          # and only there


def test_nystrom_refuses_an_ill_conditioned_landmark_matrix():
    X = np.array([[0.0], [1e-9], [3.0]])
    with pytest.raises(AssertionError, match="ill-conditioned"):
        nystrom_krr(X, X[:2], np.ones(3), 1.0, sigma=1.0)


def test_rff_features_approximate_the_gaussian_kernel():
    """w ~ N(0, I / sigma^2), b ~ U(0, 2 pi): E[z(x) z(y)] = k(x, y); each entry of Z Z^T is a
    mean of r terms bounded by 2 / r * r, so 5 standard errors of 1 / sqrt(r / 2) bound it."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(8, 3))
    r, sigma = 40_000, 1.4
    W, b = rng.normal(size=(r, 3)) / sigma, rng.uniform(0, 2 * np.pi, size=r)
    Z = rff_features(X, W, b)
    assert Z.shape == (8, r)
    assert np.abs(Z @ Z.T - dense_kernel(X, sigma=sigma)).max() < 5 * np.sqrt(2 / r)
    assert np.abs(Z[0] - np.sqrt(2 / r) * np.cos(W @ X[0] + b)).max() <= 1e-14 * np.sqrt(2 / r)


# --------------------------------------------------------------------------------------------
# SLKL
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def slkl_case():
    rng = np.random.default_rng(8)
    X = rng.uniform(-2, 2, size=(30, 2))
    C = dense_kernel(X, X[::3], sigma=1.0)              # 10 candidate columns
    mu = rng.uniform(0.1, 2.0, size=10)
    mu[[2, 7]] = 0.0
    return C, mu, np.sin(X[:, 0]), 0.7, 0.05


def test_slkl_at_zero_weights(slkl_case):
    # mu = 0: lam I + C D C^T = lam I, so a = C^T y / lam, b_m = ||c_m||^2 / lam, F = ||y||^2
    C, _, y, lam, nu = slkl_case
    a, b, F, Kinv = slkl_dense(C, np.zeros(C.shape[1]), y, lam, nu)
    assert rel_norm(a, C.T @ y / lam) < 1e-14
    assert rel_norm(b, np.sum(C**2, axis=0) / lam) < 1e-14
    assert abs(F - y @ y) <= 1e-14 * (y @ y)
    assert rel_max(Kinv, np.eye(len(y)) / lam) < 1e-15


def test_slkl_quantities_by_woodbury(slkl_case):
    """(lam I + C_A D_A C_A^T)^-1 = (I - C_A G C_A^T / lam) / lam with G of slkl_G (Woodbury),
    F = lam y^T K^-1 y + nu sum(mu), a_m = c_m^T K^-1 y, b_m = c_m^T K^-1 c_m."""
    C, mu, y, lam, nu = slkl_case
    active = np.flatnonzero(mu > 0)
    a, b, F, Kinv = slkl_dense(C, mu, y, lam, nu)
    G = slkl_G(C, mu, active, lam)
    CA = C[:, active]
    woodbury = (np.eye(len(y)) - CA @ G @ CA.T / lam) / lam
    assert rel_max(Kinv, woodbury) < 1e-12
    assert rel_norm(a, C.T @ woodbury @ y) < 1e-12
    assert rel_norm(b, np.einsum("im,im->m", C, woodbury @ C)) < 1e-12
    F_ref = lam * y @ woodbury @ y + nu * mu.sum()
    assert abs(F - F_ref) <= 1e-12 * F_ref
    # G in the order of `active`: reversing the order reverses rows and columns
    np.testing.assert_allclose(slkl_G(C, mu, active[::-1], lam), G[::-1, ::-1], rtol=1e-12)


def test_slkl_beta_is_krr_with_the_learned_kernel(slkl_case):
    """f = C beta at the training points equals KRR with K~ = C D C^T: K~ (K~ + lam I)^-1 y;
    beta = D a; kappa = 1 + ||K~||_2 / lam."""
    C, mu, y, lam, nu = slkl_case
    beta, kappa = slkl_beta(C, mu, y, lam)
    K_tilde = (C * mu) @ C.T
    assert rel_norm(C @ beta, K_tilde @ np.linalg.solve(K_tilde + lam * np.eye(len(y)), y)) < 1e-12
    assert rel_norm(beta, mu * slkl_dense(C, mu, y, lam, nu)[0]) < 1e-12
    assert np.all(beta[mu == 0] == 0.0)
    assert abs(kappa - (1 + np.linalg.eigvalsh(K_tilde).max() / lam)) <= 1e-12 * kappa


# --------------------------------------------------------------------------------------------
# MEKA
# --------------------------------------------------------------------------------------------
def test_nystrom_map_whitens_and_reproduces_its_landmarks():
    Z = np.random.default_rng(9).normal(size=(12, 2))
    K_ZZ = dense_kernel(Z, sigma=0.7)
    F = nystrom_map(K_ZZ, 12)
    assert F.shape == (12, 12)
    assert rel_max(F.T @ K_ZZ @ F, np.eye(12)) < 1e-10      # W^T W = I on the landmarks
    W = K_ZZ @ F
    assert rel_max(W @ W.T, K_ZZ) < 1e-10                   # full rank: K(Z, Z) itself
    # rank k keeps the k largest eigenvalues: W W^T is the best rank-k approximation of K_ZZ
    Wk = K_ZZ @ nystrom_map(K_ZZ, 4)
    w = np.linalg.eigvalsh(K_ZZ)[::-1]
    assert abs(np.linalg.norm(K_ZZ - Wk @ Wk.T, 2) - w[4]) <= 1e-10 * w[0]


def test_meka_link_recovers_an_exact_link():
    rng = np.random.default_rng(10)
    W_s, W_t, L = rng.normal(size=(20, 4)), rng.normal(size=(15, 3)), rng.normal(size=(4, 3))
    assert rel_max(meka_link(W_s, W_s @ L @ W_t.T, W_t), L) < 1e-12
    # the normal equations of min ||K - W_s L W_t^T||_F hold for any K
    K = rng.normal(size=(20, 15))
    L_hat = meka_link(W_s, K, W_t)
    assert np.abs(W_s.T @ (W_s @ L_hat @ W_t.T - K) @ W_t).max() <= 1e-12 * np.abs(K).max() * 20
    # rtol drops the directions below rtol * the largest singular value
    W_s[:, 3] = W_s[:, 2] * (1 + 1e-9)
    assert np.linalg.matrix_rank(meka_link(W_s, K, W_t, rtol=1e-6)) == 3


# --------------------------------------------------------------------------------------------
# GRIEF
# --------------------------------------------------------------------------------------------
def test_grief_phi_with_every_eigenvector_is_the_grid_nystrom_kernel():
    """With p = m (all grid eigenvectors), Phi Phi^T = K_XU K_UU^-1 K_UX: the Nystrom kernel
    of the full grid; at the grid points it is K_UU itself.  The eigenvalues are those of the
    Kronecker product: all products of the 1-D ones."""
    grids = [np.linspace(-1.0, 1.0, 4), np.linspace(-1.0, 1.0, 3)]
    ls = np.array([0.5, 0.6])
    X = np.random.default_rng(11).uniform(-1, 1, size=(9, 2))
    Phi, lam, order = grief_dense_phi(X, grids, ls, 12)
    U = np.array([[a, b] for a in grids[0] for b in grids[1]])     # dimension 1 slowest
    K_UU = dense_kernel(U / ls, sigma=1.0) + 1e-12 * np.eye(12)
    K_XU = dense_kernel(X / ls, U / ls, sigma=1.0)
    assert np.linalg.cond(K_UU) < 1e3               # both sides accurate to ~cond * m * eps
    assert rel_max(Phi @ Phi.T, K_XU @ np.linalg.solve(K_UU, K_XU.T)) < 1e-11
    Phi_U, _, _ = grief_dense_phi(U, grids, ls, 12)
    assert rel_max(Phi_U @ Phi_U.T, K_UU) < 1e-11
    one_d = [np.linalg.eigvalsh(dense_kernel(g[:, None], sigma=s) + 1e-12 * np.eye(g.size))
             for g, s in zip(grids, ls)]
    assert rel_norm(lam, np.sort(np.multiply.outer(*one_d).ravel())[::-1]) < 1e-12
    assert np.all(np.diff(lam) <= 0) and sorted(order) == list(range(12))
    # p < m keeps the p largest
    Phi5, lam5, _ = grief_dense_phi(X, grids, ls, 5)
    assert Phi5.shape == (9, 5) and rel_norm(lam5, lam[:5]) < 1e-14


@pytest.mark.parametrize("module", ["oracles", "problems"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0

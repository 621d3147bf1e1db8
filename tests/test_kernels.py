"""Dense-reference tests of hkern's kernel evaluation.

References are the oracle ``dense_kernel`` of tests/oracles.py: the definitions of
``kernel_matrix``'s docstring evaluated with ``scipy.spatial.distance.cdist`` and NumPy, never
with hkern itself:

    gaussian  exp(-d2 / (2 s^2))              laplace   exp(-||x - y||_1 / s)
    imq       s / sqrt(d2 + s^2)              matern12  exp(-r / s)
    matern32  (1 + a) exp(-a),  a = sqrt(3) r / s
    matern52  (1 + a + a^2 / 3) exp(-a),  a = sqrt(5) r / s
    (d2 = ||x - y||_2^2, r = ||x - y||_2)

Output tiles are 128 x 256, so the main shapes span several tiles in both directions, with
partial tiles at the edges.
"""
import math
from decimal import Decimal, localcontext

import numpy as np
import pytest
from numpy.testing import assert_allclose
from oracles import KERNELS as ALL_KERNELS
from oracles import dense_kernel, rel_norm

import hkern
from hkern.kernels import KERNELS, _api, _kernels, sample_spectral

SUBNORMAL_ULP = np.nextafter(0.0, 1.0)      # 2**-1074
TINY = np.finfo(np.float64).tiny            # smallest normal number


pytestmark = pytest.mark.usefixtures("single_threaded_reference_blas")


def libm_exp(x):
    """The C library's exp (Python's math.exp calls it directly), elementwise."""
    return np.vectorize(math.exp, otypes=[float])(x)


# ------------------------------------------------------------------------------------------------
# Accuracy against the definitions
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("d", [1, 3, 8, 30])
def test_kernel_matrix_matches_definition(kernel, d):
    rng = np.random.default_rng(100 + d)
    shapes = [(300, 600), (129, 257), (7, 3), (1, 1)]
    for m, n in shapes:
        X = rng.standard_normal((m, d))
        Y = rng.standard_normal((n, d))
        for sigma in (0.5, 1.7, 6.0):
            K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=sigma)
            R = dense_kernel(X, Y, kernel=kernel, sigma=sigma)
            assert K.shape == (m, n) and K.dtype == np.float64
            assert np.all(R >= TINY)          # all-normal references: rtol alone applies
            assert_allclose(K, R, rtol=1e-12, atol=0,
                            err_msg=f"{kernel} d={d} sigma={sigma} shape={(m, n)}")


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_kernel_matrix_symmetric_square(kernel):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((301, 5))
    K = hkern.kernel_matrix(X, kernel=kernel, sigma=1.3)
    assert_allclose(K, dense_kernel(X, X, kernel=kernel, sigma=1.3), rtol=1e-12, atol=0)
    np.testing.assert_array_equal(np.diag(K), 1.0)
    # Each entry is computed from the same data either way round: symmetric to rounding.
    assert_allclose(K, K.T, rtol=1e-14, atol=0)


@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("offset", [0.0, 1000.0])
@pytest.mark.parametrize("noise", [1e-9, 1e-6])
def test_near_duplicate_points(kernel, offset, noise):
    """Y = X + tiny noise: the cancellation-prone distances are recomputed exactly."""
    rng = np.random.default_rng(11)
    d = 4
    X = rng.standard_normal((150, d)) + offset
    Y = X + noise * rng.standard_normal(X.shape)
    sigma = 0.8
    K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=sigma)
    R = dense_kernel(X, Y, kernel=kernel, sigma=sigma)
    assert_allclose(K, R, rtol=1e-12, atol=0)
    # Stricter on the near-duplicate pairs: within a few ulps of 1.  Without the exact
    # recomputation, ||x||^2 + ||y||^2 - 2 x.y would carry absolute errors ~ eps ||x||^2, far
    # larger than the true squared distances ~ noise^2.
    assert_allclose(np.diag(K), np.diag(R), rtol=0, atol=4 * np.finfo(float).eps)
    # The self-kernel is exactly 1.
    np.testing.assert_array_equal(np.diag(hkern.kernel_matrix(X, kernel=kernel, sigma=sigma)),
                                  1.0)
    np.testing.assert_array_equal(np.diag(hkern.kernel_matrix(Y, Y, kernel=kernel, sigma=sigma)),
                                  1.0)


def test_matern12_tiny_distances_are_accurate():
    """matern12 = exp(-r/s) has slope -1/s at r = 0: it exposes errors in r itself."""
    rng = np.random.default_rng(12)
    X = 3.0 + rng.standard_normal((200, 3))
    for scale in (1e-12, 1e-9, 1e-6, 1e-4):
        Y = X + scale * rng.standard_normal(X.shape)
        r = np.sqrt(np.sum((X - Y) ** 2, axis=1))        # exact differences (Sterbenz)
        K = np.diag(hkern.kernel_matrix(X, Y, kernel="matern12", sigma=0.5))
        ref = np.diag(dense_kernel(X, Y, kernel="matern12", sigma=0.5))
        assert_allclose(K, ref, rtol=1e-12, atol=0)
        # 1 - k(r) = -expm1(-r/s) to the precision that a double near 1 allows.
        assert_allclose(1.0 - K, -np.expm1(-r / 0.5), rtol=0, atol=4 * np.finfo(float).eps)


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_identical_points(kernel):
    rng = np.random.default_rng(13)
    X = rng.standard_normal((40, 6)) * 10.0
    X[17] = X[3]
    X[25] = X[3]
    Z = np.zeros((3, 6))                                  # zero norms: no refinement threshold
    for sigma in (1e-3, 1.0, 1e3):
        K = hkern.kernel_matrix(X, kernel=kernel, sigma=sigma)
        np.testing.assert_array_equal(np.diag(K), 1.0)
        for i, j in [(3, 17), (17, 3), (3, 25), (25, 17)]:
            assert K[i, j] == 1.0
        np.testing.assert_array_equal(hkern.kernel_matrix(Z, kernel=kernel, sigma=sigma), 1.0)


# ------------------------------------------------------------------------------------------------
# Underflow: exp arguments below -708 (subnormal and zero results)
# ------------------------------------------------------------------------------------------------

def _exact_far_points(kernel, sigma):
    """X = {0}, Y = {y} in one dimension with dyadic y, so every s is computed exactly by both
    hkern and the reference (no rounding before exp) and the comparison isolates exp."""
    step = 1.0 / 64.0
    if kernel == "gaussian":             # exp(-y^2 / 2):  y in [36, 41]  ->  exponent 648..840
        y = np.arange(36.0, 41.0, step)
    elif kernel == "laplace":            # exp(-y):  y in [690, 760]
        y = np.arange(690.0, 760.0, step)
    elif kernel == "matern12":
        y = np.arange(690.0, 760.0, step)
    elif kernel == "matern32":           # exponent sqrt(3) y
        y = np.arange(395.0, 440.0, step)
    else:                                # matern52: exponent sqrt(5) y
        y = np.arange(305.0, 340.0, step)
    return np.zeros((1, 1)), (sigma * y)[:, None]


def _exp_argument(kernel, s):
    """The exp argument of each kernel as a function of the scaled distance s."""
    return {"gaussian": -0.5 * s, "laplace": -s, "matern12": -np.sqrt(s),
            "matern32": -np.sqrt(3.0 * s), "matern52": -np.sqrt(5.0 * s)}[kernel]


def _matern_exact(kernel, x):
    """Correctly rounded p(-x) exp(x) for the Matern prefactors p, from 40-digit decimals."""
    out = np.empty(len(x))
    with localcontext() as ctx:
        ctx.prec = 40
        for i, xi in enumerate(x):
            a = -Decimal(float(xi))
            p = 1 + a if kernel == "matern32" else 1 + a + a * a / 3
            out[i] = float(p * (-a).exp())
    return out


@pytest.mark.parametrize("kernel", ["gaussian", "laplace", "matern12"])
@pytest.mark.parametrize("sigma", [1.0, 0.25, 4.0])
def test_underflow_exact_arguments_pure_exp(kernel, sigma):
    """exp(x) kernels across the underflow boundary x = -708 ... -745 and beyond."""
    X, Y = _exact_far_points(kernel, sigma)
    K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=sigma)[0]
    y = Y[:, 0] / sigma
    s = y if kernel == "laplace" else y * y          # exact (powers of two, dyadic y)
    x = _exp_argument(kernel, s)                     # exact too
    ref = dense_kernel(X, Y, kernel=kernel, sigma=sigma)[0]   # numpy's exp on the definition
    np.testing.assert_array_equal(ref, np.exp(x))    # (the same arguments, exactly)
    ref_libm = libm_exp(x)
    normal = ref >= TINY
    assert normal.any() and (~normal).any() and (ref == 0).any()
    # Normal results come from the hand-written exp: 1e-12 (it is ~1 ulp).
    assert_allclose(K[normal], ref[normal], rtol=1e-12, atol=0)
    # Subnormal and zero results come from libm's exp: bit-for-bit equal to it.
    np.testing.assert_array_equal(K[~normal], ref_libm[~normal])
    # NumPy's exp (its own SIMD code, not libm) is also only faithfully rounded; in the subnormal
    # range it differs from libm by one unit of 2^-1074 at a few arguments, never more.
    assert np.all(np.abs(K[~normal] - ref[~normal]) <= SUBNORMAL_ULP)


@pytest.mark.parametrize("kernel", ["matern32", "matern52"])
@pytest.mark.parametrize("sigma", [1.0, 0.25, 4.0])
def test_underflow_exact_arguments_matern(kernel, sigma):
    """p(a) exp(-a) kernels: exp(-a) turns subnormal before the product does (p ~ a^2 / 3)."""
    X, Y = _exact_far_points(kernel, sigma)
    K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=sigma)[0]
    s = (Y[:, 0] / sigma) ** 2
    x = _exp_argument(kernel, s)
    ref = dense_kernel(X, Y, kernel=kernel, sigma=sigma)[0]   # numpy, the definition as written
    exact = _matern_exact(kernel, x)                 # the same arguments, rounded once
    normal = exact >= TINY
    assert normal.any() and (~normal).any() and (exact == 0).any()
    # Where exp(-a) itself is normal, the formula as written is accurate.
    plain = np.exp(x) >= TINY
    assert_allclose(K[plain], ref[plain], rtol=1e-12, atol=0)
    # Every normal result, including those whose exp(-a) factor is subnormal: 1e-12.  (The
    # formula as written, with a subnormal intermediate, is off by up to ~1.5e-11 there.)
    assert_allclose(K[normal], exact[normal], rtol=1e-12, atol=0)
    # Subnormal and zero results: the same relative accuracy plus one rounding to 2^-1074.
    assert np.all(np.abs(K[~normal] - exact[~normal]) <= 1e-12 * exact[~normal] + SUBNORMAL_ULP)


def test_hand_written_exp_is_within_two_ulps_of_numpy():
    """hkern's exp (Cody-Waite reduction, degree-11 polynomial) is about 1 ulp from exact and
    NumPy's is faithfully rounded too: the two never differ by more than 2 ulps over the normal
    range [-708, 0] of kernel arguments, nor below 1e-17 in size (where exp(x) = 1 + x)."""
    rng = np.random.default_rng(7)
    x = np.concatenate([-rng.uniform(0, 708, 100_000), -rng.uniform(0, 1, 100_000),
                        -10.0 ** rng.uniform(-17, 0, 20_000), [0.0]])
    got = _kernels.kernel_values(KERNELS["gaussian"], np.ascontiguousarray(-2 * x))
    ref = np.exp(x)
    assert got[-1] == 1.0
    assert np.max(np.abs(got - ref) / np.spacing(ref)) <= 2.0


@pytest.mark.parametrize("kernel", ["gaussian", "laplace", "matern12", "matern32", "matern52"])
def test_scalar_and_vector_maps_bitwise_equal(kernel):
    """The vectorised tile map is documented as bitwise equal to kernel_from_scaled."""
    kind = KERNELS[kernel]
    X, Y = _exact_far_points(kernel, 1.0)
    # Cover the normal range too: from 0 through the underflow boundary.
    Y = np.concatenate([np.linspace(0.0, Y[0, 0], 3000)[:, None], Y])
    # The compiled fill itself: kernel_matrix may shift far-off data by a common vector, which
    # changes the rounding of the distances and would hide what is being compared here.
    X, Y = np.ascontiguousarray(X, dtype=float), np.ascontiguousarray(Y, dtype=float)
    out = np.empty((X.shape[0], Y.shape[0]))
    _kernels.fill_kernel_matrix(kind, 1.0, X, Y, out, 1)
    s = Y[:, 0] if kernel == "laplace" else Y[:, 0] ** 2
    np.testing.assert_array_equal(out[0], _kernels.kernel_values(kind, s))


def test_gaussian_underflow_random_points():
    """Far random points (d2/s^2 ~ 1300-1700): rtol 1e-12 plus rounding of subnormal results."""
    rng = np.random.default_rng(21)
    for d in (1, 3, 8, 30):
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        X = rng.standard_normal((130, d)) * 0.3
        Y = rng.standard_normal((260, d)) * 0.3 + 38.0 * u
        K = hkern.kernel_matrix(X, Y, kernel="gaussian", sigma=1.0)
        R = dense_kernel(X, Y, kernel="gaussian", sigma=1.0)
        assert (R < TINY).any() and (R >= TINY).any()
        normal = R >= TINY
        assert_allclose(K[normal], R[normal], rtol=1e-12, atol=0)
        assert np.all(np.abs(K - R) <= 1e-12 * R + 2 * SUBNORMAL_ULP)
        assert np.all(K >= 0.0)


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_very_far_points_give_zero(kernel):
    X = np.zeros((2, 2))
    Y = np.array([[1e4, 0.0], [0.0, -3e5], [1e150, 1e150]])
    K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=1.0)
    R = dense_kernel(X, Y, kernel=kernel, sigma=1.0)
    if kernel == "imq":
        assert_allclose(K, R, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(K, 0.0)
        np.testing.assert_array_equal(R, 0.0)


# ------------------------------------------------------------------------------------------------
# Threads, defaults, aliases, diag, matvec
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_bitwise_identical_across_n_jobs(kernel):
    rng = np.random.default_rng(31)
    X = rng.standard_normal((300, 7))
    Y = rng.standard_normal((600, 7))
    K1 = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=1.1, n_jobs=1)
    K2 = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=1.1, n_jobs=2)
    Kall = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=1.1, n_jobs=None)
    Kneg = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=1.1, n_jobs=-1)
    assert np.array_equal(K1, K2)
    assert np.array_equal(K1, Kall)
    assert np.array_equal(K1, Kneg)


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_y_none_equals_x(kernel):
    rng = np.random.default_rng(32)
    X = rng.standard_normal((260, 5))
    assert np.array_equal(hkern.kernel_matrix(X, kernel=kernel, sigma=0.9),
                          hkern.kernel_matrix(X, X, kernel=kernel, sigma=0.9))
    assert np.array_equal(hkern.kernel_matrix(X, None, kernel=kernel, sigma=0.9, n_jobs=2),
                          hkern.kernel_matrix(X, X.copy(), kernel=kernel, sigma=0.9, n_jobs=1))


@pytest.mark.parametrize("alias,name", [("rbf", "gaussian"), ("inverse_multiquadric", "imq"),
                                        ("exponential", "matern12"), ("RBF", "gaussian"),
                                        ("Laplace", "laplace")])
def test_aliases(alias, name):
    rng = np.random.default_rng(33)
    X = rng.standard_normal((20, 3))
    Y = rng.standard_normal((30, 3))
    assert np.array_equal(hkern.kernel_matrix(X, Y, kernel=alias, sigma=0.7),
                          hkern.kernel_matrix(X, Y, kernel=name, sigma=0.7))
    assert_allclose(hkern.kernel_matrix(X, Y, kernel=alias, sigma=0.7),
                    dense_kernel(X, Y, kernel=name, sigma=0.7), rtol=1e-12, atol=0)
    assert np.array_equal(hkern.kernel_matvec(X, Y, np.ones(30), kernel=alias, sigma=0.7),
                          hkern.kernel_matvec(X, Y, np.ones(30), kernel=name, sigma=0.7))
    assert _api.kernel_kind(alias) == (name, KERNELS[name])


def test_matern12_is_exponential_and_laplace_in_1d():
    rng = np.random.default_rng(34)
    X = rng.standard_normal((50, 1))
    Y = rng.standard_normal((70, 1))
    assert_allclose(hkern.kernel_matrix(X, Y, kernel="matern12", sigma=0.6),
                    hkern.kernel_matrix(X, Y, kernel="laplace", sigma=0.6), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kernel", [*ALL_KERNELS, "rbf"])
def test_kernel_diag(kernel):
    rng = np.random.default_rng(35)
    X = rng.standard_normal((57, 4))
    diag = hkern.kernel_diag(X, kernel=kernel, sigma=0.3)
    assert diag.shape == (57,)
    np.testing.assert_array_equal(diag, np.diag(hkern.kernel_matrix(X, kernel=kernel,
                                                                     sigma=0.3)))
    np.testing.assert_array_equal(diag, 1.0)


def _matvec_data(seed, m, n, d, bdim, k):
    """X (m, d), Y (n, d) and B (n,) for bdim 1 or (n, k) for bdim 2, standard normal."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, d))
    Y = rng.standard_normal((n, d))
    B = rng.standard_normal(n) if bdim == 1 else rng.standard_normal((n, k))
    return X, Y, B


@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("bdim", [1, 2])
def test_kernel_matvec(kernel, bdim):
    X, Y, B = _matvec_data(36, 300, 451, 6, bdim, 3)
    B0 = B.copy()
    got = hkern.kernel_matvec(X, Y, B, kernel=kernel, sigma=1.4)
    K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=1.4)
    ref = K @ B
    assert got.shape == ref.shape
    assert rel_norm(got, ref) <= 1e-12
    assert rel_norm(got, dense_kernel(X, Y, kernel=kernel, sigma=1.4) @ B) <= 1e-12
    np.testing.assert_array_equal(B, B0)
    # A Fortran-ordered B gives the same bits.
    got_f = hkern.kernel_matvec(X, Y, np.asfortranarray(B), kernel=kernel, sigma=1.4)
    assert np.array_equal(got, got_f)


@pytest.mark.parametrize("bdim", [1, 2])
def test_kernel_matvec_bitwise_identical_across_n_jobs(bdim):
    X, Y, B = _matvec_data(39, 300, 600, 5, bdim, 300)
    r1 = hkern.kernel_matvec(X, Y, B, kernel="matern52", sigma=0.8, n_jobs=1)
    r2 = hkern.kernel_matvec(X, Y, B, kernel="matern52", sigma=0.8, n_jobs=2)
    assert np.array_equal(r1, r2)


@pytest.mark.parametrize("kernel", ["gaussian", "laplace", "imq", "matern12", "matern32",
                                    "matern52"])
@pytest.mark.parametrize("m,n", [(1, 1), (127, 255), (129, 257), (300, 530)])
def test_kernel_matvec_fused_tiles(kernel, m, n):
    """The fused engine (tiles of 128 x 256, partial ones at the edges) against the dense
    product, for every kernel and for several right-hand sides."""
    X, Y, B = _matvec_data(37, m, n, 3, 2, 4)
    got = hkern.kernel_matvec(X, Y, B, kernel=kernel, sigma=0.9)
    ref = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=0.9) @ B
    assert rel_norm(got, ref) <= 1e-12


@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("n,m,k", [(1, 1, 1), (7, 3, 1), (300, 130, 1), (1000, 9000, 1),
                                   (2100, 257, 3)])
@pytest.mark.parametrize("terms", ["both", "u", "v"])
def test_kernel_normal_times(kernel, n, m, k, terms):
    """K^T (K U + V) by the one-pass engine against the dense oracle, for blocks of 128 rows
    (m small), of 8 rows (m = 9000: 1 MiB blocks), slabs of unequal size, and U or V absent."""
    rng = np.random.default_rng(n + m + k)
    X, Z = rng.standard_normal((n, 4)), rng.standard_normal((m, 4))
    U = rng.standard_normal((m, k)) if terms != "v" else None
    V = rng.standard_normal((n, k)) if terms != "u" else None
    K = dense_kernel(X, Z, kernel=kernel, sigma=1.1)
    ref = K.T @ ((K @ U if U is not None else 0.0) + (V if V is not None else 0.0))
    kind = _api.kernel_kind(kernel)[1]
    got = [_api._kernel_normal_times_trusted(kind, 1.1, X, Z, U, V, t) for t in (1, 2, 3)]
    assert got[0].shape == (m, k)
    assert rel_norm(got[0], ref) <= 1e-12
    # Slabs of fixed rows summed in order: the same bits for any thread count.
    assert all(np.array_equal(g, got[0]) for g in got[1:])


def test_kernel_normal_times_no_rows():
    Z = np.ones((3, 2))
    out = _api._kernel_normal_times_trusted(0, 1.0, np.empty((0, 2)), Z, np.ones((3, 2)), None, 2)
    np.testing.assert_array_equal(out, np.zeros((3, 2)))


def test_kernel_matvec_bad_inputs():
    rng = np.random.default_rng(38)
    X = rng.standard_normal((5, 2))
    Y = rng.standard_normal((4, 2))
    with pytest.raises(ValueError, match=r"B must have shape \(4,\) or \(4, k\)"):
        hkern.kernel_matvec(X, Y, np.ones(5))
    with pytest.raises(ValueError, match=r"B must have shape"):
        hkern.kernel_matvec(X, Y, np.ones((4, 2, 1)))
    with pytest.raises(ValueError, match=r"B contains NaN \(first at index \[1\]"):
        hkern.kernel_matvec(X, Y, np.array([1.0, np.nan, 0.0, 0.0]))
    with pytest.raises(ValueError, match="B contains infinity"):
        hkern.kernel_matvec(X, Y, np.array([1.0, 0.0, -np.inf, 0.0]))
    # Issue 16 defect 12: complex B was cast to float, dropping its imaginary part silently.
    with pytest.raises(ValueError, match="B has a complex dtype"):
        hkern.kernel_matvec(X, Y, np.ones(4) + 1j)
    with pytest.raises(ValueError, match="Y has 3 features but X has 2"):
        hkern.kernel_matvec(X, np.ones((4, 3)), np.ones(4))
    with pytest.raises(ValueError, match="kernel must be one of"):
        hkern.kernel_matvec(X, Y, np.ones(4), kernel="cauchy")
    with pytest.raises(ValueError, match="sigma must be a real number > 0"):
        hkern.kernel_matvec(X, Y, np.ones(4), sigma=0.0)


# ------------------------------------------------------------------------------------------------
# Spectral sampling (random Fourier features)
# ------------------------------------------------------------------------------------------------

def _kernel_at_offset(kernel, delta, sigma):
    return dense_kernel(delta[None, :], np.zeros((1, delta.size)), kernel=kernel,
                        sigma=sigma)[0, 0]


@pytest.mark.parametrize("kernel", ["gaussian", "laplace", "matern12", "matern32", "matern52",
                                    "rbf", "exponential"])
def test_sample_spectral_monte_carlo(kernel):
    """Bochner: k(delta) = E_w[cos(w . delta)].  The sample mean of the bounded variable
    cos(w . delta) over N draws has standard error std / sqrt(N); accept 5 standard errors."""
    d, N, sigma = 3, 200_000, 1.3
    rng = np.random.default_rng(41)
    W = sample_spectral(kernel, d, N, sigma, rng)
    assert W.shape == (N, d) and W.dtype == np.float64
    name = _api.kernel_kind(kernel)[0]
    deltas = [np.array([0.3, 0.0, 0.0]), np.array([0.5, -0.4, 0.2]),
              np.array([1.0, 1.0, -0.5]), np.array([0.0, 2.5, 0.7])]
    for delta in deltas:
        c = np.cos(W @ delta)
        mean, se = c.mean(), c.std(ddof=1) / np.sqrt(N)
        k = _kernel_at_offset(name, delta, sigma)
        assert 0.05 < k < 0.99
        assert abs(mean - k) <= 5 * se, (kernel, delta, mean, k, se)


def test_sample_spectral_reproducible_and_scaled():
    W1 = sample_spectral("matern32", 4, 1000, 2.0, np.random.default_rng(5))
    W2 = sample_spectral("matern32", 4, 1000, 2.0, np.random.default_rng(5))
    np.testing.assert_array_equal(W1, W2)
    W3 = sample_spectral("matern32", 4, 1000, 1.0, np.random.default_rng(5))
    assert_allclose(W1, W3 / 2.0, rtol=1e-15, atol=0)


@pytest.mark.parametrize("kernel", ["imq", "inverse_multiquadric"])
def test_sample_spectral_imq_raises(kernel):
    with pytest.raises(ValueError, match="random Fourier features are not available"):
        sample_spectral(kernel, 3, 10, 1.0, np.random.default_rng(0))


def test_sample_spectral_unknown_kernel():
    with pytest.raises(ValueError, match="kernel must be one of"):
        sample_spectral("nope", 3, 10, 1.0, np.random.default_rng(0))


# ------------------------------------------------------------------------------------------------
# Input conversion
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_input_conversions(kernel):
    rng = np.random.default_rng(51)
    Xbig = rng.standard_normal((2 * 150, 3 * 5))
    Ybig = rng.standard_normal((3 * 270, 2 * 5))
    Xs, Ys = Xbig[::2, ::3], Ybig[::3, ::2]              # strided views, shapes (150,5), (270,5)
    X, Y = np.ascontiguousarray(Xs), np.ascontiguousarray(Ys)
    ref = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=1.2)

    def same(Xa, Ya, expected=ref):
        assert np.array_equal(hkern.kernel_matrix(Xa, Ya, kernel=kernel, sigma=1.2), expected)

    same(Xs, Ys)
    same(np.asfortranarray(X), np.asfortranarray(Y))
    same(X.tolist(), Y.tolist())
    # float32 inputs are computed in single precision (tests/test_kernels_float32.py); with
    # dtype=float64 they are converted, as every float32 input was before.
    X32, Y32 = X.astype(np.float32), Y.astype(np.float32)
    assert np.array_equal(hkern.kernel_matrix(X32, Y32, kernel=kernel, sigma=1.2,
                                              dtype=np.float64),
                          hkern.kernel_matrix(X32.astype(np.float64), Y32.astype(np.float64),
                                              kernel=kernel, sigma=1.2))
    assert hkern.kernel_matrix(X32, Y32, kernel=kernel, sigma=1.2).dtype == np.float32
    Xi = rng.integers(-3, 4, size=(40, 5))
    Yi = rng.integers(-3, 4, size=(33, 5))
    Ki = hkern.kernel_matrix(Xi, Yi, kernel=kernel, sigma=1.2)
    assert np.array_equal(Ki, hkern.kernel_matrix(Xi.astype(np.float64), Yi.astype(np.float64),
                                                  kernel=kernel, sigma=1.2))
    assert_allclose(Ki, dense_kernel(Xi, Yi, kernel=kernel, sigma=1.2), rtol=1e-12, atol=0)
    # Y = None with a strided X, and kernel_matvec with converted inputs.
    assert np.array_equal(hkern.kernel_matrix(Xs, kernel=kernel, sigma=1.2),
                          hkern.kernel_matrix(X, X, kernel=kernel, sigma=1.2))
    b = rng.standard_normal(270)
    assert np.array_equal(hkern.kernel_matvec(np.asfortranarray(X), Ys, b, kernel=kernel,
                                              sigma=1.2),
                          hkern.kernel_matvec(X, Y, b, kernel=kernel, sigma=1.2))
    # sigma given as an integer or a NumPy scalar.
    assert np.array_equal(hkern.kernel_matrix(X, Y, kernel=kernel, sigma=np.float32(2.0)),
                          hkern.kernel_matrix(X, Y, kernel=kernel, sigma=2))


def test_inputs_not_modified():
    rng = np.random.default_rng(52)
    X = rng.standard_normal((20, 3))
    Y = rng.standard_normal((25, 3))
    X0, Y0 = X.copy(), Y.copy()
    for kernel in ALL_KERNELS:
        hkern.kernel_matrix(X, Y, kernel=kernel)
        hkern.kernel_matrix(X, kernel=kernel)
        hkern.kernel_matvec(X, Y, np.ones(25), kernel=kernel)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Y, Y0)


# ------------------------------------------------------------------------------------------------
# Input errors
# ------------------------------------------------------------------------------------------------

_X = np.arange(12.0).reshape(4, 3) / 7.0


def _with(value, index=(1, 2)):
    X = _X.copy()
    X[index] = value
    return X


BAD_INPUTS = [
    (dict(kernel="gauss"), r"kernel must be one of \['gaussian', 'imq', 'laplace'"),
    (dict(kernel=3), "kernel must be a string"),
    (dict(kernel=None), "kernel must be a string"),
    (dict(sigma=0.0), "sigma must be a real number > 0, got 0.0"),
    (dict(sigma=-1.5), "sigma must be a real number > 0, got -1.5"),
    (dict(sigma=float("nan")), "sigma must be a real number > 0, got nan"),
    (dict(sigma=float("inf")), "sigma must be a real number > 0, got inf"),
    (dict(sigma="1"), "sigma must be a real number"),
    (dict(X=_with(np.nan)), r"X contains NaN \(first at index \[1, 2\]"),
    (dict(X=_with(np.inf)), r"X contains infinity \(first at index \[1, 2\]"),
    (dict(X=_with(-np.inf, (3, 0))), r"X contains infinity \(first at index \[3, 0\]"),
    (dict(Y=_with(np.nan, (0, 1))), r"Y contains NaN \(first at index \[0, 1\]"),
    (dict(X=np.arange(5.0)), r"X must be 2-D with shape \(n_samples, n_features\); got a 1-D"),
    (dict(X=np.ones((2, 2, 2))), "X must be 2-D"),
    (dict(Y=np.ones(3)), "Y must be 2-D"),
    (dict(Y=np.ones((5, 4))), "Y has 4 features but X has 3; they must match"),
    (dict(X=np.zeros((0, 3))), r"X has 0 sample\(s\)"),
    (dict(Y=np.zeros((0, 3))), r"Y has 0 sample\(s\)"),
    (dict(X=np.zeros((4, 0))), "X has 0 features"),
    (dict(X=np.ones((4, 3)) + 1j), "complex"),
    (dict(X=[["a", "b"]]), "must be an array of real numbers"),
    (dict(n_jobs=0), "n_jobs must be None or a non-zero integer"),
    (dict(n_jobs=1.5), "n_jobs must be None or a non-zero integer"),
]


@pytest.mark.parametrize("kwargs,message", BAD_INPUTS)
def test_kernel_matrix_bad_inputs(kwargs, message):
    args = dict(X=_X, Y=_X[:2], kernel="gaussian", sigma=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        hkern.kernel_matrix(**args)


@pytest.mark.parametrize("kwargs,message",
                         [(k, m) for k, m in BAD_INPUTS if "Y" not in k and "n_jobs" not in k])
def test_kernel_diag_bad_inputs(kwargs, message):
    args = dict(X=_X, kernel="gaussian", sigma=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        hkern.kernel_diag(**args)


@pytest.mark.parametrize("kwargs,message", BAD_INPUTS)
def test_kernel_matvec_bad_array_inputs(kwargs, message):
    args = dict(X=_X, Y=_X[:2], kernel="gaussian", sigma=1.0)
    args.update(kwargs)
    Y = args["Y"]
    n = np.asarray(Y).shape[0] if np.ndim(Y) >= 1 else 1
    with pytest.raises(ValueError, match=message):
        hkern.kernel_matvec(args["X"], Y, np.ones(max(n, 1)), kernel=args["kernel"],
                            sigma=args["sigma"], **({"n_jobs": args["n_jobs"]}
                                                    if "n_jobs" in args else {}))


def test_kernels_registry():
    assert set(KERNELS) == set(ALL_KERNELS)
    assert sorted(KERNELS.values()) == list(range(6))
    assert hkern.kernel_matrix is _api.kernel_matrix


@pytest.mark.parametrize("kernel", ["gaussian", "imq", "matern12", "matern32", "matern52"])
@pytest.mark.parametrize("sigma", [0.3, 1.0])
def test_data_far_from_the_origin_keep_full_accuracy(kernel, sigma):
    """Offset 30 (spread 1) in d=30: the norm-based distance formula alone lost ~3 digits."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 30)) + 30.0
    Y = rng.normal(size=(150, 30)) + 30.0
    ref = dense_kernel(X, Y, kernel=kernel, sigma=sigma)
    normal = ref > np.finfo(float).tiny
    assert_allclose(hkern.kernel_matrix(X, Y, kernel=kernel, sigma=sigma)[normal], ref[normal],
                    rtol=1e-12, atol=0)
    K = hkern.kernel_matrix(X, kernel=kernel, sigma=sigma)
    ref = dense_kernel(X, X, kernel=kernel, sigma=sigma)
    normal = ref > np.finfo(float).tiny
    assert_allclose(K[normal], ref[normal], rtol=1e-12, atol=0)

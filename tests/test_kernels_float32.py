"""The single-precision kernel engine (issue 32, item 1): float32 X and Y, or dtype=np.float32.

References are float64 and built from the definitions (oracles.dense_kernel) at the inputs
rounded to float32, so that what is measured is the engine's own error, not the rounding of the
data.  The tolerances follow from float32 rounding, u = 2^-24 = 6.0e-8:

* an entry k(s) of scaled distance s: the distance formula ||x||^2 + ||y||^2 - 2 x.y rounds at
  the size of the scaled norms N = (||x||^2 + ||y||^2) / sigma^2, so s is off by a few u (N + s),
  which moves k by |d log k / ds| times that, and the kernel's own evaluation adds a few
  roundings of k.  The tests allow ENTRY_C = 8 u k (1 + |d log k / ds| (N + s)); the largest
  ratio seen over d = 1 to 100 and sigma = 0.3 to 20 was 3.2 (of 8).  For standardised data
  this is a relative 1e-6 to 1e-5 on the entries (1e-5 where s is large, i.e. k is small);
* a sum of K entries times a right-hand side: each term carries the entry's error and the
  products of one 256-column tile are summed in float (at most ~256 u relative, in practice
  ~16 u), and the tiles are summed in double, so the error stays at 1e-6 of sum |K||u| however
  many columns there are: a float32 running sum over 120 000 columns would be off by ~1e-4
  (checked below, so that the test would catch it).
"""
import textwrap

import numpy as np
import pytest
from fresh_python import interrupt_child
from oracles import KERNELS as ALL_KERNELS
from oracles import dense_kernel

import hkern
from hkern.kernels import KERNELS, _api, _kernels

U32 = 2.0**-24
ENTRY_C = 8.0


def _log_slope(kernel, s):
    """|d log k / ds| for the kernel as a function of its scaled distance s (hkern's s: the
    squared distance over sigma^2, or the L1 distance over sigma for the Laplace kernel)."""
    s = np.maximum(s, 1e-300)
    if kernel == "gaussian":
        return 0.5 + 0.0 * s
    if kernel == "laplace":
        return 1.0 + 0.0 * s
    if kernel == "imq":
        return 0.5 / (1.0 + s)
    if kernel == "matern12":
        return 0.5 / np.sqrt(s)
    if kernel == "matern32":
        return 1.5 / (1.0 + np.sqrt(3.0 * s))
    a = np.sqrt(5.0 * s)
    return (5.0 / 6.0) * (1.0 + a) / (1.0 + a + a * a / 3.0)


def entry_bound(kernel, X, Y, sigma, ref):
    """The tolerance of the module doc for K(X, Y) in single precision (X, Y float64 holding the
    float32 inputs, ref the float64 reference); 1e-45 covers float32's subnormal spacing."""
    if kernel == "laplace":
        s = np.abs(X[:, None, :] - Y[None, :, :]).sum(-1) / sigma
        N = 0.0
    else:
        s = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1) / sigma**2
        N = ((X**2).sum(1)[:, None] + (Y**2).sum(1)[None, :]) / sigma**2
    return ENTRY_C * U32 * ref * (1.0 + _log_slope(kernel, s) * (N + s)) + 1e-45


def points(rng, m, d, shift=0.0):
    return (rng.standard_normal((m, d)) + shift).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# The single-precision exponential and maps
# ------------------------------------------------------------------------------------------------

def test_expf_within_one_ulp_and_the_fixup_correctly_rounded():
    # Every Gaussian map argument x = -s/2 from 0 down to -87 (the polynomial), and below it
    # (the fix-up by the double formula, rounded once; subnormal floats included).
    s = np.concatenate([np.linspace(0, 174, 400_001), np.linspace(174, 220, 20_001)])
    s = s.astype(np.float32)
    got = _kernels.map_values(KERNELS["gaussian"], s).astype(np.float64)
    exact = np.exp(-0.5 * s.astype(np.float64))
    ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
    poly = s <= 174
    assert np.all(np.abs(got - exact)[poly] <= ulp[poly])
    # below HK_EXPF_LO: the float32 rounding of the double formula
    assert np.array_equal(got[~poly], exact[~poly].astype(np.float32).astype(np.float64))
    assert got[0] == 1.0


@pytest.mark.parametrize("kernel", [k for k in ALL_KERNELS if k != "imq"])   # IMQ has no exp
@pytest.mark.parametrize("dense", [False, True])
def test_underflowing_entries_are_the_double_formula_rounded_once(kernel, dense):
    """Below float's normal range (exp argument under -87) every entry is the double formula
    rounded to float once, subnormals included, and 0 where that rounds to 0: whether few
    entries are there (one at a time) or most (the vector pass in double, and the entries
    below the kernel's zero bound set directly)."""
    kind = KERNELS[kernel]
    arg = {"gaussian": lambda x: 2 * x, "laplace": lambda x: x, "matern12": lambda x: x**2,
           "matern32": lambda x: x**2 / 3, "matern52": lambda x: x**2 / 5}
    s = arg[kernel](np.linspace(88.0, 140.0, 60_001)).astype(np.float32)   # -x: 88 .. 140
    if not dense:                                     # a few such entries among normal ones
        s = np.concatenate([np.linspace(0, 2, 200_000, dtype=np.float32), s[::1000]])
    under = s > arg[kernel](88.0)
    got = _kernels.map_values(kind, s)
    exact = _kernels.kernel_values(kind, s.astype(np.float64)).astype(np.float32)
    assert np.array_equal(got[under], exact[under])
    assert under.sum() >= (60_000 if dense else 60)
    assert (exact[s > arg[kernel](115.0)] == 0).all() and (exact[under] > 0).any()


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_maps_against_the_double_formula(kernel):
    """Each float32 map is the kernel in single precision: within a few roundings of the double
    formula at the same s (which in double the map gives bit for bit).  The Matern kernels
    round their exponential's argument -sqrt(c s) first, which moves k by |sqrt(c s)| u
    relative (exactly as far as a float32 rounding of s / sigma would)."""
    kind = KERNELS[kernel]
    s64 = np.concatenate([[0.0], np.geomspace(1e-12, 1e5, 50_000), [np.inf]])
    s = s64.astype(np.float32)
    ref = _kernels.kernel_values(kind, s.astype(np.float64))
    assert np.array_equal(_kernels.map_values(kind, s.astype(np.float64)), ref)
    got = _kernels.map_values(kind, s)
    assert got.dtype == np.float32
    c = {"matern12": 1.0, "matern32": 3.0, "matern52": 5.0}.get(kernel, 0.0)
    with np.errstate(invalid="ignore"):
        rounded_argument = np.where(np.isfinite(s64), np.sqrt(c * s64), 0.0)
    assert np.all(np.abs(got - ref) <= 4 * U32 * ref * (1 + rounded_argument) + 1e-45)
    assert got[0] == 1.0 and got[-1] == 0.0


# ------------------------------------------------------------------------------------------------
# Entries against the definition
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ALL_KERNELS)
@pytest.mark.parametrize("d", [1, 3, 8, 17])
def test_kernel_matrix_entries(kernel, d):
    rng = np.random.default_rng(d)
    X, Y = points(rng, 170, d), points(rng, 300, d, 0.2)     # several 128 x 256 tiles
    X[3] = Y[5]                                  # an exact duplicate: k = 1 exactly
    X[4] = Y[6] * np.float32(1 + 1e-3)           # near-duplicates: recomputed exactly
    X[7] = Y[8] + np.float32(1e-4)
    Xd, Yd = X.astype(np.float64), Y.astype(np.float64)
    for sigma in (0.3, 1.0, 4.0, 20.0):
        K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=sigma)
        assert K.dtype == np.float32 and K.shape == (170, 300)
        ref = dense_kernel(Xd, Yd, kernel=kernel, sigma=sigma)
        err = np.abs(K - ref)
        bound = entry_bound(kernel, Xd, Yd, sigma, ref)
        worst = np.unravel_index(np.argmax(err / bound), err.shape)
        assert np.all(err <= bound), (sigma, worst, K[worst], ref[worst])
        assert K[3, 5] == 1.0
    Kxx = hkern.kernel_matrix(X, kernel=kernel, sigma=1.0)
    assert np.all(np.diag(Kxx) == 1.0)


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_far_from_the_origin(kernel):
    """Data 30 standard deviations out: the common shift (the kernels depend on x - y only)
    keeps single precision's distances at the size of the spread, not of the offset."""
    rng = np.random.default_rng(5)
    X, Y = points(rng, 60, 4, 30.0), points(rng, 90, 4, 30.0)
    K = hkern.kernel_matrix(X, Y, kernel=kernel, sigma=1.5)
    ref = dense_kernel(X.astype(np.float64), Y.astype(np.float64), kernel=kernel, sigma=1.5)
    centred = Y.astype(np.float64).mean(0)
    bound = entry_bound(kernel, X - centred, Y - centred, 1.5, ref)
    assert np.all(np.abs(K - ref) <= 2 * bound)     # 2: the shift's own rounding in float


def test_ard_lengthscales_in_single_precision():
    rng = np.random.default_rng(6)
    X, Y = points(rng, 80, 5), points(rng, 70, 5)
    ls = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
    K = hkern.kernel_matrix(X, Y, kernel="matern52", sigma=ls)
    assert K.dtype == np.float32
    ref = dense_kernel(X / ls, Y / ls, kernel="matern52", sigma=1.0)
    Xs, Ys = (X / ls.astype(np.float32)).astype(np.float64), (Y / ls.astype(np.float32))
    assert np.all(np.abs(K - ref) <= 2 * entry_bound("matern52", Xs, Ys.astype(np.float64),
                                                     1.0, ref))


@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_lower_block_by_ssyrk(kernel):
    rng = np.random.default_rng(7)
    X = points(rng, 150, 6)
    X[10] = X[20]
    L = _kernels.kernel_lower_block(KERNELS[kernel], 1.3, X)
    assert L.dtype == np.float32
    ref = dense_kernel(X.astype(np.float64), kernel=kernel, sigma=1.3)
    low = np.tril_indices(150)
    bound = entry_bound(kernel, X.astype(np.float64), X.astype(np.float64), 1.3, ref)
    assert np.all(np.abs(L - ref)[low] <= bound[low])
    assert np.all(np.triu(L, 1) == 0) and np.all(np.diag(L) == 1.0) and L[20, 10] == 1.0
    # float64 through the same fused code: as kernel_matrix's lower triangle
    L64 = _kernels.kernel_lower_block(KERNELS[kernel], 1.3, X.astype(np.float64))
    assert np.allclose(L64[low], ref[low], rtol=1e-12, atol=1e-300)


# ------------------------------------------------------------------------------------------------
# Products: float64 accumulation
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ALL_KERNELS)
def test_matvec_against_dense(kernel):
    rng = np.random.default_rng(8)
    X, Y = points(rng, 300, 5), points(rng, 700, 5)
    B = rng.standard_normal((700, 3))
    out = hkern.kernel_matvec(X, Y, B, kernel=kernel, sigma=1.1)
    assert out.dtype == np.float32 and out.shape == (300, 3)
    K = dense_kernel(X.astype(np.float64), Y.astype(np.float64), kernel=kernel, sigma=1.1)
    B32 = B.astype(np.float32).astype(np.float64)
    scale = np.abs(K) @ np.abs(B32)
    assert np.all(np.abs(out - K @ B32) <= 1e-6 * scale)
    one = hkern.kernel_matvec(X, Y, B[:, 0], kernel=kernel, sigma=1.1)
    assert one.shape == (300,) and np.all(np.abs(one - K @ B32[:, 0]) <= 1e-6 * scale[:, 0])


def _one_and_two_columns(X, Y, u, sigma, n_jobs=2):
    """K u by the fused Gaussian loop (one column) and by the tile path (the same column
    twice: the engine fuses only single products)."""
    one = _api._kernel_matvec_trusted(0, sigma, X, Y, u[:, None], n_jobs)[:, 0]
    two = _api._kernel_matvec_trusted(0, sigma, X, Y, np.stack([u, u], 1), n_jobs)[:, 0]
    return one, two


@pytest.mark.parametrize("d", [1, 3, 8, 16, 40])
@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0, 1e4])
def test_fused_gaussian_product_within_the_entry_bound(d, sigma):
    """The fused loop (K u, one column, Gaussian) against the float64 product of the same
    float32 inputs: within the sum over each row of |u_j| times the entry bound of the module
    doc, plus FLT_MIN sum |u| for the entries below float's normal range, which the loop
    counts as 0.  Sizes off the 256-column and 128-row tiles, and rows duplicated in the
    columns, whose near-zero distances go by the exact path."""
    rng = np.random.default_rng(d)
    X, Y = points(rng, 301, d), points(rng, 517, d)
    Y[:40] = X[:40]
    Y[40:50] = X[50:60] + np.float32(1e-3)
    Y[60:63] *= np.float32(30.0)            # outlying norms in a tile with duplicates
    u32 = rng.standard_normal(517).astype(np.float32)
    u = u32.astype(np.float64)
    one, two = _one_and_two_columns(X, Y, u, sigma)
    Xd, Yd = X.astype(np.float64), Y.astype(np.float64)
    K = dense_kernel(Xd, Yd, sigma=sigma)
    bound = entry_bound("gaussian", Xd, Yd, sigma, K) @ np.abs(u) + 1.2e-38 * np.abs(u).sum()
    assert np.all(np.abs(one - K @ u) <= bound)
    assert np.all(np.abs(two - K @ u) <= bound)


def test_fused_gaussian_product_exact_on_duplicates_and_deterministic():
    """k(x, x) = 1 exactly through the fused loop, and the same bits for one and two threads.
    With sigma 0.01 every other entry is below float's range, so (K 1)[i] is k(x_i, x_i) for
    the 60 duplicated rows: the exponent formula alone gives 0 only to a few float roundings
    of 5000 ||x||^2 (about 1e-2 here), so each 1.0 comes from the exact path."""
    rng = np.random.default_rng(3)
    X = points(rng, 260, 8)
    Y = np.concatenate([points(rng, 300, 8), X[:60]])
    one, _ = _one_and_two_columns(X, Y, np.ones(360), 0.01)
    assert np.all(one[:60] == 1.0) and np.all(one[60:] == 0.0)
    v = rng.standard_normal(360)
    a, _ = _one_and_two_columns(X, Y, v, 0.7, n_jobs=1)
    b, _ = _one_and_two_columns(X, Y, v, 0.7, n_jobs=2)
    assert np.array_equal(a, b)


def test_fused_gaussian_product_leaves_extreme_bandwidths_to_the_tile_path():
    """sigma so small that -1/(2 sigma^2) times the norms leaves float's range: the tile path
    (which handles it) answers, the same bits as with two columns."""
    rng = np.random.default_rng(4)
    X, Y = points(rng, 30, 4), points(rng, 40, 4)
    Y[:3] = X[:3]
    u = rng.standard_normal(40)
    one, two = _one_and_two_columns(X, Y, u, 1e-19)
    assert np.array_equal(one, two)
    assert np.array_equal(one[:3], u[:3].astype(np.float32).astype(np.float64))


def test_fused_product_float_sums_stay_short():
    """A large first term and 120 000 small ones (k ~ 1, sigma 1e3): a float running sum that
    started at 1 would drop every term of 1e-8 (half an ulp of 1 is 6e-8), 7e-5 of the total
    here.  The fused loop's float sums (16 lanes a row, column j in lane j mod 16) go to
    double after at most 256 terms each, so only the small terms that share a lane with a 1,
    among the first 4096 columns, can be lost: 16 x 255 of them, 2.6e-6 of the total."""
    rng = np.random.default_rng(10)
    n = 120_000
    X, Y = points(rng, 20, 4), points(rng, n, 4)
    u = np.full(n, 1e-8)
    u[:16] = 1.0
    got = _api._kernel_matvec_trusted(0, 1e3, X, Y, u[:, None], 2)[:, 0]
    u32 = u.astype(np.float32).astype(np.float64)
    ref = dense_kernel(X.astype(np.float64), Y.astype(np.float64), sigma=1e3) @ u32
    assert np.max(np.abs(got - ref) / ref) <= 3e-6


def test_long_sum_accumulates_in_double():
    """K u over 120 000 columns: every term positive and near 1 (sigma 10), so the sum is
    120 000 times a term, where float32 accumulation errs by ~1e-4 (asserted, so that the test
    means something); the engine stays within 1e-6 of the float64 sum of the same float32
    entries' references."""
    rng = np.random.default_rng(9)
    n = 120_000
    X, Y = points(rng, 40, 8), points(rng, n, 8)
    u = rng.uniform(0.5, 1.5, n).astype(np.float32)
    got = _api._kernel_matvec_trusted(0, 10.0, X, Y, u.astype(np.float64)[:, None], 2)[:, 0]
    Xd, Yd, ud = X.astype(np.float64), Y.astype(np.float64), u.astype(np.float64)
    terms = dense_kernel(Xd, Yd, sigma=10.0) * ud
    ref = terms.sum(axis=1)
    assert np.max(np.abs(got - ref) / ref) <= 1e-6      # 6e-9 seen
    assert hkern.kernel_matvec(X, Y, u, sigma=10.0).dtype == np.float32
    # The same terms, exactly rounded to float32, summed one after the other in float32: off
    # by 4e-6 (median of the 40 rows) to 1.6e-5.
    float_running_sums = np.add.accumulate(terms.astype(np.float32), axis=1,
                                           dtype=np.float32)[:, -1]
    assert np.max(np.abs(float_running_sums - ref) / ref) > 1e-6


def _normal_reference(X, Z, U, V, sigma, kernel="gaussian"):
    K = dense_kernel(X.astype(np.float64), Z.astype(np.float64), kernel=kernel, sigma=sigma)
    U32 = U.astype(np.float32).astype(np.float64)
    t = K @ U32 + (V if V is not None else 0.0)
    scale = np.abs(K).T @ (np.abs(K) @ np.abs(U32) + (np.abs(V) if V is not None else 0.0))
    return K.T @ t, scale


@pytest.mark.parametrize("kernel", ["gaussian", "matern32"])
@pytest.mark.parametrize("with_v", [False, True])
def test_normal_times_against_dense(kernel, with_v):
    """K^T (K U + V) with 700 centres (K U summed over three 256-column chunks in double) and
    5000 rows (eleven blocks over the slabs)."""
    rng = np.random.default_rng(10)
    X, Z = points(rng, 5000, 6), points(rng, 700, 6)
    U = rng.standard_normal((700, 2))
    V = rng.standard_normal((5000, 2)) if with_v else None
    got = _api._kernel_normal_times_trusted(KERNELS[kernel], 1.4, X, Z, U, V, 2)
    assert got.dtype == np.float64
    ref, scale = _normal_reference(X, Z, U, V, 1.4, kernel)
    assert np.all(np.abs(got - ref) <= 1e-6 * scale)
    only_v = _api._kernel_normal_times_trusted(KERNELS[kernel], 1.4, X, Z, None,
                                               rng.standard_normal((5000, 1)), 2)
    assert only_v.shape == (700, 1)


def test_normal_times_long_sums():
    """200 000 rows and 16 centres: the sum over rows runs over 1563 blocks and 16 slabs, in
    double; K U sums 16 terms."""
    rng = np.random.default_rng(11)
    X, Z = points(rng, 200_000, 3), points(rng, 16, 3)
    U = rng.uniform(0.5, 1.5, (16, 1))
    got = _api._kernel_normal_times_trusted(0, 5.0, X, Z, U, None, 2)
    ref, scale = _normal_reference(X, Z, U, None, 5.0)
    assert np.all(np.abs(got - ref) <= 1e-6 * scale)


def test_normal_times_blocks_match_the_one_pass():
    """The blocks entry (MPI ranks continue each other's slabs) in float32: run in two halves,
    the slab sums and their total are the one-pass result bit for bit."""
    rng = np.random.default_rng(12)
    X, Z = points(rng, 3000, 4), points(rng, 900, 4)
    U = rng.standard_normal((900, 1)).astype(np.float32)
    full = np.empty((900, 1))
    _kernels.kernel_normal_times_matrix(0, 1.0, X, Z, U, None, full, 2)
    rows, blocks, slabs = _kernels.normal_times_layout(3000, 900)
    sums = np.zeros((slabs, 900, 1))
    half = blocks // 2
    _kernels.kernel_normal_times_blocks(0, 1.0, 3000, 0, half, X[:half * rows], Z, U, None,
                                        sums, 2)
    _kernels.kernel_normal_times_blocks(0, 1.0, 3000, half, blocks, X[half * rows:], Z, U, None,
                                        sums, 1)
    total = np.zeros((900, 1))
    for s in range(slabs):
        total += sums[s]
    assert np.array_equal(total, full)


def test_rhs_scaled_by_a_power_of_two():
    """The internal products take any B hkern accepts: scaled into float32's range exactly."""
    rng = np.random.default_rng(13)
    X, Y = points(rng, 50, 3), points(rng, 400, 3)
    B = rng.standard_normal((400, 1))
    base = _api._kernel_matvec_trusted(0, 1.0, X, Y, B, 1)
    for factor in (2.0**300, 2.0**-300):       # exact: the same float32 operand
        got = _api._kernel_matvec_trusted(0, 1.0, X, Y, B * factor, 1)
        assert np.array_equal(got, base * factor)
    scale = _api._kernel_matvec_trusted(0, 1.0, X, Y, np.abs(B), 1)     # |K| |B|: K >= 0
    got = _api._kernel_matvec_trusted(0, 1.0, X, Y, B * 1e100, 1) / 1e100
    assert np.all(np.abs(got - base) <= 1e-6 * scale)


# ------------------------------------------------------------------------------------------------
# Determinism, dtypes, layouts, refusals
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ["gaussian", "laplace", "matern52"])
def test_same_bits_for_any_n_jobs(kernel):
    rng = np.random.default_rng(14)
    X, Y = points(rng, 700, 7), points(rng, 900, 7)
    B = rng.standard_normal((900, 2))
    kw = dict(kernel=kernel, sigma=1.7)
    K1 = hkern.kernel_matrix(X, Y, n_jobs=1, **kw)
    assert np.array_equal(K1, hkern.kernel_matrix(X, Y, n_jobs=2, **kw))
    v1 = _api._kernel_matvec_trusted(KERNELS[kernel], 1.7, X, Y, B, 1)
    assert np.array_equal(v1, _api._kernel_matvec_trusted(KERNELS[kernel], 1.7, X, Y, B, 2))
    assert np.array_equal(hkern.kernel_matvec(X, Y, B, n_jobs=1, **kw),
                          hkern.kernel_matvec(X, Y, B, n_jobs=2, **kw))
    U = rng.standard_normal((900, 2))
    n1 = _api._kernel_normal_times_trusted(KERNELS[kernel], 1.7, X, Y, U, None, 1)
    assert np.array_equal(n1, _api._kernel_normal_times_trusted(KERNELS[kernel], 1.7, X, Y, U,
                                                                None, 2))


def test_dtype_rules():
    rng = np.random.default_rng(15)
    X, Y = points(rng, 40, 3), points(rng, 30, 3)
    Xd, Yd = X.astype(np.float64), Y.astype(np.float64)
    b = rng.standard_normal(30)
    assert hkern.kernel_matrix(X).dtype == np.float32
    assert hkern.kernel_matrix(X, Y).dtype == np.float32
    assert hkern.kernel_matrix(X, Yd).dtype == np.float64          # mixed: double
    assert hkern.kernel_matrix(X.tolist()).dtype == np.float64
    assert hkern.kernel_matvec(X, Y, b).dtype == np.float32        # B's dtype does not decide
    assert hkern.kernel_matvec(X, Y, b.astype(np.float32)).dtype == np.float32
    assert hkern.kernel_matvec(Xd, Yd, b.astype(np.float32)).dtype == np.float64
    # dtype= forces: float64 data rounded to float32 give the float32 inputs' bits, and float32
    # data with dtype=float64 the old conversion's bits.
    for dt in (np.float32, "float32", np.dtype(np.float32)):
        assert np.array_equal(hkern.kernel_matrix(Xd, Yd, dtype=dt), hkern.kernel_matrix(X, Y))
        assert np.array_equal(hkern.kernel_matvec(Xd, Yd, b, dtype=dt),
                              hkern.kernel_matvec(X, Y, b))
    assert np.array_equal(hkern.kernel_matrix(X, Y, dtype=np.float64),
                          hkern.kernel_matrix(Xd, Yd))
    assert np.array_equal(hkern.kernel_matvec(X, Y, b, dtype="float64"),
                          hkern.kernel_matvec(Xd, Yd, b))
    for bad in (np.int32, "half", np.float16, object):
        with pytest.raises(ValueError, match="dtype must be"):
            hkern.kernel_matrix(X, dtype=bad)


def test_layouts_give_the_same_bits():
    rng = np.random.default_rng(16)
    big = points(rng, 400, 12)
    Xs, Ys = big[::2, ::3], big[1::3, 1::3]             # strided float32 views
    X, Y = np.ascontiguousarray(Xs), np.ascontiguousarray(Ys)
    ref = hkern.kernel_matrix(X, Y, kernel="matern32", sigma=1.2)
    b = rng.standard_normal(Y.shape[0]).astype(np.float32)
    refv = hkern.kernel_matvec(X, Y, b, kernel="matern32", sigma=1.2)
    ro_X, ro_Y, ro_b = X.copy(), Y.copy(), b.copy()
    for a in (ro_X, ro_Y, ro_b):
        a.flags.writeable = False
    for Xa, Ya, ba in ((Xs, Ys, b[::-1][::-1]), (np.asfortranarray(X), np.asfortranarray(Y), b),
                       (ro_X, ro_Y, ro_b)):
        K = hkern.kernel_matrix(Xa, Ya, kernel="matern32", sigma=1.2)
        assert K.dtype == np.float32 and np.array_equal(K, ref)
        assert np.array_equal(hkern.kernel_matvec(Xa, Ya, ba, kernel="matern32", sigma=1.2), refv)
    assert ro_X.dtype == np.float32 and not ro_X.flags.writeable     # inputs untouched


def test_single_precision_refuses_what_float32_cannot_hold():
    rng = np.random.default_rng(17)
    X = points(rng, 20, 3)
    with pytest.raises(ValueError, match="single precision accepts"):
        hkern.kernel_matrix(X * np.float32(1e16))
    with pytest.raises(ValueError, match="single precision accepts"):
        hkern.kernel_matrix(X * np.float32(1e-16))
    with pytest.raises(ValueError, match="bandwidths single precision"):
        hkern.kernel_matrix(X, sigma=1e-16)
    with pytest.raises(ValueError, match="single precision accepts"):
        hkern.kernel_matvec(X, X, np.full(20, 1e31))
    with pytest.raises(ValueError, match="single precision accepts"):
        hkern.kernel_matrix(X.astype(np.float64) * 1e20, dtype=np.float32)
    # the same data in double are fine
    assert hkern.kernel_matrix(X * np.float32(1e16), dtype=np.float64).dtype == np.float64
    assert np.all(hkern.kernel_matrix(np.zeros((3, 2), np.float32)) == 1.0)
    assert np.all(hkern.kernel_matvec(X, X, np.zeros(20)) == 0.0)


def test_memory_estimates_follow_the_precision():
    rng = np.random.default_rng(18)
    X = points(rng, 1000, 4)
    # the float32 result takes 4 MB; the float64 one 8 MB
    hkern.kernel_matrix(X, max_memory=6_000_000)
    with pytest.raises(ValueError, match="kernel_matrix"):
        hkern.kernel_matrix(X, max_memory=6_000_000, dtype=np.float64)
    assert _api._matvec_bytes(10_000, 10_000, 8, 1, 2, 4) < _api._matvec_bytes(
        10_000, 10_000, 8, 1, 2)


# ------------------------------------------------------------------------------------------------
# Ctrl-C in the float32 loops
# ------------------------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    import hkern
    from hkern.kernels import _api
    rng = np.random.default_rng(0)
    which = sys.argv[1]
    if which == "matrix":     # 8000 x 8000 entries at d = 4000: 5e11 flops of sgemm
        X = rng.standard_normal((8000, 4000)).astype(np.float32)
        long = lambda: hkern.kernel_matrix(X, sigma=60.0, n_jobs=2)
    elif which == "matvec":   # 2e10 entries of K u never stored
        X = rng.standard_normal((200000, 8)).astype(np.float32)
        long = lambda: hkern.kernel_matvec(X, X[:100000], np.ones(100000), sigma=2.0, n_jobs=2)
    else:                     # 1.8e10 entries of K^T (K u): 4.5 s (6e9 ended before the
        X = rng.standard_normal((300000, 8)).astype(np.float32)   # signal at 1.5 s, fused)
        u = np.ones((60000, 1))
        long = lambda: _api._kernel_normal_times_trusted(0, 2.0, X, X[:60000], u, None, 2)
    print("start", flush=True)
    try:
        long()
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("caught", repr(time.time()), flush=True)
    small = hkern.kernel_matvec(X[:500], X[:700], np.ones(700), sigma=2.0, n_jobs=2)
    print("small", small.astype(np.float64).sum().hex(), flush=True)
""")


@pytest.mark.parametrize("which", ["matrix", "matvec", "normal"])
def test_ctrl_c_in_single_precision(which):
    """As tests/test_interrupts.py for the float64 calls: SIGINT 1.5 s into a call of several
    seconds ends it within 1 s, and a following call gives this process's bits."""
    lines, sent, out, err = interrupt_child(CHILD, which, wait=1.5)
    assert "caught" in lines, f"the call was not interrupted: {out!r} {err[-2000:]!r}"
    assert float(lines["caught"]) - sent < 1.0
    rng = np.random.default_rng(0)
    shape = {"matrix": (8000, 4000), "matvec": (200000, 8), "normal": (300000, 8)}[which]
    X = rng.standard_normal(shape).astype(np.float32)
    small = hkern.kernel_matvec(X[:500], X[:700], np.ones(700), sigma=2.0, n_jobs=2)
    assert lines["small"] == small.astype(np.float64).sum().hex()

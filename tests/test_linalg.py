"""Dense-reference tests of hkern._linalg: the row-major BLAS/LAPACK shim, its tiled routines
and the NumPy entry points.

Every NumPy entry point is compared with NumPy/SciPy on well-conditioned random matrices, with
norm-wise relative errors ||got - ref|| / ||ref|| <= 1e-12.  Eigenvectors are compared up to
sign (the test matrices have well separated spectra, so each vector is determined up to sign to
~ n eps ||A|| / gap), and through reconstructions and projectors; the decompositions (LAPACK's
dsyevd, dsyevr, dgelsd, dgelqf) also on LAPACK's hard cases at n in the thousands (graded
matrices, glued Wilkinson matrices), by their backward error and orthogonality.

The level-3 routines (matmul, gram, solve_triangular, cholesky, cho_solve) run on a fixed grid of
TILE x TILE tiles, and the Cholesky factorises CHOL_BLOCK diagonal blocks at a time (both in
hkern/_linalg/tiled.pxd, read from there): sizes around both boundaries exercise partial tiles
and blocks, and their results must be bitwise identical for any n_threads.
"""
import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.linalg import LinAlgError
from oracles import rel_norm

from hkern import _linalg as hl

TOL = 1e-12
TILE = hl.TILE_SIZE                      # tile grid of the deterministic parallel routines
CHOL_BLOCK = hl.CHOLESKY_BLOCK_SIZE       # diagonal block of the tiled Cholesky
INV_TILE = hl.INVERSE_TILE_SIZE           # panel width of the tiled inverse from a factor
SOLVE_BLOCK = hl.SOLVE_BLOCK_SIZE         # row block of the few-right-hand-side triangular solve


pytestmark = pytest.mark.usefixtures("single_threaded_reference_blas")


def assert_rel(got, ref, tol=TOL):
    err = rel_norm(got, ref)
    assert err <= tol, f"relative error {err:.3e} > {tol:.0e}"


def spd(rng, n):
    A = rng.standard_normal((n, n))
    return A @ A.T + n * np.eye(n)


def sym_with_spectrum(rng, lam):
    """Q diag(lam) Q^T for a random orthogonal Q (exactly symmetric)."""
    n = len(lam)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * lam) @ Q.T
    return (A + A.T) / 2


def with_singular_values(rng, m, n, s):
    U, _ = np.linalg.qr(rng.standard_normal((m, len(s))))
    V, _ = np.linalg.qr(rng.standard_normal((n, len(s))))
    return (U * s) @ V.T


def triangular(rng, n, lower):
    """Well-conditioned triangular matrix (dominant diagonal)."""
    T = rng.standard_normal((n, n))
    T[np.diag_indices(n)] = n + np.abs(T[np.diag_indices(n)])
    return np.tril(T) if lower else np.triu(T)


def assert_columns_equal_up_to_sign(got, ref, tol=TOL):
    assert got.shape == ref.shape
    for j in range(ref.shape[1]):
        sign = 1.0 if got[:, j] @ ref[:, j] >= 0 else -1.0
        assert_rel(sign * got[:, j], ref[:, j], tol)


# ------------------------------------------------------------------------------------------------
# BLAS wrappers
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("alpha", [1.0, -2.5])
@pytest.mark.parametrize("m,k,n", [(5, 7, 3), (64, 33, 17), (1, 1, 1), (1, 9, 1),
                                   (300, 40, 257), (257, 300, 513)])
def test_matmul(rng, trans_a, trans_b, alpha, m, k, n):
    A = rng.standard_normal((m, k))
    B = rng.standard_normal((k, n))
    a = np.ascontiguousarray(A.T) if trans_a else A
    b = np.ascontiguousarray(B.T) if trans_b else B
    a0, b0 = a.copy(), b.copy()
    got = hl.matmul(a, b, trans_a=trans_a, trans_b=trans_b, alpha=alpha)
    assert_rel(got, alpha * (A @ B))
    np.testing.assert_array_equal(a, a0)
    np.testing.assert_array_equal(b, b0)


def test_matmul_out(rng):
    A = rng.standard_normal((270, 9))
    B = rng.standard_normal((9, 260))
    out = np.full((270, 260), np.nan)
    got = hl.matmul(A, B, alpha=0.5, out=out)
    assert got is out
    assert_rel(out, 0.5 * (A @ B))
    for bad in (np.zeros((270, 259)), np.zeros((270, 260), dtype=np.float32),
                np.zeros((260, 270)).T):
        with pytest.raises(ValueError, match="out must be a C-contiguous float64"):
            hl.matmul(A, B, out=bad)


def test_matmul_converts_layouts(rng):
    A = rng.standard_normal((6, 8))
    B = rng.standard_normal((8, 5))
    ref = A @ B
    assert_rel(hl.matmul(np.asfortranarray(A), B[:, ::1]), ref)
    assert_rel(hl.matmul(A, np.asfortranarray(B)), ref)
    Abig = rng.standard_normal((12, 16))
    assert_rel(hl.matmul(Abig[::2, ::2], B), Abig[::2, ::2] @ B)
    assert_rel(hl.matmul(A.astype(np.float32), B), A.astype(np.float32).astype(float) @ B)


def test_column_contiguous_operands(rng):
    """A Fortran-ordered operand, or the first rows of a matrix stored transposed (block
    RPCholesky's factor, F = Ft[:k].T), is read as its transpose with the flag flipped
    (hl._operand): the same products in both precisions, from the view as from a copy."""
    Ft = rng.standard_normal((9, 40))
    F = Ft[:6].T                                   # (40, 6), columns contiguous, a view
    B = rng.standard_normal((6, 3))
    R = rng.standard_normal((40, 2))
    expected = (F @ B, F.T @ R, F @ F.T, F.T @ F, B.T @ F.T)
    for dtype, rel in ((np.float64, 1e-12), (np.float32, 1e-5)):
        Fd, Bd, Rd = F.astype(dtype, order="K"), B.astype(dtype), R.astype(dtype)
        assert Fd.flags.f_contiguous and not Fd.flags.c_contiguous
        got = (hl.matmul(Fd, Bd), hl.matmul(Fd, Rd, trans_a=True), hl.gram(Fd),
               hl.gram(Fd, trans=True), hl.matmul(Bd, Fd, trans_a=True, trans_b=True))
        for g, e in zip(got, expected):
            assert g.dtype == dtype
            assert np.abs(g - e).max() <= rel * np.abs(e).max()
    assert_rel(hl.matmul(F, B), F @ B)              # the view itself
    assert_rel(hl.gram(F, trans=True), F.T @ F)


def test_matmul_shape_mismatch(rng):
    with pytest.raises(ValueError, match="inner dimensions"):
        hl.matmul(rng.standard_normal((3, 4)), rng.standard_normal((5, 2)))
    with pytest.raises(ValueError, match="inner dimensions"):
        hl.matmul(rng.standard_normal((3, 4)), rng.standard_normal((4, 2)), trans_a=True)


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("alpha", [1.0, 0.75])
@pytest.mark.parametrize("m,n", [(7, 5), (1, 9), (9, 1), (40, 31)])
def test_matvec(rng, trans, alpha, m, n):
    A = rng.standard_normal((m, n))
    x = rng.standard_normal(m if trans else n)
    A0, x0 = A.copy(), x.copy()
    got = hl.matvec(A, x, trans=trans, alpha=alpha)
    ref = alpha * (A.T @ x if trans else A @ x)
    assert_rel(got, ref)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(x, x0)
    with pytest.raises(ValueError, match="wrong length"):
        hl.matvec(A, np.ones(len(x) + 1), trans=trans)


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("alpha", [1.0, 2.5])
@pytest.mark.parametrize("rows,cols", [(8, 5), (5, 8), (1, 7), (50, 29), (257, 6), (6, 513),
                                       (1300, 4)])
def test_gram(rng, trans, alpha, rows, cols):
    A = rng.standard_normal((rows, cols))
    A0 = A.copy()
    got = hl.gram(A, trans=trans, alpha=alpha)
    ref = alpha * (A.T @ A if trans else A @ A.T)
    assert_rel(got, ref)
    np.testing.assert_array_equal(got, got.T)       # full symmetric output
    np.testing.assert_array_equal(A, A0)


# ------------------------------------------------------------------------------------------------
# Triangular solves
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("unit_diagonal", [False, True])
@pytest.mark.parametrize("rhs", ["vector", "matrix"])
def test_solve_triangular(rng, left, lower, trans, unit_diagonal, rhs):
    n, k = 23, 4
    T = triangular(rng, n, lower)
    # Only the `lower` triangle may be read: fill the other one with garbage.
    garbage = 1e3 * rng.standard_normal((n, n))
    Tin = T + (np.triu(garbage, 1) if lower else np.tril(garbage, -1))
    Tclean = T.copy()
    if unit_diagonal:
        Tin[np.diag_indices(n)] = 1e3 * rng.standard_normal(n)   # must be ignored too
        Tclean[np.diag_indices(n)] = 1.0
    op = Tclean.T if trans else Tclean
    if rhs == "vector":
        B = rng.standard_normal(n)
        # left: op(T) x = b;  right: x^T op(T) = b^T  <=>  op(T)^T x = b.
        ref = np.linalg.solve(op if left else op.T, B)
    else:
        B = rng.standard_normal((n, k)) if left else rng.standard_normal((k, n))
        ref = np.linalg.solve(op, B) if left else np.linalg.solve(op.T, B.T).T
    Tin0, B0 = Tin.copy(), B.copy()
    got = hl.solve_triangular(Tin, B, lower=lower, trans=trans, unit_diagonal=unit_diagonal,
                              left=left)
    assert_rel(got, ref)
    # Also against scipy for the left-sided case (scipy has no right-sided solve).
    if left:
        sref = sla.solve_triangular(Tclean, B, lower=lower, trans=1 if trans else 0,
                                    unit_diagonal=unit_diagonal)
        assert_rel(got, sref)
    np.testing.assert_array_equal(Tin, Tin0)
    np.testing.assert_array_equal(B, B0)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [False, True])
def test_solve_triangular_many_rhs(rng, left, lower, trans):
    """B wider (left) or taller (right) than a tile: the solve is split into panels of B."""
    n, k = 30, 2 * TILE + 37
    T = triangular(rng, n, lower)
    op = T.T if trans else T
    B = rng.standard_normal((n, k)) if left else rng.standard_normal((k, n))
    got = hl.solve_triangular(T, B, lower=lower, trans=trans, left=left)
    ref = np.linalg.solve(op, B) if left else np.linalg.solve(op.T, B.T).T
    assert_rel(got, ref)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("unit_diagonal", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_solve_triangular_few_rhs_row_blocks(rng, lower, trans, unit_diagonal, k):
    """At most TILE right-hand sides: blocked substitution over SOLVE_BLOCK rows, in partial
    and whole blocks, reading only the `lower` triangle, the same bits for any n_threads."""
    n = 3 * SOLVE_BLOCK + 17
    T = triangular(rng, n, lower)
    if unit_diagonal:
        T /= np.diag(T)[:, None]     # rows scaled to a unit diagonal: still well conditioned
    garbage = 1e3 * rng.standard_normal((n, n))
    Tin = T + (np.triu(garbage, 1) if lower else np.tril(garbage, -1))
    if unit_diagonal:
        Tin[np.diag_indices(n)] = 1e3 * rng.standard_normal(n)   # must be ignored
    B = rng.standard_normal((n, k))
    got = {nt: hl.solve_triangular(Tin, B, lower=lower, trans=trans,
                                   unit_diagonal=unit_diagonal, n_threads=nt)
           for nt in (1, 2, 3)}
    ref = sla.solve_triangular(T, B, lower=lower, trans=1 if trans else 0,
                               unit_diagonal=unit_diagonal)
    assert_rel(got[1], ref)
    assert np.array_equal(got[1], got[2]) and np.array_equal(got[1], got[3])


@pytest.mark.parametrize("left", [True, False])
def test_solve_triangular_overwrite_b(rng, left):
    """``overwrite_b``: the solution is written over a C-contiguous float64 B (the same bits as
    a copied solve); any other B (a view with strides, another dtype) is left as it was."""
    n, k = 40, 7
    T = triangular(rng, n, True)
    B = rng.standard_normal((n, k)) if left else rng.standard_normal((k, n))
    ref = hl.solve_triangular(T, B, left=left, trans=True)
    work = B.copy()
    got = hl.solve_triangular(T, work, left=left, trans=True, overwrite_b=True)
    assert got is work and np.array_equal(got, ref)
    wide = np.zeros((B.shape[0], 2 * B.shape[1]))
    wide[:, ::2] = B
    strided, before = wide[:, ::2], wide.copy()
    assert np.array_equal(hl.solve_triangular(T, strided, left=left, trans=True,
                                              overwrite_b=True), ref)
    assert np.array_equal(wide, before)
    single = B.astype(np.float32)
    hl.solve_triangular(T, single, left=left, trans=True, overwrite_b=True)
    assert np.array_equal(single, B.astype(np.float32))


def test_solve_triangular_shape_mismatch(rng):
    T = triangular(rng, 4, True)
    with pytest.raises(ValueError, match="shapes do not match"):
        hl.solve_triangular(T, np.ones(5))
    with pytest.raises(ValueError, match="shapes do not match"):
        hl.solve_triangular(T, np.ones((4, 3)), left=False)


# ------------------------------------------------------------------------------------------------
# Cholesky
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 9, 50, CHOL_BLOCK - 1, CHOL_BLOCK, CHOL_BLOCK + 1,
                               2 * CHOL_BLOCK + 88,
                               # trailing updates that span several TILE x TILE output tiles
                               CHOL_BLOCK + 2 * TILE + 7])
def test_cholesky(rng, n):
    A = spd(rng, n)
    ref = np.linalg.cholesky(A)
    # Only the lower triangle is read.
    Ain = A + np.triu(1e3 * rng.standard_normal((n, n)), 1)
    Ain0 = Ain.copy()
    L = hl.cholesky(Ain)
    assert_rel(L, ref)
    np.testing.assert_array_equal(np.triu(L, 1), 0.0)
    assert_rel(L @ L.T, A)
    np.testing.assert_array_equal(Ain, Ain0)


@pytest.mark.parametrize("n", [31, CHOL_BLOCK + 45])
def test_cholesky_overwrite_in_place(rng, n):
    A = spd(rng, n)
    ref = np.linalg.cholesky(A)
    work = A.copy()
    L = hl.cholesky(work, overwrite=True)
    assert np.shares_memory(L, work)
    np.testing.assert_array_equal(work, L)
    assert_rel(work, ref)
    np.testing.assert_array_equal(np.triu(work, 1), 0.0)


def test_cholesky_overwrite_falls_back_to_copy(rng):
    """overwrite=True on an array it cannot use in place (Fortran order) leaves it untouched."""
    A = spd(rng, 12)
    F = np.asfortranarray(A)
    F0 = F.copy()
    L = hl.cholesky(F, overwrite=True)
    assert not np.shares_memory(L, F)
    np.testing.assert_array_equal(F, F0)
    assert_rel(L, np.linalg.cholesky(A))


@pytest.mark.parametrize("n,order", [(12, 1), (12, 5), (12, 12),
                                     (600, CHOL_BLOCK), (600, CHOL_BLOCK + 1), (600, 300),
                                     (600, 2 * CHOL_BLOCK + 1), (600, 600)])
def test_cholesky_not_spd_names_failing_minor(rng, n, order):
    """Leading minors of order < `order` are SPD; the one of order `order` is not (it may sit
    in the first, second or third diagonal block of the tiled factorisation)."""
    A = spd(rng, n)
    k = order - 1
    # Schur complement of the leading k x k block at position k set to -1.
    q = A[k, :k] @ np.linalg.solve(A[:k, :k], A[:k, k]) if k > 0 else 0.0
    A[k, k] = q - 1.0
    A0 = A.copy()
    with pytest.raises(LinAlgError, match=rf"leading minor of order {order} is not positive"):
        hl.cholesky(A)
    np.testing.assert_array_equal(A, A0)
    with pytest.raises(LinAlgError, match=rf"leading minor of order {order} is not positive"):
        hl.cholesky(A.copy(), overwrite=True, n_threads=2)


def test_cholesky_not_square():
    with pytest.raises(ValueError, match="square"):
        hl.cholesky(np.ones((3, 4)))


@pytest.mark.parametrize("rhs", ["vector", "matrix"])
@pytest.mark.parametrize("n", [1, 17, 40, 300])
def test_cho_solve(rng, rhs, n):
    A = spd(rng, n)
    L = np.linalg.cholesky(A)
    B = rng.standard_normal(n) if rhs == "vector" else rng.standard_normal((n, TILE + 5))
    L0, B0 = L.copy(), B.copy()
    got = hl.cho_solve(L, B)
    assert_rel(got, sla.cho_solve((L, True), B))
    assert_rel(got, np.linalg.solve(A, B))
    np.testing.assert_array_equal(L, L0)
    np.testing.assert_array_equal(B, B0)
    # Round trip with hkern's own factor.
    assert_rel(hl.cho_solve(hl.cholesky(A), B), np.linalg.solve(A, B))


@pytest.mark.parametrize("n", [1, 2, 70, INV_TILE - 1, INV_TILE, INV_TILE + 1,
                               3 * INV_TILE + 17])
def test_cho_inverse(rng, n):
    A = spd(rng, n)
    L = hl.cholesky(A)
    L0 = L.copy()
    inv = hl.cho_inverse(L)
    assert_rel(inv, np.linalg.inv(A))
    assert np.array_equal(inv, inv.T)
    np.testing.assert_array_equal(L, L0)
    for nt in (2, 3):
        assert np.array_equal(hl.cho_inverse(L, n_threads=nt), inv)


def test_cho_inverse_in_place_with_scratch(rng):
    n = 2 * INV_TILE + 5
    A = spd(rng, n)
    L = hl.cholesky(A)
    work = np.full((n, n), np.nan)     # the scratch's contents never matter
    got = hl.cho_inverse(L, overwrite=True, n_threads=2, work=work)
    assert np.shares_memory(got, L)
    assert np.array_equal(got, hl.cho_inverse(hl.cholesky(A)))
    with pytest.raises(ValueError, match="work must be a C-contiguous float64 array"):
        hl.cho_inverse(hl.cholesky(A), work=np.empty((n, n + 1)))
    L = hl.cholesky(A)
    with pytest.raises(ValueError, match="apart from L"):
        hl.cho_inverse(L, overwrite=True, work=L)


def test_cho_inverse_of_a_singular_factor_raises():
    L = np.tril(np.ones((4, 4)))
    L[2, 2] = 0.0
    with pytest.raises(LinAlgError):
        hl.cho_inverse(L)


# ------------------------------------------------------------------------------------------------
# Symmetric eigenproblem
# ------------------------------------------------------------------------------------------------

def _separated_spectrum(rng, n):
    """Eigenvalues of both signs, gaps >= 0.5, so vectors are well determined."""
    lam = np.arange(n) - n / 3 + 0.5 * rng.random(n)
    return np.sort(lam)


@pytest.mark.parametrize("n", [1, 2, 10, 40, 128, 129, 161, 300])
def test_eigh_full(rng, n):
    lam = _separated_spectrum(rng, n)
    A = sym_with_spectrum(rng, lam)
    Ain = A + np.triu(1e3 * rng.standard_normal((n, n)), 1)   # only the lower triangle is read
    Ain0 = Ain.copy()
    w, V = hl.eigh(Ain)
    np.testing.assert_array_equal(Ain, Ain0)
    wr, Vr = np.linalg.eigh(A)
    assert w.shape == (n,) and V.shape == (n, n)
    assert np.all(np.diff(w) > 0)
    assert_rel(w, wr)
    assert_rel(w, lam)
    assert_columns_equal_up_to_sign(V, Vr)
    assert_rel(V.T @ V, np.eye(n))
    assert_rel((V * w) @ V.T, A)


@pytest.mark.parametrize("subset", [(0, 0), (3, 7), (11, 11), (0, 11), (5, 11)])
def test_eigh_subset(rng, subset):
    n = 12
    lo, hi = subset
    A = sym_with_spectrum(rng, _separated_spectrum(rng, n))
    A0 = A.copy()
    w, V = hl.eigh(A, subset=subset)
    np.testing.assert_array_equal(A, A0)
    wr, Vr = np.linalg.eigh(A)
    k = hi - lo + 1
    assert w.shape == (k,) and V.shape == (n, k)
    assert_rel(w, wr[lo:hi + 1])
    assert_columns_equal_up_to_sign(V, Vr[:, lo:hi + 1])
    # Projector onto the eigenspace: sign-free.
    P = Vr[:, lo:hi + 1] @ Vr[:, lo:hi + 1].T
    assert_rel(V @ V.T, P)
    assert_rel(A @ V, V * w)


@pytest.mark.parametrize("n, subset", [(161, (0, 0)), (161, (150, 160)), (300, (40, 200)),
                                       (300, (0, 299))])
def test_eigh_subset_of_larger_matrices(rng, n, subset):
    """dsyevr (MRRR for the wanted pairs) above LAPACK's blocking of the tridiagonal reduction
    (32 columns from 128 on): the same pairs as NumPy's, down to a subset of all of them."""
    lo, hi = subset
    A = sym_with_spectrum(rng, _separated_spectrum(rng, n))
    w, V = hl.eigh(A, subset=subset)
    wr, Vr = np.linalg.eigh(A)
    assert_rel(w, wr[lo:hi + 1])
    assert_columns_equal_up_to_sign(V, Vr[:, lo:hi + 1])
    assert_rel(A @ V, V * w)


@pytest.mark.parametrize("scale", [1e-300, 1e-160, 1e160, 1e300])
def test_eigh_scales_extreme_matrices_into_range(rng, scale):
    """LAPACK's scaling: entries near under- or overflow give the eigenvalues of the unscaled
    matrix times the scale, and the same vectors."""
    A = sym_with_spectrum(rng, _separated_spectrum(rng, 150))
    w, V = hl.eigh(A)
    ws, Vs = hl.eigh(A * scale)
    assert np.all(np.isfinite(ws))
    assert_rel(ws / scale, w)
    assert_columns_equal_up_to_sign(Vs, V)


def test_eigh_of_a_kernel_matrix_deflates_and_stays_orthogonal(rng):
    """A Gaussian kernel matrix (eigenvalues decaying to round-off, most of them deflated in
    dsyevd's merges): all pairs by divide and conquer, orthonormal to round-off, the same
    eigenvalues as NumPy's."""
    X = rng.standard_normal((600, 3))
    A = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    w, V = hl.eigh(A)
    assert_rel(w, np.linalg.eigvalsh(A))
    assert np.abs(V.T @ V - np.eye(600)).max() <= 1e-13
    assert np.abs(A @ V - V * w).max() <= 1e-12


def test_eigh_overwrite_a_works_in_place_only_when_it_can(rng):
    """overwrite_a=True works in a writeable C-contiguous float64 A (its contents are then
    spent) and copies anything else; the pairs are the same bits either way."""
    A = sym_with_spectrum(rng, _separated_spectrum(rng, 90))
    w, V = hl.eigh(A, subset=(30, 89))
    A1 = A.copy()
    w1, V1 = hl.eigh(A1, subset=(30, 89), overwrite_a=True)
    np.testing.assert_array_equal(w1, w)
    np.testing.assert_array_equal(V1, V)
    assert not np.array_equal(A1, A)
    fortran = np.asfortranarray(A)
    readonly = A.copy()
    readonly.flags.writeable = False
    for other in (fortran, readonly):
        w2, V2 = hl.eigh(other, subset=(30, 89), overwrite_a=True)
        np.testing.assert_array_equal(other, A)
        np.testing.assert_array_equal(w2, w)
        np.testing.assert_array_equal(V2, V)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_eigh_and_lstsq_refuse_non_finite_matrices(bad):
    """A NaN or inf gives LinAlgError before LAPACK sees it, not NaN pairs (divide and conquer)
    or a hang (MRRR did not return on a NaN diagonal within a minute); only the triangle that
    is read counts."""
    A = np.eye(60)
    A[7, 7] = bad
    with pytest.raises(LinAlgError, match="non-finite"):
        hl.eigh(A)
    with pytest.raises(LinAlgError, match="non-finite"):
        hl.eigh(A, subset=(50, 59))
    with pytest.raises(LinAlgError, match="non-finite"):
        hl.lstsq(A[:, :30], np.ones(60))
    with pytest.raises(LinAlgError, match="non-finite"):
        hl.lstsq(A[:30, :], np.ones(30))
    with pytest.raises(LinAlgError, match="non-finite"):
        hl.lstsq(np.eye(4), np.array([1.0, bad, 0.0, 0.0]))
    with pytest.raises(LinAlgError, match="non-finite"):
        hl.lstsq(A[:, :30], np.ones(60), driver="gesdd")
    with pytest.raises(LinAlgError, match="non-finite"):
        hl.qr(A[:, :30])
    upper_only = np.eye(60)
    upper_only[3, 50] = bad                     # eigh reads the lower triangle only
    w, _ = hl.eigh(upper_only)
    np.testing.assert_array_equal(w, np.ones(60))


def test_eigh_bad_subset():
    A = np.eye(4)
    for subset in [(2, 1), (-1, 2), (0, 4)]:
        with pytest.raises(ValueError, match="subset"):
            hl.eigh(A, subset=subset)
    with pytest.raises(ValueError, match="square"):
        hl.eigh(np.ones((3, 4)))


# ------------------------------------------------------------------------------------------------
# LAPACK's hard cases at n in the thousands, and LAPACK's threads
# ------------------------------------------------------------------------------------------------

def _backward_error(A, w, V):
    """max(||A V - V diag(w)|| / (n ||A||), ||V^T V - I|| / n) in units of eps: LAPACK's own
    test ratios (dsyt21), which a stable eigensolver keeps of order one."""
    n = A.shape[0]
    eps = np.finfo(float).eps
    norm = max(np.linalg.norm(A, 1), np.finfo(float).tiny)
    residual = np.linalg.norm(A @ V - V * w, 1) / (n * norm * eps)
    loss = np.linalg.norm(V.T @ V - np.eye(V.shape[1]), 1) / (n * eps)
    return max(residual, loss)


def _glued_wilkinson(blocks, m=21, glue=1e-12):
    """Tridiagonal (as a dense matrix): ``blocks`` copies of Wilkinson's W+_m joined by
    off-diagonal ``glue``; its eigenvalues come in clusters of ``blocks`` nearly equal values,
    the case that breaks eigenvector orthogonality in a weak tridiagonal eigensolver."""
    half = (m - 1) / 2
    d = np.tile(np.abs(np.arange(m) - half), blocks)
    e = np.ones(blocks * m - 1)
    e[m - 1::m] = glue
    return np.diag(d) + np.diag(e, 1) + np.diag(e, -1)


def _graded(rng, n, decades=200):
    """D B D for a random symmetric B and D = diag(10^(-decades i / n)): entries graded over
    ``2 decades`` orders of magnitude, down to near underflow."""
    B = rng.standard_normal((n, n))
    D = np.logspace(0, -decades, n)
    return D[:, None] * (B + B.T) * D[None, :]


@pytest.mark.parametrize("make", ["glued_wilkinson", "graded"])
def test_eigh_hard_cases_at_thousands(rng, make):
    """All pairs (dsyevd) and a subset (dsyevr) of LAPACK's hard cases at n near 2000: test
    ratios of order one, the eigenvalues NumPy's (SciPy's ``driver="evd"`` on any other LAPACK)
    to n eps ||A||."""
    A = _glued_wilkinson(95) if make == "glued_wilkinson" else _graded(rng, 2000)
    n = A.shape[0]
    w, V = hl.eigh(A, n_threads=2)
    assert _backward_error(A, w, V) < 30
    reference = sla.eigh(A, eigvals_only=True, driver="evd")
    assert np.abs(w - reference).max() <= 10 * n * np.finfo(float).eps * np.abs(A).max()
    ws, Vs = hl.eigh(A, subset=(n - 300, n - 1))
    assert np.abs(ws - w[-300:]).max() <= 10 * n * np.finfo(float).eps * np.abs(A).max()
    assert _backward_error(A, ws, Vs) < 30


def test_lstsq_and_qr_graded_at_thousands(rng):
    """Both drivers on a graded 2500 x 1200 matrix (columns 1 down to 1e-200): the fitted
    values A X of SciPy's gelsd to 10 eps times the kept condition number; dgelqf/dorglq's
    thin QR of it has orthonormal Q and reproduces A column by column to each column's own
    scale."""
    m, n = 2500, 1200
    scale = np.logspace(0, -200, n)
    A = rng.standard_normal((m, n)) * scale
    B = rng.standard_normal((m, 2))
    Xr, _, rank_r, s = sla.lstsq(A, B, cond=1e-10, lapack_driver="gelsd")
    # Two stable solvers agree on the fitted values to eps times the kept condition number.
    bound = 10 * np.finfo(float).eps * s[0] / s[rank_r - 1]
    for driver in ("gelsd", "gesdd"):
        X, rank = hl.lstsq(A, B, rcond=1e-10, n_threads=2, driver=driver)
        assert rank == rank_r
        assert_rel(A @ X, A @ Xr, bound)
    Q, R = hl.qr(A, n_threads=2)
    assert np.abs(Q.T @ Q - np.eye(n)).max() <= 1e-12
    assert np.all(np.abs(Q @ R - A).max(axis=0) <= 1e-13 * np.abs(A).max(axis=0) * np.sqrt(m))


def test_lapack_threads_change_only_the_time(rng):
    """n_threads is LAPACK's: 1 and 2 give the same pairs to round-off (not the same bits:
    a fit whose answer must not depend on n_jobs calls them with one thread), and one thread
    gives the same bits every time."""
    A = sym_with_spectrum(rng, _separated_spectrum(rng, 400))
    w1, V1 = hl.eigh(A, n_threads=1)
    w2, V2 = hl.eigh(A, n_threads=2)
    assert_rel(w2, w1)
    assert_columns_equal_up_to_sign(V2, V1, 1e-10)
    w1b, V1b = hl.eigh(A, n_threads=1)
    np.testing.assert_array_equal(w1b, w1)
    np.testing.assert_array_equal(V1b, V1)
    B = rng.standard_normal((500, 200))
    assert_rel(hl.qr(B, n_threads=2)[1], hl.qr(B, n_threads=1)[1])
    assert_rel(hl.lstsq(B, B[:, :3], n_threads=2)[0], hl.lstsq(B, B[:, :3])[0])


# ------------------------------------------------------------------------------------------------
# Least squares and QR
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n", [(30, 8), (8, 8), (8, 30)])
@pytest.mark.parametrize("rhs", ["vector", "matrix"])
@pytest.mark.parametrize("driver", ["gelsd", "gesdd"])
def test_lstsq_full_rank(rng, driver, m, n, rhs):
    A = rng.standard_normal((m, n))
    B = rng.standard_normal(m) if rhs == "vector" else rng.standard_normal((m, 3))
    A0, B0 = A.copy(), B.copy()
    X, rank = hl.lstsq(A, B, driver=driver)
    ref = np.linalg.lstsq(A, B, rcond=None)[0]
    assert rank == min(m, n)
    assert X.shape == ref.shape
    assert_rel(X, ref)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_array_equal(B, B0)


@pytest.mark.parametrize("m,n,r", [(30, 12, 5), (12, 30, 5), (20, 20, 1), (25, 10, 9)])
@pytest.mark.parametrize("rhs", ["vector", "matrix"])
@pytest.mark.parametrize("driver", ["gelsd", "gesdd"])
def test_lstsq_rank_deficient_is_minimum_norm(rng, driver, m, n, r, rhs):
    A = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
    B = rng.standard_normal(m) if rhs == "vector" else rng.standard_normal((m, 4))
    X, rank = hl.lstsq(A, B, driver=driver)
    assert rank == r
    assert_rel(X, np.linalg.pinv(A, rcond=1e-10) @ B)
    assert_rel(X, np.linalg.lstsq(A, B, rcond=1e-10)[0])


@pytest.mark.parametrize("driver", ["gelsd", "gesdd"])
def test_lstsq_exactly_duplicated_columns(rng, driver):
    A = rng.standard_normal((15, 4))
    A = np.hstack([A, A[:, :2]])                  # rank 4, six columns
    B = rng.standard_normal((15, 2))
    X, rank = hl.lstsq(A, B, driver=driver)
    assert rank == 4
    assert_rel(X, np.linalg.pinv(A) @ B)
    # Minimum norm: the duplicated columns share the weight equally.
    np.testing.assert_allclose(X[:2], X[4:], rtol=1e-12, atol=0)


@pytest.mark.parametrize("driver", ["gelsd", "gesdd"])
def test_lstsq_rcond_is_relative(rng, driver):
    m, n = 12, 3
    A = with_singular_values(rng, m, n, np.array([1.0, 1e-2, 1e-14]))
    B = rng.standard_normal((m, 2))
    for rcond, r in [(1e-12, 2), (1e-1, 1), (1e-16, 3)]:
        for scale in (1.0, 1e-8, 1e8):
            X, rank = hl.lstsq(scale * A, B, rcond=rcond, driver=driver)
            assert rank == r, (rcond, scale)
            if r < 3:   # the rank-3 solution is too ill-conditioned to compare at 1e-12
                assert_rel(X, np.linalg.pinv(scale * A, rcond=rcond) @ B)


@pytest.mark.parametrize("m,n", [(700, 300), (300, 300), (200, 450)])
@pytest.mark.parametrize("driver", ["gelsd", "gesdd"])
def test_lstsq_matches_the_pseudo_inverse(rng, driver, m, n):
    """Tall, square and wide A = U diag(s) V^T with s from 1 down to 1e-9, cut at 1e-6 and at
    1e-12: the pseudo-inverse solution V diag(1/s) U^T B over the kept s, to 10 eps times the
    kept condition number."""
    k = min(m, n)
    s = np.logspace(0, -9, k)
    U, _ = np.linalg.qr(rng.standard_normal((m, k)))
    V, _ = np.linalg.qr(rng.standard_normal((n, k)))
    A = (U * s) @ V.T
    B = rng.standard_normal((m, 5))
    for rcond in (1e-6, 1e-12):
        keep = s > rcond * s[0]
        exact = (V[:, keep] / s[keep]) @ (U[:, keep].T @ B)
        X, rank = hl.lstsq(A, B, rcond=rcond, driver=driver)
        assert rank == np.sum(keep)
        assert_rel(X, exact, 10 * np.finfo(float).eps * s[0] / s[keep][-1])


def test_lstsq_shape_error():
    with pytest.raises(ValueError, match="same number of rows"):
        hl.lstsq(np.ones((4, 2)), np.ones(3))
    with pytest.raises(ValueError, match="driver must be"):
        hl.lstsq(np.ones((4, 2)), np.ones(4), driver="gelsy")
    with pytest.raises(ValueError, match="2-D"):
        hl.lstsq(np.ones(4), np.ones(4))


@pytest.mark.parametrize("m,n", [(40, 15), (300, 300), (700, 129), (5, 1)])
def test_qr(rng, m, n):
    A = rng.standard_normal((m, n))
    A0 = A.copy()
    Q, R = hl.qr(A)
    np.testing.assert_array_equal(A, A0)
    assert Q.shape == (m, n) and R.shape == (n, n)
    assert not np.tril(R, -1).any()
    assert_rel(Q @ R, A)
    assert_rel(Q.T @ Q, np.eye(n))
    Qr, Rr = np.linalg.qr(A)
    signs = np.sign(np.diag(R)) * np.sign(np.diag(Rr))
    assert_rel(Q * signs, Qr)
    with pytest.raises(ValueError, match="rows >= columns"):
        hl.qr(np.ones((2, 3)))


# ------------------------------------------------------------------------------------------------
# Determinism: the tiled level-3 routines give identical bits for any thread count
# ------------------------------------------------------------------------------------------------

def test_level3_bitwise_identical_across_n_threads(rng):
    # Small inner dimensions keep this fast; the outputs span several tiles each way.
    A = rng.standard_normal((2 * TILE + 13, 24))
    B = rng.standard_normal((24, 3 * TILE + 7))
    S = spd(rng, 2 * CHOL_BLOCK + 60)
    T = np.tril(S)
    R = rng.standard_normal((S.shape[0], TILE + 9))
    results = {}
    for nt in (1, 2, 3):
        results[nt] = [
            hl.matmul(A, B, n_threads=nt),
            hl.matmul(B, B, trans_a=True, n_threads=nt),
            hl.matmul(A, A, trans_b=True, alpha=-0.5, n_threads=nt),
            hl.gram(A, n_threads=nt),
            hl.gram(B, trans=True, n_threads=nt),
            hl.solve_triangular(T, R, n_threads=nt),
            hl.solve_triangular(T, R.T, left=False, trans=True, n_threads=nt),
            hl.cholesky(S, n_threads=nt),
            hl.cho_solve(np.linalg.cholesky(S), R, n_threads=nt),
        ]
    for nt in (2, 3):
        for i, (r1, r) in enumerate(zip(results[1], results[nt])):
            assert np.array_equal(r1, r), (nt, i)
    # And they are right.
    assert_rel(results[1][0], A @ B)
    assert_rel(results[1][1], B.T @ B)
    assert_rel(results[1][4], B.T @ B)
    assert_rel(results[1][7], np.linalg.cholesky(S))
    assert_rel(results[1][8], np.linalg.solve(S, R))


# ------------------------------------------------------------------------------------------------
# Empty inputs
# ------------------------------------------------------------------------------------------------

def test_empty_inputs():
    E = np.zeros((0, 0))
    e = np.zeros(0)
    assert hl.matmul(E, E).shape == (0, 0)
    assert hl.matmul(np.zeros((3, 0)), np.zeros((0, 4))).shape == (3, 4)
    np.testing.assert_array_equal(hl.matmul(np.zeros((3, 0)), np.zeros((0, 4))), 0.0)
    assert hl.matmul(np.zeros((0, 3)), np.ones((3, 4))).shape == (0, 4)
    assert hl.matvec(E, e).shape == (0,)
    np.testing.assert_array_equal(hl.matvec(np.zeros((3, 0)), e), np.zeros(3))
    assert hl.gram(E).shape == (0, 0)
    np.testing.assert_array_equal(hl.gram(np.zeros((3, 0))), np.zeros((3, 3)))
    assert hl.solve_triangular(E, e).shape == (0,)
    assert hl.solve_triangular(E, np.zeros((0, 2))).shape == (0, 2)
    assert hl.solve_triangular(np.eye(3), np.zeros((3, 0))).shape == (3, 0)
    assert hl.cholesky(E).shape == (0, 0)
    assert hl.cholesky(E, overwrite=True).shape == (0, 0)
    assert hl.cho_solve(E, e).shape == (0,)
    w, V = hl.eigh(E)
    assert w.shape == (0,) and V.shape == (0, 0)
    w, V = hl.eigh(E, subset=None, overwrite_a=True)
    assert w.shape == (0,) and V.shape == (0, 0)
    Q, R = hl.qr(np.zeros((4, 0)))
    assert Q.shape == (4, 0) and R.shape == (0, 0)
    X, rank = hl.lstsq(E, e)
    assert X.shape == (0,) and rank == 0
    for driver in ("gelsd", "gesdd"):
        X, rank = hl.lstsq(np.zeros((0, 3)), np.zeros((0, 2)), driver=driver)
        np.testing.assert_array_equal(X, np.zeros((3, 2)))
        assert rank == 0
    X, rank = hl.lstsq(np.zeros((4, 3)), np.ones((4, 2)), driver="gesdd")
    np.testing.assert_array_equal(X, np.zeros((3, 2)))
    assert rank == 0


# ------------------------------------------------------------------------------------------------
# Property tests on small random shapes
# ------------------------------------------------------------------------------------------------

_seeds = st.integers(0, 2**32 - 1)


@settings(max_examples=40, deadline=None)
@given(m=st.sampled_from([1, 2, 7, 12, TILE - 1, TILE, TILE + 1]), k=st.integers(1, 12),
       n=st.sampled_from([1, 3, 11, TILE - 1, TILE, TILE + 1, 2 * TILE + 1]),
       trans_a=st.booleans(), trans_b=st.booleans(), n_threads=st.integers(1, 3), seed=_seeds)
def test_matmul_property(m, k, n, trans_a, trans_b, n_threads, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, k))
    B = rng.standard_normal((k, n))
    got = hl.matmul(A.T.copy() if trans_a else A, B.T.copy() if trans_b else B,
                    trans_a=trans_a, trans_b=trans_b, n_threads=n_threads)
    assert_rel(got, A @ B)


@settings(max_examples=25, deadline=None)
@given(n=st.sampled_from([1, 5, TILE - 1, TILE, TILE + 1, 3 * TILE + 2]), k=st.integers(1, 6),
       trans=st.booleans(), n_threads=st.integers(1, 3), seed=_seeds)
def test_gram_property(n, k, trans, n_threads, seed):
    """syrk_tiled numbers the lower-triangle tiles t -> (bi, bj) with a sqrt estimate: every
    tile must be visited exactly once for any tile count."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((k, n) if trans else (n, k))
    G = hl.gram(A, trans=trans, n_threads=n_threads)
    assert_rel(G, A.T @ A if trans else A @ A.T)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 20), nrhs=st.integers(1, 3), seed=_seeds)
def test_cholesky_solve_property(n, nrhs, seed):
    rng = np.random.default_rng(seed)
    A = spd(rng, n)
    B = rng.standard_normal((n, nrhs))
    L = hl.cholesky(A)
    assert_rel(L, np.linalg.cholesky(A))
    assert_rel(hl.cho_solve(L, B), np.linalg.solve(A, B))


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 12), n=st.integers(1, 12), seed=_seeds)
def test_lstsq_property(m, n, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, n))
    s = np.linalg.svd(A, compute_uv=False)
    B = rng.standard_normal(m)
    ref = np.linalg.lstsq(A, B, rcond=None)[0]
    cond = s[0] / s[-1]
    for driver in ("gelsd", "gesdd"):
        X, rank = hl.lstsq(A, B, driver=driver)
        assert rank == min(m, n)
        assert rel_norm(X, ref) <= 1e-14 * cond**2 + TOL


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("left", [True, False])
def test_triangular_multiply(rng, lower, trans, unit, left):
    n, k = 9, 5
    T = rng.standard_normal((n, n))
    B = rng.standard_normal((n, k)) if left else rng.standard_normal((k, n))
    tri = np.tril(T) if lower else np.triu(T)
    if unit:
        np.fill_diagonal(tri, 1.0)
    op = tri.T if trans else tri
    ref = op @ B if left else B @ op
    got = hl.triangular_multiply(T, B, lower=lower, trans=trans, unit_diagonal=unit, left=left)
    assert_rel(got, ref)


@pytest.mark.parametrize("n", [1, 5, 127, 128, 129, 300])
def test_cholesky_pair_is_falkons_two_factors(n):
    """T^T T = W in the strict upper triangle (+ the returned diagonal) and
    B B^T = scale T T^T + lam I in the lower one, across INV_TILE boundaries; the same bits for
    any thread count."""
    rng = np.random.default_rng(n)
    G = rng.standard_normal((n, n + 3))
    W = G @ G.T / n + 0.1 * np.eye(n)
    outs = []
    for n_threads in (1, 2, 3):
        A = W.copy()
        t_diag = hl.cholesky_pair(A, 2.5, 0.3, n_threads)
        outs.append((A, t_diag))
    A, t_diag = outs[0]
    T = np.triu(A, 1) + np.diag(t_diag)
    B = np.tril(A)
    assert np.abs(T.T @ T - W).max() <= 1e-13 * np.abs(W).max()
    ref = 2.5 * T @ T.T + 0.3 * np.eye(n)
    assert np.abs(B @ B.T - ref).max() <= 1e-13 * np.abs(ref).max()
    assert np.allclose(T, sla.cholesky(W, lower=False), rtol=0, atol=1e-12)
    assert all(np.array_equal(o[0], A) and np.array_equal(o[1], t_diag) for o in outs[1:])


def test_cholesky_pair_leaves_w_upper_when_not_definite():
    W = np.array([[1.0, 2.0, 0.5], [2.0, 1.0, 0.3], [0.5, 0.3, 1.0]])
    A = W.copy()
    assert hl.cholesky_pair(A, 1.0, 0.1) is None
    assert np.array_equal(np.triu(A, 1), np.triu(W, 1))


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 130])
@pytest.mark.parametrize("from_lower", [True, False])
def test_symmetrize_copies_one_triangle_onto_the_other(n, from_lower):
    A = np.random.default_rng(n).standard_normal((n, n))
    out = hl.symmetrize(A.copy(), from_lower=from_lower)
    kept = np.tril(A) if from_lower else np.triu(A)
    np.testing.assert_array_equal(out, kept + np.tril(kept, -1).T if from_lower
                                  else kept + np.triu(kept, 1).T)


# ----------------------------------------------------------------------------------------------
# Single precision: float32 inputs are computed by the s-routines through the same tiles.
# ----------------------------------------------------------------------------------------------

# float32 rounding of a length-k sum of products, relative to the sum of their magnitudes.
def _single_bound(k):
    return 4 * k * np.finfo(np.float32).eps


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True)])
def test_matmul_single_precision(rng, trans_a, trans_b):
    A = rng.normal(size=(600, 700) if trans_a else (700, 600)).astype(np.float32)
    B = rng.normal(size=(550, 600) if trans_b else (600, 550)).astype(np.float32)
    out = hl.matmul(A, B, trans_a=trans_a, trans_b=trans_b, alpha=0.5, n_threads=2)
    a, b = A.astype(np.float64), B.astype(np.float64)
    a, b = (a.T if trans_a else a), (b.T if trans_b else b)
    assert out.dtype == np.float32
    assert np.abs(out - 0.5 * a @ b).max() <= _single_bound(600) * (np.abs(a) @ np.abs(b)).max()
    # Same bits for any thread count, and a float64 operand makes the product float64.
    assert np.array_equal(out, hl.matmul(A, B, trans_a=trans_a, trans_b=trans_b, alpha=0.5))
    assert hl.matmul(A, B.astype(np.float64), trans_a=trans_a, trans_b=trans_b).dtype \
        == np.float64


def test_gram_cholesky_and_solves_single_precision(rng):
    F = rng.normal(size=(900, 530)).astype(np.float32)
    G = hl.gram(F, trans=True, n_threads=2)
    f = F.astype(np.float64)
    assert G.dtype == np.float32 and np.array_equal(G, G.T)
    assert np.abs(G - f.T @ f).max() <= _single_bound(900) * 900
    S = G + np.float32(900) * np.eye(530, dtype=np.float32)
    L = hl.cholesky(S, n_threads=2)
    assert L.dtype == np.float32 and not np.triu(L, 1).any()
    s = S.astype(np.float64)
    assert rel_norm(L.astype(np.float64) @ L.T.astype(np.float64), s) < 1e-6
    assert np.array_equal(L, hl.cholesky(S, n_threads=1))
    B = rng.normal(size=(530, 3)).astype(np.float32)
    X = hl.cho_solve(L, B, n_threads=2)
    assert X.dtype == np.float32
    assert rel_norm(X, np.linalg.solve(s, B.astype(np.float64))) < 1e-5
    Y = hl.solve_triangular(L, B, trans=True, n_threads=2)
    assert Y.dtype == np.float32
    assert rel_norm(Y, sla.solve_triangular(L.astype(np.float64).T, B, lower=False)) < 1e-5


def test_cholesky_pair_single_precision(rng):
    n = 300
    Z = rng.normal(size=(n, n + 50))
    W = Z @ Z.T / n + np.eye(n)
    A64, A32 = W.copy(), W.astype(np.float32)
    t64, t32 = hl.cholesky_pair(A64, 4.0, 0.5), hl.cholesky_pair(A32, 4.0, 0.5)
    assert t32.dtype == np.float32 and A32.dtype == np.float32
    assert np.allclose(t32, t64, rtol=1e-5)
    assert np.allclose(np.tril(A32), np.tril(A64), rtol=0, atol=1e-5 * np.abs(A64).max())

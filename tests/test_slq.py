"""Dense-reference tests of hkern.solvers.slq (the stochastic GP likelihood of exact kernel ridge by
block PCG, stochastic Lanczos quadrature and Hutchinson) and of what it adds to block_pcg (the
CG coefficients of the Lanczos matrix, a warm start) and to the Nystrom preconditioner (its
samples).  Every reference is built from the definitions: the Gaussian kernel matrix from squared
differences, log det and A^{-1} by a dense Cholesky factor."""
import math

import numpy as np
import pytest
import scipy.linalg as sla

from hkern.oasis.api import nystrom_factor
from hkern.solvers import KernelSystem, NystromPreconditioner, block_pcg
from hkern.solvers.cg import lanczos_tridiagonal
from hkern.solvers.slq import (
    gaussian_stochastic_lml,
    lengthscale_quads,
    stochastic_lml,
    stochastic_lml_gradient,
)

pytestmark = pytest.mark.usefixtures("single_threaded_reference_blas")


# ---------------------------------------------------------------- dense references


def squared_differences(X, ls):
    """D_j[a, b] = (x_aj - x_bj)^2 of x = X / ls, shape (d, n, n)."""
    Xs = X / ls
    return (Xs.T[:, :, None] - Xs.T[:, None, :]) ** 2


def dense_gaussian(X, ls):
    """K = exp(-|x_a - x_b|^2 / 2) of x = X / ls."""
    return np.exp(-0.5 * squared_differences(X, np.broadcast_to(ls, X.shape[1])).sum(axis=0))


def dense_likelihoods(X, y, ls, lam):
    """(profiled lml, lml, log det A, quad) of y under A = K + lam I (one column)."""
    n = len(y)
    A = dense_gaussian(X, ls) + lam * np.eye(n)
    factor = sla.cho_factor(A, lower=True)
    logdet = 2.0 * np.sum(np.log(np.diag(factor[0])))
    quad = float(y @ sla.cho_solve(factor, y))
    profiled = -0.5 * n * math.log(quad / n) - 0.5 * logdet - 0.5 * n * (1 + math.log(2 * math.pi))
    plain = -0.5 * quad - 0.5 * logdet - 0.5 * n * math.log(2 * math.pi)
    return profiled, plain, logdet, quad


def central_differences(f, theta, h=1e-4):
    """Central differences of a vector-valued f in each coordinate of theta: O(h^2) ~ 1e-8
    relative truncation, rounding eps |f| / h ~ 1e-9 relative."""
    out = []
    for i in range(len(theta)):
        e = np.zeros(len(theta))
        e[i] = h
        out.append((np.asarray(f(theta + e)) - np.asarray(f(theta - e))) / (2 * h))
    return np.array(out).T          # (outputs, params)


def gp_problem(n, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


def fixed_system():
    rng = np.random.default_rng(7)
    n = 80
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * 0.9 ** np.arange(n)) @ Q.T + 0.05 * np.eye(n)      # condition number ~ 21
    return A, rng.standard_normal((n, 3))


def preconditioned_problem(n=200, rank=15, lam=1e-2, seed=0):
    """A = K + lam I of a Gaussian kernel and a rank-``rank`` Nystrom preconditioner of it."""
    X, _ = gp_problem(n, d=2, seed=seed)
    A = dense_gaussian(X, 1.0) + lam * np.eye(n)
    F = nystrom_factor(np.ascontiguousarray(X), rank, method="block_rpcholesky",
                       kernel="gaussian", sigma=1.0, seed=seed, n_jobs=1, max_memory=None)
    M = NystromPreconditioner(F, lam)
    return A, F, M


# ---------------------------------------------------------------- block_pcg's new options


def test_block_pcg_without_the_new_options_is_unchanged():
    # Values recorded with block_pcg before x0 and record_lanczos existed.
    A, B = fixed_system()
    res = block_pcg(lambda V: A @ V, B, tol=1e-10, max_iter=500)
    # Recorded: [37, 38, 38].  At 1e-10 the last digits of A @ V (the machine's BLAS kernels)
    # decide on which side of tol a column's residual lands: on an AMD EPYC machine the second
    # column read 4.0e-11 after 37 iterations and stopped there.  So each column stops at the
    # first iteration whose recorded residual is at most tol, one of the recorded counts.
    residuals = np.asarray(res.residuals)
    first_below = [int(np.argmax(residuals[:, j] <= 1e-10)) for j in range(3)]
    assert res.n_iter.tolist() == first_below
    assert all(37 <= k <= 38 for k in first_below)
    np.testing.assert_allclose(res.residuals[5], [0.1729703119803971, 0.14228406246679176,
                                                  0.1975786464721356], rtol=1e-9)
    np.testing.assert_allclose(res.X[0], [21.960504115485218, -4.93676651786792,
                                          -2.853873466177548], rtol=1e-9)
    assert res.steps is None and res.betas is None
    # Recording and a zero start do not touch the arithmetic: the same bits.
    rec = block_pcg(lambda V: A @ V, B, tol=1e-10, max_iter=500, x0=np.zeros_like(B),
                    record_lanczos=True)
    assert np.array_equal(rec.X, res.X) and np.array_equal(rec.n_iter, res.n_iter)
    assert all(np.array_equal(a, b) for a, b in zip(rec.residuals, res.residuals))
    assert [len(s) for s in rec.steps] == res.n_iter.tolist()
    assert [len(b) for b in rec.betas] == (res.n_iter - 1).tolist()


def test_warm_start_reaches_the_same_solution_in_fewer_iterations():
    A, B = fixed_system()
    ref = sla.solve(A, B, assume_a="pos")
    cold = block_pcg(lambda V: A @ V, B, tol=1e-10, max_iter=500)
    rough = block_pcg(lambda V: A @ V, B, tol=1e-3, max_iter=500)
    warm = block_pcg(lambda V: A @ V, B, tol=1e-10, max_iter=500, x0=rough.X)
    assert warm.converged.all()
    assert np.all(warm.n_iter < cold.n_iter)
    # ||x - x*|| <= cond(A) ||r|| / ||A||-ish: both solutions are within ~1e-8 of the truth.
    np.testing.assert_allclose(warm.X, ref, rtol=0, atol=1e-8 * np.abs(ref).max())
    np.testing.assert_allclose(warm.X, cold.X, rtol=0, atol=1e-8 * np.abs(ref).max())
    # A start at the solution is converged at once (residuals relative to ||b||).
    exact = block_pcg(lambda V: A @ V, B, tol=1e-10, max_iter=500, x0=ref)
    assert exact.n_iter.tolist() == [0, 0, 0] and np.array_equal(exact.X, ref)


def lanczos_run(A, M, b):
    """T of one column's PCG recording (to 1e-12), and the pencil (A, M)'s eigenpairs: the
    spectrum of P = M^{-1/2} A M^{-1/2}, with V^T M V = I so that M^{-1/2} f(P) M^{-1/2} =
    V f(w) V^T."""
    res = block_pcg(lambda V: A @ V, b, apply_m=M, tol=1e-12, max_iter=500, record_lanczos=True)
    assert res.converged.all()
    diagonal, off = lanczos_tridiagonal(res.steps[0], res.betas[0])
    T = np.diag(diagonal) + np.diag(off, 1) + np.diag(off, -1)
    Mdense = M.F @ M.F.T + M.lam * np.eye(len(A))
    w, V = sla.eigh(A, Mdense)
    return T, w, V


def test_lanczos_matrix_has_the_extreme_eigenvalues():
    # A separated spectrum: both ends are found to working precision.
    rng = np.random.default_rng(11)
    Q, _ = np.linalg.qr(rng.standard_normal((60, 60)))
    A = (Q * np.geomspace(1, 100, 60)) @ Q.T
    T, w, _ = lanczos_run(A, NystromPreconditioner(rng.standard_normal((60, 5)), 1.0),
                          rng.standard_normal((60, 1)))
    theta = np.linalg.eigvalsh(T)
    np.testing.assert_allclose([theta[0], theta[-1]], [w[0], w[-1]], rtol=1e-10)
    # A kernel system: P >= I (K - F F^T is positive semi-definite) with a continuum of
    # eigenvalues just above 1 and many equal to 1, which a Ritz value approaches only slowly;
    # the top end is isolated.  Ritz values lie inside the spectrum.
    A, _, M = preconditioned_problem()
    T, w, _ = lanczos_run(A, M, np.random.default_rng(1).standard_normal((len(A), 1)))
    theta = np.linalg.eigvalsh(T)
    np.testing.assert_allclose(theta[-1], w[-1], rtol=1e-10)
    assert w[0] - 1e-10 <= theta[0] <= w[0] + 1e-3


def test_lanczos_quadrature_matches_the_quadratic_forms():
    # r^T M^{-1/2} f(P) M^{-1/2} r = ||M^{-1/2} r||^2 e1^T f(T) e1: exact for the identity
    # (T_11 = 1 / alpha_1), Gauss quadrature (converged with the solve) for 1/x and log.
    A, _, M = preconditioned_problem()
    b = np.random.default_rng(1).standard_normal((len(A), 1))
    T, w, V = lanczos_run(A, M, b)
    theta, S = np.linalg.eigh(T)
    e1_f = lambda f: float(S[0] ** 2 @ f(theta))         # noqa: E731
    norm2 = float(b[:, 0] @ M(b)[:, 0])
    c = V.T @ b[:, 0]
    np.testing.assert_allclose(norm2 * T[0, 0], c @ (w * c), rtol=1e-12)
    np.testing.assert_allclose(norm2 * e1_f(lambda x: x), c @ (w * c), rtol=1e-12)
    np.testing.assert_allclose(norm2 * e1_f(lambda x: 1 / x),
                               b[:, 0] @ np.linalg.solve(A, b[:, 0]), rtol=1e-9)
    np.testing.assert_allclose(norm2 * e1_f(np.log), c @ (np.log(w) * c), rtol=1e-9)


# ---------------------------------------------------------------- the preconditioner


def test_preconditioner_samples_and_logdet():
    A, F, M = preconditioned_problem(n=40, rank=4)
    Mdense = F @ F.T + M.lam * np.eye(40)
    assert M.logdet() == pytest.approx(np.linalg.slogdet(Mdense)[1], rel=1e-12)
    Z = M.sample(np.random.default_rng(0), 40000)
    assert Z.shape == (40, 40000) and Z.flags.c_contiguous
    # Sample covariance of 40000 draws: entries within ~4 standard errors
    # (sd of an entry = sqrt((M_ab^2 + M_aa M_bb) / t)).
    C = Z @ Z.T / Z.shape[1]
    sd = np.sqrt((Mdense ** 2 + np.outer(np.diag(Mdense), np.diag(Mdense))) / Z.shape[1])
    assert np.all(np.abs(C - Mdense) < 5 * sd)


# ---------------------------------------------------------------- the estimates


def test_logdet_and_profiled_lml_within_their_standard_errors():
    X, y = gp_problem(1500)
    ls, lam = np.array([0.7, 1.0, 1.5]), 0.05
    profiled, plain, logdet, quad = dense_likelihoods(X, y, ls, lam)
    est, _ = gaussian_stochastic_lml(X, y, ls, lam, rank=100, n_probes=30, seed=1, tol=1e-8,
                                     gradient=False)
    assert est.converged.all()
    assert est.quad[0] == pytest.approx(quad, rel=1e-7)
    assert est.logdet_stderr > 0
    assert abs(est.logdet - logdet) < 3 * est.logdet_stderr
    assert abs(est.logdet - logdet) < 0.01 * abs(logdet)
    assert est.lml_stderr == pytest.approx(0.5 * est.logdet_stderr)
    assert abs(est.profiled_lml - profiled) < 3 * est.lml_stderr
    assert abs(est.profiled_lml - profiled) < 0.01 * abs(profiled)
    assert abs(est.lml - plain) < 3 * est.lml_stderr
    assert est.evidence.profiled_lml() == est.profiled_lml
    # The standard error is that of a mean of the per-probe samples.
    assert est.logdet == pytest.approx(est.logdet_samples.mean())
    assert est.logdet_stderr == pytest.approx(est.logdet_samples.std(ddof=1) / math.sqrt(30))


def test_lengthscale_quads_match_dense_in_any_chunking():
    X, _ = gp_problem(150)
    ls = np.array([0.8, 1.3, 2.0])
    rng = np.random.default_rng(2)
    U, V = rng.standard_normal((150, 5)), rng.standard_normal((150, 5))
    K, D = dense_gaussian(X, ls), squared_differences(X, ls)
    ref = np.einsum("ai,jab,ab,bi->ij", U, D, K, V)
    Xs = np.ascontiguousarray(X / ls)
    Xs -= Xs.mean(axis=0)
    whole = lengthscale_quads(Xs, U, V)
    np.testing.assert_allclose(whole, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
    one_at_a_time = lengthscale_quads(Xs, U, V, block_bytes=1)
    np.testing.assert_allclose(one_at_a_time, whole, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.fixture(scope="module")
def gradient_problem():
    X, y = gp_problem(1000, seed=3)
    return X, y, np.array([0.7, 1.0, 1.5]), 0.2


def test_gradient_matches_finite_differences_of_the_dense_likelihoods(gradient_problem):
    X, y, ls, lam = gradient_problem
    t = 200
    est, grad = gaussian_stochastic_lml(X, y, ls, lam, rank=150, n_probes=t, seed=4, tol=1e-10)
    assert est.converged.all()
    theta = np.log(np.append(ls, lam))
    fd = central_differences(lambda th: dense_likelihoods(X, y, np.exp(th[:-1]),
                                                          np.exp(th[-1])), theta)
    fd_profiled, fd_plain, fd_logdet, fd_quad = fd
    # The quads are deterministic: d quad = -alpha^T dA alpha to the CG tolerance (1e-10, times
    # the condition number), against the definition with the dense alpha, and to the FD error.
    K, D = dense_gaussian(X, ls), squared_differences(X, ls)
    alpha = sla.solve(K + lam * np.eye(len(y)), y, assume_a="pos")
    dense_dquad = [-alpha @ (K * Dj) @ alpha for Dj in D] + [-lam * alpha @ alpha]
    np.testing.assert_allclose(grad.quad[0], dense_dquad, rtol=1e-8)
    np.testing.assert_allclose(grad.quad[0], fd_quad, rtol=1e-6, atol=1e-6 * np.abs(fd_quad).max())
    # The trace term is a mean of t = 200 independent probe samples: by the central limit
    # theorem its error is ~ N(0, stderr^2), and 4 standard errors are exceeded with
    # probability 6e-5 per coordinate (the seed is fixed, so the test is deterministic).  The
    # finite differences add ~1e-6 relative.  The stderrs must be small for this to say much.
    for est_g, se, ref in [(grad.logdet, grad.logdet_stderr, fd_logdet),
                           (grad.profiled_lml, grad.profiled_lml_stderr, fd_profiled),
                           (grad.lml, grad.lml_stderr, fd_plain)]:
        assert np.all(np.abs(est_g - ref) < 4 * se + 1e-6 * np.abs(ref))
    assert np.all(grad.logdet_stderr < 0.03 * np.abs(fd_logdet))
    assert np.all(grad.profiled_lml_stderr < 0.05 * np.abs(fd_profiled).max())


def test_isotropic_gradient_is_the_sum_of_the_ard_terms(gradient_problem):
    X, y, _, lam = gradient_problem
    sigma = 1.1
    est, iso = gaussian_stochastic_lml(X, y, sigma, lam, rank=150, n_probes=50, seed=5,
                                       tol=1e-10)
    ard = stochastic_lml_gradient(est, X, np.full(3, sigma), lam)
    assert iso.profiled_lml.shape == (2,) and ard.profiled_lml.shape == (4,)
    np.testing.assert_allclose(iso.profiled_lml, [ard.profiled_lml[:3].sum(),
                                                  ard.profiled_lml[3]], rtol=1e-12)
    theta = np.log([sigma, lam])
    fd_profiled, _, _, fd_quad = central_differences(
        lambda th: dense_likelihoods(X, y, np.exp(th[0]), np.exp(th[1])), theta)
    np.testing.assert_allclose(iso.quad[0], fd_quad, rtol=1e-6, atol=1e-6 * np.abs(fd_quad).max())
    assert np.all(np.abs(iso.profiled_lml - fd_profiled)
                  < 4 * iso.profiled_lml_stderr + 1e-6 * np.abs(fd_profiled))


# ---------------------------------------------------------------- reproducibility, warm start


@pytest.mark.parametrize("stored", [False, True])
def test_same_seed_and_any_thread_count_give_the_same_bits(stored):
    X, y = gp_problem(400, seed=6)
    Y = np.column_stack([y, np.cos(X[:, 2])])
    kw = dict(rank=40, n_probes=8, tol=1e-8, stored=stored)
    runs = [gaussian_stochastic_lml(X, Y, [0.8, 1.0, 1.2], 0.05, seed=9, n_threads=nt, **kw)
            for nt in (1, 2, 1)]
    (e0, g0) = runs[0]
    for e, g in runs[1:]:
        assert e.logdet == e0.logdet and e.profiled_lml == e0.profiled_lml
        assert np.array_equal(e.alpha, e0.alpha)
        assert np.array_equal(e.probe_solutions, e0.probe_solutions)
        assert np.array_equal(g.profiled_lml, g0.profiled_lml)
        assert np.array_equal(g.lml_stderr, g0.lml_stderr)
    other, _ = gaussian_stochastic_lml(X, Y, [0.8, 1.0, 1.2], 0.05, seed=10, gradient=False, **kw)
    assert other.logdet != e0.logdet


def test_stochastic_lml_warm_start():
    X, y = gp_problem(400, seed=8)
    ls, lam = 1.0, 0.05
    Xs = np.ascontiguousarray(X / ls)
    F = nystrom_factor(Xs, 30, method="block_rpcholesky", kernel="gaussian", sigma=1.0, seed=0,
                       n_jobs=1, max_memory=None)
    A, M = KernelSystem(0, 1.0, Xs, lam, stored=True), NystromPreconditioner(F, lam)
    cold = stochastic_lml(A, y, M, n_probes=5, rng=3, tol=1e-10)
    # A start near the solution (as from neighbouring hyperparameters in a search).
    near = cold.alpha * (1 + 1e-4 * np.random.default_rng(0).standard_normal(cold.alpha.shape))
    warm = stochastic_lml(A, y, M, n_probes=5, rng=3, tol=1e-10, x0=near)
    assert warm.n_iter[0] < cold.n_iter[0]
    np.testing.assert_allclose(warm.alpha, cold.alpha, rtol=1e-7,
                               atol=1e-7 * np.abs(cold.alpha).max())
    # The probe columns start at zero either way: the same recursion, to rounding (the operator
    # sees blocks of other widths once the target column stops at another iteration, and BLAS
    # may round a column differently in a block of another width).
    assert np.array_equal(warm.n_iter[1:], cold.n_iter[1:])
    assert warm.logdet == pytest.approx(cold.logdet, rel=1e-12)

"""The GP log marginal likelihood of exact kernel ridge, and its gradient, from one block PCG solve.

With A = K + lam I and a Nystrom preconditioner M = F F^T + lam I
(:class:`~hkern.solvers.NystromPreconditioner`), one :func:`~hkern.solvers.block_pcg` call solves
A [alpha, u_1 .. u_t] = [Y, z_1 .. z_t] for the targets Y and t probes z_i ~ N(0, M).  From it:

* quad_j = y_j^T alpha_j, to the solver's tolerance;
* log det A = log det M + tr log(P), P = M^{-1/2} A M^{-1/2}, where log det M is exact (the
  Cholesky factor of the preconditioner) and tr log(P) is estimated by stochastic Lanczos
  quadrature: w_i = M^{-1/2} z_i ~ N(0, I), so w_i^T log(P) w_i is an unbiased sample of
  tr log(P), and CG on z_i is Lanczos on P from w_i / ||w_i||, so that
  w_i^T log(P) w_i ~ (z_i^T M^{-1} z_i) e_1^T log(T_i) e_1 with the tridiagonal T_i rebuilt from
  the column's CG coefficients (:func:`~hkern.solvers.cg.lanczos_tridiagonal`).  A good
  preconditioner makes P close to I and log(P) small, so the samples vary little;
* d logdet / d theta = tr(A^{-1} dA/dtheta), estimated by Hutchinson with the same probes:
  E[(M^{-1} z)^T dA A^{-1} z] = tr(dA A^{-1} E[z z^T] M^{-1}) = tr(A^{-1} dA), as E[z z^T] = M;
* d quad_j / d theta = -alpha_j^T dA alpha_j, to the solver's tolerance.

For the Gaussian kernel on x = X / ls (unit bandwidth), dK/dlog ls_j = K o D_j with
D_j[a, b] = (x_aj - x_bj)^2, and for vectors u, v

    u^T (K o D_j) v = (x_j^2 o u)^T K v + u^T K (x_j^2 o v) - 2 (x_j o u)^T K (x_j o v),

so the products K [v, x_1 o v, .., x_d o v, x_1^2 o v, .., x_d^2 o v] of the fused kernel engine
(one pass over K for all the 2d + 1 columns of every vector) give every lengthscale derivative
of every quadratic form.  dA/dlog lam = lam I.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh_tridiagonal

from .._gp import Evidence, column_quads
from .._validation import warn_user
from ..kernels._api import _kernel_matvec_trusted
from ..oasis.api import nystrom_factor
from .cg import ConvergenceWarning, block_pcg, lanczos_tridiagonal
from .operators import KernelSystem
from .preconditioners import NystromPreconditioner

__all__ = ["StochasticEvidence", "StochasticGradient", "gaussian_stochastic_lml",
           "lengthscale_quads", "stochastic_lml", "stochastic_lml_gradient"]

_GAUSSIAN = 0
# Bytes of one chunk of the derivative pass (the block of 2d + 1 columns per vector and its
# product with K): 128 MiB by default.
BLOCK_BYTES = 1 << 27


@dataclass(frozen=True)
class StochasticEvidence:
    """What :func:`stochastic_lml` returns.

    Attributes
    ----------
    profiled_lml : float
        :meth:`hkern._gp.Evidence.profiled_lml` at the estimated log-determinant.
    lml : float
        log N(Y | 0, A) summed over the columns, at the estimated log-determinant.
    logdet : float
        The estimate of log det A.
    logdet_stderr : float
        Its standard error: the sample standard deviation of the per-probe estimates over
        sqrt(t) (nan for one probe).  ``lml`` and ``profiled_lml`` have k/2 times it
        (:attr:`lml_stderr`); the quads are exact to the solver's tolerance.
    logdet_samples : ndarray (t,)
        The per-probe estimates of log det A (log det M + the probe's quadrature).
    quad : ndarray (k,)
        y_j^T A^{-1} y_j.
    alpha : ndarray (n, k)
        A^{-1} Y.
    probe_solutions : ndarray (n, t)
        u_i = A^{-1} z_i.
    preconditioned_probes : ndarray (n, t)
        M^{-1} z_i (with ``probe_solutions``, what the Hutchinson gradient needs).
    n_iter : ndarray (k + t,) of int
        CG iterations of the target columns, then of the probe columns.
    converged : ndarray (k + t,) of bool
    """

    profiled_lml: float
    lml: float
    logdet: float
    logdet_stderr: float
    logdet_samples: np.ndarray
    quad: np.ndarray
    alpha: np.ndarray
    probe_solutions: np.ndarray
    preconditioned_probes: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray

    @property
    def lml_stderr(self):
        """The standard error of ``lml`` and of ``profiled_lml``: k/2 ``logdet_stderr``."""
        return 0.5 * len(self.quad) * self.logdet_stderr

    @property
    def evidence(self):
        """An :class:`hkern._gp.Evidence` with the estimated log-determinant."""
        return Evidence(self.quad, self.logdet, self.alpha.shape[0])


@dataclass(frozen=True)
class StochasticGradient:
    """What :func:`stochastic_lml_gradient` returns: derivatives in theta = [log lengthscales
    (d of them, or one isotropic), log lam].

    Attributes
    ----------
    profiled_lml, lml : ndarray (p,)
        The gradients of ``StochasticEvidence.profiled_lml`` and ``.lml``.
    profiled_lml_stderr, lml_stderr : ndarray (p,)
        Their standard errors (k/2 ``logdet_stderr``: only the trace term is random).
    logdet : ndarray (p,)
        The Hutchinson estimate of d log det A / d theta = tr(A^{-1} dA/dtheta).
    logdet_stderr : ndarray (p,)
        Its standard error (the sample standard deviation over the probes / sqrt(t)).
    quad : ndarray (k, p)
        d quad_j / d theta = -alpha_j^T dA/dtheta alpha_j (exact to the solver's tolerance).
    """

    profiled_lml: np.ndarray
    lml: np.ndarray
    profiled_lml_stderr: np.ndarray
    lml_stderr: np.ndarray
    logdet: np.ndarray
    logdet_stderr: np.ndarray
    quad: np.ndarray


def _mean_and_stderr(samples, axis=0):
    t = samples.shape[axis]
    mean = samples.mean(axis=axis)
    if t < 2:
        return mean, np.full_like(mean, np.nan)
    return mean, samples.std(axis=axis, ddof=1) / math.sqrt(t)


def _log_quadrature(steps, betas):
    """e_1^T log(T) e_1 for the Lanczos tridiagonal T of one CG column: sum_k tau_k^2 log theta_k
    over T's eigenpairs (theta_k, first eigenvector components tau_k), the Gauss quadrature."""
    theta, S = eigh_tridiagonal(*lanczos_tridiagonal(steps, betas))
    if theta[0] <= 0.0:
        raise np.linalg.LinAlgError(
            f"a Lanczos matrix has a non-positive eigenvalue {theta[0]:.3g}: the system or the "
            "preconditioner is not positive definite to working precision (raise lam)")
    return float(np.sum(S[0] ** 2 * np.log(theta)))


def stochastic_lml(apply_a, Y, preconditioner, *, n_probes=30, rng=None, tol=1e-8, max_iter=1000,
                   x0=None):
    """Estimate the GP log marginal likelihood of targets Y under A by block PCG and stochastic
    Lanczos quadrature (module docstring).

    Parameters
    ----------
    apply_a : callable
        ``apply_a(V)`` -> A V, A = K + lam I symmetric positive definite (e.g. a
        :class:`~hkern.solvers.KernelSystem`).
    Y : ndarray (n,) or (n, k)
        Targets; the columns are independent GPs sharing A.
    preconditioner : NystromPreconditioner
        M ~ A: applies M^{-1}, and gives log det M and draws from N(0, M).
    n_probes : int
        t, the number of probes (>= 1; >= 2 for a standard error).  The error of the logdet
        falls as 1 / sqrt(t).
    rng : numpy.random.Generator, int or None
        Source of the probes.
    tol : float
        Relative residual at which each CG column stops.  The quadrature converges faster than
        the solve (m CG steps are exact for polynomials of degree 2m - 1): at n = 1500 (logdet
        ~ -4000, standard error ~ 4 with 30 probes) its bias was 0.07 at tol = 1e-2 and 5e-4 at
        1e-3, so the tolerance is set by alpha and by the gradient, whose probe solutions were
        off by about half a standard error at 1e-2 and by 4% of one at 1e-3.
    max_iter : int
        Most CG iterations.
    x0 : ndarray (n, k), optional
        Starting guess for alpha (e.g. the previous one in a hyperparameter search).  The probe
        columns always start at zero: their Lanczos recurrence must start at z_i.

    Returns
    -------
    StochasticEvidence

    Warns
    -----
    ConvergenceWarning
        If a column stopped at ``max_iter``: its quad, or its probe's quadrature (a Gauss
        quadrature with fewer nodes), is then less accurate than ``tol`` says.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> from hkern.oasis.api import nystrom_factor
    >>> from hkern.solvers import KernelSystem, NystromPreconditioner
    >>> from hkern.solvers.slq import stochastic_lml
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 2))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(200)
    >>> A = KernelSystem(0, 1.0, X, 0.01, stored=True)          # 0: the Gaussian kernel
    >>> F = nystrom_factor(X, 40, method="block_rpcholesky", kernel="gaussian", sigma=1.0,
    ...                    seed=0, n_jobs=1, max_memory=None)
    >>> est = stochastic_lml(A, y, NystromPreconditioner(F, 0.01), n_probes=10, rng=1)
    >>> dense = hkern.kernel_matrix(X) + 0.01 * np.eye(200)
    >>> bool(abs(est.logdet - np.linalg.slogdet(dense)[1]) < 4 * est.logdet_stderr)
    True
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    Y = np.asarray(Y, dtype=np.float64)
    n = Y.shape[0]
    Y = Y.reshape(n, -1)
    k, t = Y.shape[1], int(n_probes)
    if t < 1:
        raise ValueError(f"n_probes must be at least 1, got {n_probes}")
    Z = preconditioner.sample(rng, t)
    start = None
    if x0 is not None:
        start = np.hstack([np.asarray(x0, dtype=np.float64).reshape(n, k), np.zeros((n, t))])
    # One solve for targets and probes: every operator pass serves all of them.
    res = block_pcg(apply_a, np.hstack([Y, Z]), apply_m=preconditioner, tol=tol,
                    max_iter=max_iter, x0=start, record_lanczos=True)
    if not res.converged.all():
        warn_user(f"{int(np.sum(~res.converged))} of {k + t} CG columns did not meet "
                  f"tol={tol:g} (true relative residual up to "
                  f"{res.true_residual.max():.3g}) within max_iter={max_iter}",
                  ConvergenceWarning)
    W = preconditioner(Z)
    # z^T M^{-1} z = ||M^{-1/2} z||^2 scales the Lanczos quadrature from the unit vector e_1.
    norms2 = np.einsum("ij,ij->j", Z, W)
    log_p = np.array([norms2[i] * _log_quadrature(res.steps[k + i], res.betas[k + i])
                      for i in range(t)])
    samples = preconditioner.logdet() + log_p
    logdet, stderr = _mean_and_stderr(samples)
    alpha = res.X[:, :k].copy()
    quad = column_quads(Y, alpha)
    evidence = Evidence(quad, float(logdet), n)
    return StochasticEvidence(
        profiled_lml=evidence.profiled_lml(), lml=evidence.lml(), logdet=float(logdet),
        logdet_stderr=float(stderr), logdet_samples=samples, quad=quad, alpha=alpha,
        probe_solutions=res.X[:, k:].copy(), preconditioned_probes=W, n_iter=res.n_iter,
        converged=res.converged)


def _scaled_centred(X, lengthscales):
    """X / ls, centred: the kernel depends on differences only, and the expansion of
    (x_a - x_b)^2 into x_a^2 + x_b^2 - 2 x_a x_b cancels less near the origin."""
    Xs = np.asarray(X, dtype=np.float64) / np.asarray(lengthscales, dtype=np.float64)
    return np.ascontiguousarray(Xs - Xs.mean(axis=0))


def lengthscale_quads(Xs, U, V, *, n_threads=1, block_bytes=BLOCK_BYTES):
    """Q[i, j] = U[:, i]^T (K o D_j) V[:, i], the derivatives in log ls_j of the quadratic forms
    of the Gaussian kernel matrix K of Xs (unit bandwidth), D_j[a, b] = (Xs_aj - Xs_bj)^2.

    One pass of the fused kernel engine over K per chunk of vectors, on the 2d + 1 columns
    [v, Xs_j v, Xs_j^2 v] of each vector v of V (module docstring); the chunks hold at most
    ``block_bytes`` (the block and its product), at least one vector.

    Parameters
    ----------
    Xs : ndarray (n, d)
        The inputs divided by their lengthscales, best centred (:func:`stochastic_lml_gradient`
        centres them).
    U, V : ndarray (n, m)
    n_threads : int
        Threads of the kernel engine (results identical for any value).
    block_bytes : int

    Returns
    -------
    ndarray (m, d)
    """
    Xs = np.ascontiguousarray(Xs, dtype=np.float64)
    n, d = Xs.shape
    m = V.shape[1]
    X2 = Xs * Xs
    # The per-row weights of the block's column groups: 1, x_j, x_j^2.
    weights = np.concatenate([np.ones((n, 1)), Xs, X2], axis=1)         # (n, 2d + 1)
    chunk = max(1, int(block_bytes) // (16 * n * (2 * d + 1)))
    out = np.empty((m, d))
    for s in range(0, m, chunk):
        Uc, Vc = U[:, s:s + chunk], V[:, s:s + chunk]
        c = Vc.shape[1]
        block = weights[:, :, None] * Vc[:, None, :]                      # (n, 2d + 1, c)
        KB = _kernel_matvec_trusted(_GAUSSIAN, 1.0, Xs, Xs, block.reshape(n, -1),
                                    n_threads).reshape(n, 2 * d + 1, c)
        KV, KXV, KX2V = KB[:, 0, :], KB[:, 1:d + 1, :], KB[:, d + 1:, :]
        # einsum without optimize sums in a fixed order: no dependence on BLAS threads.
        out[s:s + c] = (np.einsum("aj,ac->cj", X2, Uc * KV)
                        + np.einsum("ac,ajc->cj", Uc, KX2V)
                        - 2.0 * np.einsum("aj,ac,ajc->cj", Xs, Uc, KXV))
    return out


def stochastic_lml_gradient(estimate, X, lengthscales, lam, *, n_threads=1,
                            block_bytes=BLOCK_BYTES):
    """Gradient of :func:`stochastic_lml`'s likelihoods in theta = [log ls, log lam] for the
    Gaussian kernel: A = K(X / ls) + lam I with unit bandwidth, the A ``estimate`` solved with.

    Parameters
    ----------
    estimate : StochasticEvidence
    X : ndarray (n, d)
        The unscaled inputs.
    lengthscales : float or ndarray (d,)
        One per feature (ARD: d derivatives), or a float (isotropic: one derivative, in
        log sigma, the sum of the per-feature ones).
    lam : float
    n_threads : int
        Threads of the kernel engine (results identical for any value).
    block_bytes : int
        Most bytes of one chunk of the derivative pass (:func:`lengthscale_quads`).

    Returns
    -------
    StochasticGradient

    Notes
    -----
    d profiled_lml = sum_j n / (2 quad_j) alpha_j^T dA alpha_j - k/2 tr(A^{-1} dA) and
    d lml = sum_j alpha_j^T dA alpha_j / 2 - k/2 tr(A^{-1} dA).  Cost: one pass of the kernel
    engine over K with (k + t)(2d + 1) columns, and O(n (k + t) d) for the contractions.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.solvers.slq import gaussian_stochastic_lml
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 2))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(200)
    >>> est, grad = gaussian_stochastic_lml(X, y, [1.0, 2.0], 0.01, rank=40, seed=0)
    >>> grad.profiled_lml.shape               # d log lengthscales, then log lam
    (3,)
    >>> bool(grad.profiled_lml[1] > 0)        # y does not depend on x_2: lengthen its scale
    True
    """
    ls = np.asarray(lengthscales, dtype=np.float64)
    Xs = _scaled_centred(X, ls)
    alpha, quad = estimate.alpha, estimate.quad
    n, k = alpha.shape
    # Right vectors: alpha (for the quads) and u_i = A^{-1} z_i; left: alpha and M^{-1} z_i.
    U = np.hstack([alpha, estimate.preconditioned_probes])
    V = np.hstack([alpha, estimate.probe_solutions])
    forms = lengthscale_quads(Xs, U, V, n_threads=n_threads, block_bytes=block_bytes)
    if ls.ndim == 0:
        forms = forms.sum(axis=1, keepdims=True)
    forms = np.hstack([forms, lam * np.einsum("ij,ij->j", U, V)[:, None]])     # dA = lam I
    dquad = -forms[:k]
    trace, trace_stderr = _mean_and_stderr(forms[k:])
    profiled = np.sum(-0.5 * n / quad[:, None] * dquad, axis=0) - 0.5 * k * trace
    plain = np.sum(-0.5 * dquad, axis=0) - 0.5 * k * trace
    stderr = 0.5 * k * trace_stderr
    return StochasticGradient(profiled_lml=profiled, lml=plain, profiled_lml_stderr=stderr,
                              lml_stderr=stderr.copy(), logdet=trace, logdet_stderr=trace_stderr,
                              quad=dquad)


def gaussian_stochastic_lml(X, Y, lengthscales, lam, *, rank=100, n_probes=30, seed=None,
                            tol=1e-8, max_iter=1000, stored=True, gradient=True, x0=None,
                            n_threads=1, block_bytes=BLOCK_BYTES):
    """:func:`stochastic_lml` (and :func:`stochastic_lml_gradient`) for the Gaussian kernel of
    X / ls: the operator, a rank-``rank`` block RPCholesky Nystrom preconditioner and the probes
    made here.

    Parameters
    ----------
    X : ndarray (n, d)
    Y : ndarray (n,) or (n, k)
    lengthscales : float or ndarray (d,)
    lam : float
    rank : int
        Columns of the Nystrom factor (at most n).
    n_probes, tol, max_iter, x0
        As in :func:`stochastic_lml`.
    seed : int, numpy.random.Generator or None
        One generator draws the Nystrom columns, then the probes.
    stored : bool
        Keep K (8 n^2 bytes) instead of recomputing it at every CG product
        (:class:`~hkern.solvers.KernelSystem`).
    gradient : bool
        Also return the gradient.
    n_threads : int
        Threads of every step (results identical for any value).
    block_bytes : int
        As in :func:`stochastic_lml_gradient`.

    Returns
    -------
    estimate : StochasticEvidence
    gradient : StochasticGradient or None

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.solvers.slq import gaussian_stochastic_lml
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 2))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(200)
    >>> est, _ = gaussian_stochastic_lml(X, y, 1.0, 0.01, rank=40, seed=0, gradient=False)
    >>> import hkern
    >>> from hkern._gp import Evidence
    >>> A = hkern.kernel_matrix(X) + 0.01 * np.eye(200)
    >>> exact = Evidence(np.array([y @ np.linalg.solve(A, y)]), np.linalg.slogdet(A)[1], 200)
    >>> bool(abs(est.profiled_lml - exact.profiled_lml()) < 4 * est.lml_stderr)
    True
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    ls = np.asarray(lengthscales, dtype=np.float64)
    # Centred for the same reason as in the gradient; the kernel depends on differences only.
    Xs = _scaled_centred(X, ls)
    F = nystrom_factor(Xs, min(int(rank), Xs.shape[0]), method="block_rpcholesky",
                       kernel="gaussian", sigma=1.0, seed=rng, n_jobs=n_threads, max_memory=None)
    system = KernelSystem(_GAUSSIAN, 1.0, Xs, lam, stored=stored, n_threads=n_threads)
    preconditioner = NystromPreconditioner(F, lam, n_threads)
    estimate = stochastic_lml(system, Y, preconditioner, n_probes=n_probes, rng=rng, tol=tol,
                              max_iter=max_iter, x0=x0)
    grad = None
    if gradient:
        grad = stochastic_lml_gradient(estimate, X, ls, lam, n_threads=n_threads,
                                       block_bytes=block_bytes)
    return estimate, grad

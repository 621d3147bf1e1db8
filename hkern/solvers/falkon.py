"""FALKON's preconditioned normal equations of Nystrom kernel ridge regression.

With m centres Z among the n training points X, C = K(X, Z) and W = K(Z, Z), Nystrom KRR with
ridge lam (hkern's convention: the lam of K + lam I) has the coefficients alpha of
f(x) = k(x, Z) alpha solving

    H alpha = C^T y,    H = C^T C + lam W.

Rudi, Carratino and Rosasco (FALKON, NeurIPS 2017) precondition H with B = T^{-1} A^{-1}, where
T^T T = W (upper T) and A^T A = (n / m) T T^T + lam I: for uniformly drawn centres
C^T C ~ (n / m) W^2, so B^T H B is close to the identity and conjugate gradients on

    B^T H B beta = B^T C^T y,    alpha = B beta,

converge in a few tens of iterations for any conditioning of H.  (FALKON writes the problem
divided by n, with lam / n for our lam: the same system.)  Since T^{-T} (lam W) T^{-1} = lam I,
one product is B^T H B u = A^{-T} (T^{-T} C^T C T^{-1} A^{-1} u + lam A^{-1} u): four triangular
solves and one pass of the kernel engine over C (K^T (K v), each block of C computed once,
never stored: :func:`hkern.kernels._api._kernel_normal_times_trusted`).

T and A share one m x m array (:func:`hkern._linalg.cholesky_pair`): T in the strict upper
triangle with its diagonal kept aside, A^T in the lower triangle.  When W is numerically
singular (close centres), W + jitter I is factorised instead, the jitter growing from
m * eps (FALKON's choice) by tenfold steps; the system solved is then H with W + jitter I.

:func:`solve_falkon` runs CG on this system with an iterative fit's progress, warning and
record (:mod:`hkern.solvers.trace`).

In mixed precision (``precision="mixed"``) the factor pair is float32 (half the memory; sgemm's
rate), the jitter starts at sqrt(m) eps32 max W_ii (float32's rounding of W moves its
eigenvalues by about that much; FALKON's m eps in float32 would be 1e-3 at m = 8192), the
passes over C are the float32 engine's (kernel values in float32 by a fused loop, sums in
double), and the triangular solves read the float32 factors in place in double arithmetic
(:func:`hkern._linalg.solve_triangular_mixed`), so that B is one fixed operator.  CG's vectors
and the right-hand side are float64, and the recursion's residual is replaced by the float64
operator's every decade (block_pcg's ``replace_below``): the float32 passes' rounding,
amplified by B in W's small directions, otherwise opened a gap of 9e-3 between the two
residuals on kin40k.  The system solved is then the float32 factors' (regulariser
lam T^T T); :meth:`FalkonSystem.float64_model_residual` measures how far its answer is from the
float64 model's.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .. import _linalg
from .._memory import resolve_max_memory
from .._progress import listening, report
from .._targets import exact_sums
from .._validation import warn_user
from ..kernels._api import (
    _kernel_matrix_trusted,
    _kernel_matvec_trusted,
    _kernel_normal_times_trusted,
    _kernel_normal_times_widened,
    _normal_times_bytes,
    _widened_rows_bytes,
)
from .cg import ConvergenceWarning, unit_columns
from .exact_pcg import MIXED_MIN_TOL
from .trace import MixedPrecisionStall, joined_trace, traced_pcg, validation_error

__all__ = ["FalkonStart", "FalkonSystem", "falkon_bytes", "landmarks_name", "solve_falkon"]

# Tenfold jitter steps tried after the first before W is declared unfactorisable (FALKON's
# factor here, and the direct Nystrom fit's, hkern.nystrom.api.landmark_factor).
JITTER_STEPS = 10

# Mixed precision: the recursive residual is replaced by the float64 one every time it has
# fallen tenfold (block_pcg's reliable updates).
MIXED_REPLACE_BELOW = 0.1


def falkon_bytes(n, m, d, k, n_threads, precision="double", x_dtype=np.float64):
    """Peak bytes of :class:`FalkonSystem` and of CG on it beyond the inputs: the m x m factor
    pair (float32 in mixed precision, with float32 copies of X and Z), the kernel engine's
    blocks and partial sums, and about ten m x k blocks.  ``x_dtype`` float32 (X kept in
    float32): no float32 copy of X, and the float64 passes' widened rows instead."""
    # "auto" frees a float32 pair before it builds a float64 one: the float64 estimate.
    single = np.dtype(x_dtype) == np.float32
    factor = (4 * m * m + 4 * (m + (0 if single else n)) * d if precision == "mixed"
              else 8 * m * m)
    widened = _widened_rows_bytes(n, m, d, n_threads) if single else 0
    return (factor + widened + _normal_times_bytes(n, m, d, k, n_threads) + 80 * m * k
            + 8 * n * k)


class Float32TooCoarse(np.linalg.LinAlgError):
    """The float32 factors would change FALKON's model or cannot be formed (precision="auto"
    then runs double)."""


# precision="auto" runs FALKON mixed only when the 0.01 quantile of W's Cholesky pivots (with
# the float32 jitter) is at least this many jitters: below it, at least 1% of W's directions
# sit at float32's jitter and the float32 factor's regulariser lam (W + jitter I + rounding)
# is another model there.  Measured on the five shared sets (20 000 rows, 2048 centres, sigma
# a quarter, half and all of the median distance, lam 1e-1 .. 1e-4;
# results/mixed_precision/falkon_sweep_<set>.json, doc/results/precision.md) the quantile
# falls in two groups: 1.0 to 1.25 jitters, where mixed changed the test RMSE by up to 15%
# (kin40k) and could need 3 to 10 times double's iterations (pol, keggundirected), and 3.9
# (kin40k, 8192 centres, sigma 2) to 4e4, where every answer came within MIXED_ACCEPT tol of
# the float64 model (at most 5.5 tol) and the test RMSE moved by at most 0.25%.  (At 100
# jitters, the rule before, kin40k's 8192-centre fit ran double: mixed takes 0.54 of its time.)
MIXED_MIN_PIVOT = 2.0
# ... and only from this many centres: the quantile then rests on at least ten pivots, and
# below it a fit takes a fraction of a second in double (kin40k, 20 000 rows, 512 centres:
# 0.097 s, mixed 0.064 s), where float32's other risks (a stalled recursion, a path that
# differs from double's by rounding) buy nothing worth having.
MIXED_MIN_CENTRES = 1024
# auto keeps the mixed answer when its relative residual in the float64 model is at most this
# many tol (solver_trace_.float64_model_residual), else goes on in double from it.  The answer
# meets tol in the model it solved, whose regulariser carries float32's jitter; this bounds how
# far that model's answer may be from the float64 model's.  In the sweep, answers at up to 5.5
# tol moved the test RMSE by at most 0.14% (kin40k with 8192 centres: 3.4 tol, RMSE 0.1010
# against double's 0.1008); at the points with pivots below 2 jitters mixed answers came
# 0.9 to 105 tol from it, with RMSE changes up to 15% (keggundirected's within 2 tol and
# 0.14%, but with up to ten times double's iterations: the screen is for time there).
# Reaching tol in the float64 model from the mixed answer instead (CG on that model,
# preconditioned by the float32 factors) took 10 more iterations on kin40k: 16.6 s in all,
# 0.75 of double's 22.2 s, against 11.5 s for the mixed answer.
MIXED_ACCEPT = 6.0


def _fine_for_float32(t_diag, jitter):
    """The pivot screen of precision="auto" (MIXED_MIN_PIVOT), on T's diagonal."""
    pivots = np.asarray(t_diag, dtype=np.float64) ** 2
    return bool(pivots.size == 0 or np.quantile(pivots, 0.01) >= MIXED_MIN_PIVOT * jitter)


def _first_jitter(m, w_max, mixed):
    """The first jitter tried on W's diagonal: FALKON's m eps in double precision; in single
    precision sqrt(m) eps32 max W_ii, the size by which float32's rounding of W's entries
    moves its eigenvalues (m eps32, FALKON's rule in float32, is 1e-3 at m = 8192: above
    lam m / n on kin40k, where it changed the model)."""
    if mixed:
        return float(np.sqrt(m)) * float(np.finfo(np.float32).eps) * w_max
    return m * float(np.finfo(np.float64).eps)


def _in_float32(X):
    """X for the float32 passes: a float32 X as it is (a fit's float32 input, kept), else
    rounded to float32 (a copy, 4 n d bytes)."""
    return X if X.dtype == np.float32 else X.astype(np.float32)


class FalkonSystem:
    """beta -> B^T H B beta, its right-hand side and alpha = B beta (module docstring).

    Parameters
    ----------
    kind : int
        The kernel engine's code.
    bandwidth : float
    X : ndarray (n, d)
        Training points, C-contiguous float64 (already scaled), or float32 (a fit's float32
        input with a scalar sigma, kept as it is: the float64 passes widen it block by block,
        :func:`hkern.kernels._api._kernel_normal_times_widened`, to the bits of its float64
        copy, and the float32 ones read it in place).
    Z : ndarray (m, d)
        Centres, C-contiguous float64.
    lam : float
        The ridge, > 0.
    n_threads : int
        Threads (results identical for any value).
    n_total : int or None
        The number of training points in all (X is one MPI rank's shard of them); default
        ``len(X)``.
    normal_times : callable or None
        ``normal_times(U, V)`` = C^T (C U + V) (U or V None: zero) over every rank's rows, V
        this rank's rows (:class:`hkern.kernels.sharded.ShardedNormalTimes`); None: X is all
        the data and the serial kernel engine computes it.
    precision : {"double", "mixed"}
        "mixed": the factor pair in float32 (first jitter sqrt(m) eps32 max W_ii), the passes
        over C in float32, the solves in double arithmetic (module docstring); serial only.
        :meth:`exact` is then the operator with C's products in float64.
    screen : bool
        precision="auto"'s test: raise :class:`Float32TooCoarse` instead of finishing (or
        of growing the jitter) when the 1% quantile of W's pivots is below MIXED_MIN_PIVOT
        jitters.

    Raises
    ------
    ValueError
        If W + jitter I cannot be factorised for any jitter up to 1e-6 or so (duplicated
        centres beyond repair: fewer centres, or an adaptive selection, fix that).

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.solvers import FalkonSystem, block_pcg
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); Z = X[:40].copy(); y = np.sin(X[:, :1])
    >>> system = FalkonSystem(0, 1.0, X, Z, 1e-2)      # Gaussian kernel, sigma = 1
    >>> alpha = system.coef(block_pcg(system, system.rhs(y), tol=1e-10).X)
    >>> C = np.exp(-((X[:, None] - Z[None]) ** 2).sum(-1) / 2)
    >>> H = C.T @ C + 1e-2 * (C[:40] + system.jitter * np.eye(40))
    >>> bool(np.allclose(H @ alpha, C.T @ y))
    True
    """

    def __init__(self, kind, bandwidth, X, Z, lam, n_threads=1, *, n_total=None,
                 normal_times=None, precision="double", screen=False):
        self.kind, self.bandwidth, self.X, self.Z = kind, bandwidth, X, Z
        self.lam = float(lam)
        self.n_threads = n_threads
        self.precision = precision
        self.mixed = precision == "mixed"
        if self.mixed:
            self.X32 = _in_float32(X)
            self.Z32 = Z.astype(np.float32)
        self._normal_times = normal_times or self._serial_normal_times
        self.sharded = normal_times is not None
        n, m = (X.shape[0] if n_total is None else n_total), Z.shape[0]
        self.n_total = n
        P = _kernel_matrix_trusted(kind, bandwidth, *((self.Z32,) * 2 if self.mixed else (Z, Z)),
                                   n_threads)
        w_diag = P.diagonal().copy()
        jitter = _first_jitter(m, float(w_diag.max(initial=1.0)), self.mixed)
        for _ in range(JITTER_STEPS + 1):
            P.flat[:: m + 1] = w_diag + jitter
            try:
                t_diag = _linalg.cholesky_pair(
                    P, n / m, self.lam, n_threads,
                    **({"screen": lambda t, j=jitter: _fine_for_float32(t, j)} if screen else {}))
            except np.linalg.LinAlgError:
                if not self.mixed:
                    raise
                raise Float32TooCoarse(
                    f"(n / m) T T^T + lam I is not positive definite in single precision at "
                    f"lam={self.lam:.3g}: use precision='double'") from None
            if t_diag is False or (t_diag is None and screen):
                raise Float32TooCoarse("W has pivots near float32's jitter")
            if t_diag is not None:
                break
            # The upper triangle still holds W: restore the lower one and try a larger jitter.
            _linalg.symmetrize(P, from_lower=False)
            jitter *= 10.0
        else:
            raise ValueError(
                f"the kernel matrix of the {m} centres is singular even with {jitter / 10:.1e} "
                "added to its diagonal (centres nearly duplicated): use fewer centres, "
                "landmarks='rpcholesky', or a smaller sigma")
        self.jitter = jitter
        self._P = P
        self._t_diag = t_diag.astype(np.float64)
        self._b_diag = P.diagonal().astype(np.float64)

    @property
    def rank(self):
        return self.Z.shape[0]

    def on_rows(self, X, normal_times=None):
        """The system of the same centres, ridge and factors for the training points ``X``
        (``normal_times`` as the constructor's, for shards; the factors shared, not copied).
        Its B was built for this system's n, and B^T H B for the new rows is still the exact
        system, preconditioned by A with (n / m) T T^T weighted by the old n: a selection's
        final fit on all rows reuses the chosen hold-out candidate's factors (nine tenths of
        the rows; kin40k, 8192 centres: 6 s of factors saved)."""
        other = object.__new__(FalkonSystem)
        other.__dict__.update(self.__dict__)
        other.__dict__.pop("_last_exact", None)
        other.X = X
        if self.mixed:      # the float32 passes read the new rows too, not the old ones
            other.X32 = _in_float32(X)
        other._normal_times = normal_times or other._serial_normal_times
        other.sharded = normal_times is not None
        return other

    def _solve_t(self, V, trans):
        """T^{-1} V or T^{-T} V: T's diagonal is swapped into the shared array for the solve
        (read from t_diag, in double arithmetic, in mixed precision)."""
        if self.mixed:
            return _linalg.solve_triangular_mixed(self._P, V, self._t_diag, lower=False,
                                                  trans=trans, n_threads=self.n_threads)
        diagonal = self._P.reshape(-1)[:: self._P.shape[0] + 1]
        diagonal[:] = self._t_diag
        try:
            return _linalg.solve_triangular(self._P, V, lower=False, trans=trans,
                                            n_threads=self.n_threads)
        finally:
            diagonal[:] = self._b_diag

    def _solve_a(self, V, trans):
        """A^{-1} V (trans=False) or A^{-T} V, A = (the lower factor)^T."""
        if self.mixed:
            return _linalg.solve_triangular_mixed(self._P, V, self._b_diag, lower=True,
                                                  trans=not trans, n_threads=self.n_threads)
        return _linalg.solve_triangular(self._P, V, lower=True, trans=not trans,
                                        n_threads=self.n_threads)

    def _serial_normal_times(self, U, V, exact=False):
        """C^T (C U + V) by the kernel engine (U or V None: zero), in single precision for a
        mixed system unless ``exact``."""
        if self.mixed and not exact:
            return _kernel_normal_times_trusted(self.kind, self.bandwidth, self.X32, self.Z32,
                                                U, V, self.n_threads)
        if self.X.dtype == np.float32:      # a float32 X kept as it is: widened block by block
            return _kernel_normal_times_widened(self.kind, self.bandwidth, self.X, self.Z, U,
                                                V, self.n_threads)
        return _kernel_normal_times_trusted(self.kind, self.bandwidth, self.X, self.Z, U, V,
                                            self.n_threads)

    def rhs(self, Y):
        """B^T C^T Y for targets Y (n, k) (C^T Y in float64 in either precision)."""
        Y = np.ascontiguousarray(Y)
        CtY = self._serial_normal_times(None, Y, exact=True) \
            if self.mixed and self._normal_times == self._serial_normal_times \
            else self._normal_times(None, Y)
        return self._solve_a(self._solve_t(CtY, trans=True), trans=True)

    def __call__(self, U, exact=False):
        """B^T H B U for U (m, j); ``exact``: C's products in float64 in a mixed system."""
        V = self._solve_a(U, trans=False)
        T = self._solve_t(V, trans=False)
        W = self._serial_normal_times(T, None, exact=True) if exact \
            else self._normal_times(T, None)
        W = self._solve_t(W, trans=True)
        W += self.lam * V
        return self._solve_a(W, trans=True)

    def exact(self, U):
        """B^T H B U with C's products in float64 (a mixed system's true residual).  The last
        product is kept: the check of the answer (float64_model_residual) reuses the one CG
        made at its final iterate."""
        last = getattr(self, "_last_exact", None)
        if last is not None and last[0].shape == U.shape and np.array_equal(last[0], U):
            return last[1].copy()
        out = self(U, exact=True)
        self._last_exact = (np.array(U, copy=True), out.copy())
        return out

    def logdet_factor(self):
        """log det A of the second factor (A^T A = (n / m) T T^T + lam I).

        With it, the Nystrom GP's log det(C W^-1 C^T + lam I) = (n - m) log lam
        + log det(B^T H B) + 2 log det A: by Sylvester's identity det(lam I + C W^-1 C^T) =
        lam^(n-m) det H / det W, det W = det(T)^2 (W + jitter I when jittered), and
        det(B^T H B) = det H / (det T det A)^2."""
        return float(np.sum(np.log(np.abs(self._b_diag))))

    def coef(self, beta):
        """alpha = B beta = T^{-1} A^{-1} beta."""
        return self._solve_t(self._solve_a(beta, trans=False), trans=False)

    def beta_of(self, alpha):
        """beta = B^{-1} alpha = A T alpha, in a double-precision system: the warm start of
        another system's coefficients (mixed precision continued in double)."""
        if self.mixed:
            raise ValueError("beta_of: a double-precision system's method")
        diagonal = self._P.reshape(-1)[:: self._P.shape[0] + 1]
        diagonal[:] = self._t_diag
        try:
            T_alpha = _linalg.triangular_multiply(self._P, alpha, lower=False)
        finally:
            diagonal[:] = self._b_diag
        # A = (the lower factor)^T.
        return _linalg.triangular_multiply(self._P, T_alpha, lower=True, trans=True)

    def float64_model_residual(self, beta, rhs, alpha=None):
        """||rhs - B^T (C^T C + lam W) B beta|| / ||rhs|| (largest over the columns): how far
        a mixed system's answer is from the float64 model's, whose regulariser is lam W itself
        where this system's is lam T^T T = lam (W + jitter I + float32's rounding of W).  One
        float64 pass over C and one over W = K(Z, Z); ``alpha``: B beta, if at hand."""
        alpha = self.coef(beta) if alpha is None else alpha
        W_alpha = _kernel_matvec_trusted(self.kind, self.bandwidth, self.Z, self.Z, alpha,
                                         self.n_threads)
        # B^T lam (W - T^T T) B beta = lam A^{-T} (T^{-T} W alpha - A^{-1} beta).
        difference = self._solve_t(W_alpha, trans=True) - self._solve_a(beta, trans=False)
        R = rhs - self.exact(beta) - self.lam * self._solve_a(difference, trans=True)
        norms = np.linalg.norm(rhs, axis=0)
        return float(np.max(np.linalg.norm(R, axis=0) / np.where(norms > 0, norms, 1.0)))


@dataclass
class FalkonStart:
    """A warm start for FALKON (a selection candidate's state): the preconditioned variable
    beta and the :class:`FalkonSystem` it was solved in (None: not kept), whose B beta are the
    coefficients."""

    beta: np.ndarray
    system: FalkonSystem | None

    @classmethod
    def kept(cls, beta, system, max_memory):
        """The start, with the system only when three factor pairs of its size fit
        ``max_memory`` (this one, the next candidate's, and the solve that reuses it)."""
        keep = 3 * system._P.nbytes <= resolve_max_memory(max_memory)
        return cls(beta, system if keep else None)

    def system_on(self, X, lam, normal_times=None):
        """The kept system's factors for the rows X (:meth:`FalkonSystem.on_rows`) when they
        were built for this ``lam``; else None."""
        if self.system is None or self.system.lam != lam:
            return None
        return self.system.on_rows(X, normal_times)


def solve_falkon(inputs, Z, *, landmarks, tol, max_iter, validation, verbose, n_threads,
                error=None, x0=None, return_beta=False, system=None, precision="double",
                energy=None, **sharded):
    """(alpha, SolverTrace, iterations, quad) for the Nystrom normal equations with centres Z,
    by CG
    on FALKON's preconditioned system (:class:`FalkonSystem`) as fit_nystrom(solver="pcg") runs
    it; the arguments and the memory are checked by the caller.  Each iteration is one pass of
    the kernel engine over C = K(X, Z) (computed in cache, never stored) and four triangular
    solves with the m x m factors: memory O(m^2 + n d + n k) for any n, time O(m^3) for the
    factors and O(n m d) per iteration.

    ``x0``: a starting guess for FALKON's preconditioned variable beta (alpha = B beta), e.g. a
    neighbouring candidate's in a hyperparameter selection; ``return_beta`` appends the final
    beta and the :class:`FalkonSystem` to the returned tuple (the next candidate's warm start).
    ``system``: that system, already built for these inputs and centres (its B the one x0 was
    computed with, its precision kept); None builds it.

    ``quad`` (k,) is y_j^T A^{-1} y_j for the Nystrom GP's target covariance
    A = C W^{-1} C^T + lam I: by Woodbury A^{-1} y = (y - C alpha) / lam, so
    quad_j = (y_j^T y_j - (C^T y_j)^T alpha_j) / lam = (y_j^T y_j - rhs_j^T beta_j) / lam, from
    the right-hand side and the answer at no cost (:func:`target_quad`).  ``energy``: the
    y_j^T y_j of every rank's rows on a shard (None: of inputs.Y).

    ``precision``: "double"; "mixed" (float32 factors and passes over C, float64 vectors,
    reliable updates of the residual from the float64 operator, and a warning when the answer
    is further than tol from the float64 model's, whose regulariser has no float32 jitter);
    "auto": mixed where W's pivots clear float32's jitter (MIXED_MIN_PIVOT), with at least
    MIXED_MIN_CENTRES centres and tol at least MIXED_MIN_TOL, continued in double from the
    mixed answer when that is further than MIXED_ACCEPT tol from the float64 model or
    stalls, else double (a sharded fit runs double).

    On one MPI rank's shard (hkern.nystrom.sharded): ``sharded`` holds FalkonSystem's
    ``n_total`` and ``sum_over_ranks``, and ``error`` the validation error over every rank's
    validation rows (``validation`` is then ignored)."""
    t0 = time.perf_counter()
    built = system is None
    if built:
        system = _system_for(inputs, Z, precision, tol, n_threads, sharded)
    pre_seconds = time.perf_counter() - t0
    if listening(verbose):
        report(f"[fit_nystrom pcg] preconditioner of {Z.shape[0]} centres "
               f"{'in' if built else 'reused,'} {pre_seconds:.1f} s (jitter {system.jitter:.1e}"
               f"{', single precision' if system.mixed else ''})", verbose)
    error = error if sharded or error is not None \
        else validation_error(validation, inputs, Z, n_threads)
    run = dict(landmarks=landmarks, tol=tol, max_iter=max_iter, verbose=verbose, error=error,
               started=t0, pre_seconds=pre_seconds)
    auto = precision == "auto" and system.mixed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            beta, trace, n_iter, rhs = _traced(system, inputs.Y, x0=x0, energy=energy, **run)
        except MixedPrecisionStall as stall:
            if not auto:
                raise
            # float32's rounding held the recursion above tol: double, from where it stalled.
            alpha = system.coef(stall.X)
            del system
            return _in_double(inputs, Z, alpha, None, n_threads, sharded, return_beta, run,
                              "mixed (stalled), then double", energy)
    alpha = system.coef(beta)
    if system.mixed:
        gap = system.float64_model_residual(beta, rhs, alpha)
        trace = dataclasses.replace(trace, float64_model_residual=gap)
        if gap > MIXED_ACCEPT * tol and auto:
            del system      # the float32 factors are freed before the float64 ones are built
            return _in_double(inputs, Z, alpha, (trace, n_iter), n_threads, sharded,
                              return_beta, run, "mixed, then double", energy)
    for w in caught:        # the mixed answer stands: its warnings too
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if system.mixed and not auto and gap > tol and trace.converged:   # explicit "mixed"
        warn_user(
            f"fit_nystrom pcg in single precision: its answer's relative residual in the "
            f"float64 model is {gap:.3g} > tol={tol:g} (the float32 factors regularise with "
            f"lam (W + {system.jitter:.1e} I) and float32's rounding of W); use "
            "precision='double' or 'auto'", ConvergenceWarning)
    quad = target_quad(inputs.Y, rhs, beta, inputs.lam, energy)
    if return_beta:
        return alpha, trace, n_iter, quad, beta, system
    return alpha, trace, n_iter, quad


def target_quad(Y, rhs, beta, lam, energy=None):
    """y_j^T A^{-1} y_j = (y_j^T y_j - rhs_j^T beta_j) / lam (:func:`solve_falkon`), clipped
    at 0 (CG's answer is inexact); ``energy`` the y_j^T y_j, None: of Y, summed exactly (the
    same bits as on shards, :func:`hkern._targets.exact_sums`)."""
    if energy is None:
        energy = exact_sums(Y * Y).sum()
    return np.maximum(energy - np.einsum("ij,ij->j", rhs, beta), 0.0) / lam


def _system_for(inputs, Z, precision, tol, n_threads, sharded):
    """The FalkonSystem a solve in ``precision`` starts with ("auto": mixed where it passes
    the pivot screen, double otherwise)."""
    args = (inputs.kind, inputs.bandwidth, inputs.X, Z, inputs.lam, n_threads)
    if precision == "auto" and not sharded and tol >= MIXED_MIN_TOL \
            and Z.shape[0] >= MIXED_MIN_CENTRES:
        try:
            return FalkonSystem(*args, precision="mixed", screen=True)
        except Float32TooCoarse:
            pass
    return FalkonSystem(*args, precision="mixed" if precision == "mixed" else "double",
                        **sharded)


def _traced(system, Y, *, landmarks, tol, max_iter, verbose, error, started, pre_seconds,
            x0=None, energy=None):
    """CG on ``system`` with an iterative fit's progress and record: (beta, trace, n_iter,
    the right-hand side).

    The system is solved for the targets' columns scaled to unit norm on block_pcg's grid
    (:func:`hkern.solvers.cg.unit_columns`), and the answer scaled back: c * Y then gives the
    right-hand side the same bits.  Its triangular solves with FALKON's factors magnify the
    rounding of c * Y (1e-16) by the conditioning of K(Z, Z): to 5e-8 of the right-hand side
    with 10 centres on a line, and c * y predicted 1% apart after the same 4 iterations.
    The norms are the square roots of ``energy`` (every rank's y_j^T y_j on a shard; None:
    Y's own, summed exactly, so that a shard scales as the serial fit does, to the bit);
    on a shard without it Y is solved for as it is."""
    if system.sharded and energy is None:
        unit = np.ones(Y.shape[1])
    else:
        if energy is None:
            energy = exact_sums(Y * Y).sum()
        unit, Y = unit_columns(Y, tol, norms=np.sqrt(energy), n=system.n_total)
    rhs = system.rhs(Y)
    try:
        beta, trace, n_iter = traced_pcg(
            system, rhs, apply_m=None, tol=tol, max_iter=max_iter, error=error,
            coef=lambda beta: system.coef(beta * unit), label="fit_nystrom pcg",
            verbose=verbose, started=started,
            fix="raise max_iter (or lam: a smaller ridge needs more iterations)",
            preconditioner=landmarks_name(landmarks), rank=system.rank,
            preconditioner_seconds=pre_seconds, stored_kernel=False, jitter=system.jitter,
            x0=None if x0 is None else x0 / unit,
            exact_a=system.exact if system.mixed else None, precision=system.precision,
            replace_below=MIXED_REPLACE_BELOW if system.mixed else None)
    except MixedPrecisionStall as stall:    # its iterate in the targets' units
        raise MixedPrecisionStall(str(stall), stall.X * unit, stall.iterations) from None
    return beta * unit, trace, n_iter, rhs * unit


def _in_double(inputs, Z, alpha, first, n_threads, sharded, return_beta, run, label, energy):
    """precision="auto" after a mixed solve that fell short: double precision, from the mixed
    answer ``alpha``; ``first`` the mixed solve's (trace, iterations), None after a stall."""
    t0 = time.perf_counter()
    system = FalkonSystem(inputs.kind, inputs.bandwidth, inputs.X, Z, inputs.lam, n_threads,
                          **sharded)
    run = dict(run, pre_seconds=time.perf_counter() - t0)
    beta, trace, n_iter, rhs = _traced(system, inputs.Y, x0=system.beta_of(alpha),
                                       energy=energy, **run)
    if first is not None:
        trace, n_iter = joined_trace(first[0], trace, label), first[1] + n_iter
    else:
        trace = dataclasses.replace(trace, precision=label)
    quad = target_quad(inputs.Y, rhs, beta, inputs.lam, energy)
    if return_beta:
        return system.coef(beta), trace, n_iter, quad, beta, system
    return system.coef(beta), trace, n_iter, quad


def landmarks_name(landmarks):
    """How the centres were chosen, for the trace: a selector's name or "given"."""
    return landmarks if isinstance(landmarks, str) else "given"

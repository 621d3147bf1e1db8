"""Python face of SLKL: validation, the descent driver and the fitted model."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._memory import check_memory
from .._model import KernelRidgeModel, prepare_fit, renamed
from .._parameters import check_parameter
from .._probabilities import calibrates_probabilities
from .._targets import on_grid
from .._targets import target_scale as rms_scale
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import (
    check_seed,
)
from ..hyperparameters import selects_hyperparameters
from ..kernels._api import (
    _centred_for_accuracy,
    _kernel_matrix_trusted,
    _kernel_matvec_trusted,
)
from ._candidates import draw_candidates, holdout_rows
from ._core import SlklCore

__all__ = ["STEPS", "SlklModel", "fit_slkl"]

STEPS = {"exact": 0, "newton": 1, "paper": 2}
_RUN_DONE, _RUN_STOPPED, _RUN_GROW, _RUN_FAILED = 0, 1, 2, 3
# Coordinates are drawn this many at a time (numpy Generator), then stepped through in nogil.
_DRAW_BATCH = 4096
# Initial room for active columns; doubled when full (memory O(n m0 + m0^2), not O(n M)).
_INITIAL_CAPACITY = 64
# F history: room for this many steps first, doubled when full (not max_iter + 1 up front).
_HISTORY_START = 4 * _DRAW_BATCH


class SlklModel(KernelRidgeModel):
    """KRR on a learned conical combination of rank-1 Nystrom kernels (SLKL).

    f(x) = sum over active landmarks m of beta_m k(x_m, x): prediction evaluates the kernel at
    the active landmarks only.  Each output (a column of y, or a one-vs-rest class) is its own
    SLKL problem on the same candidates; every per-output value is an array with one entry (or
    column) per output, k of them, also for k = 1.

    Attributes
    ----------
    candidates_ : ndarray (M,)
        Rows of the training X forming the candidate set S (sorted).
    weights_ : ndarray (M, k)
        mu, one weight per candidate, one column per output.
    active_ : ndarray (m0,)
        Rows of the training X with a positive weight for some output (sorted).
    landmarks_ : ndarray (m0, d)
        ``X[active_]``.
    coef_ : ndarray (m0, k)
        beta.
    objective_ : ndarray (T + 1, k)
        T the largest of ``n_iter_``.  F after each coordinate step, one column per output:
        ``objective_[t, j]`` is F of output j after t steps (in units of y^2, with the penalty
        nu mean(y_j^2) ||mu||_1), from ``objective_[0, j]`` = ||y_j||^2 to
        ``objective_[n_iter_[j], j]``, the final F; NaN below that when output j stopped
        before the others.
    n_iter_ : ndarray of int (k,)
        Coordinate steps taken, per output.
    converged_ : ndarray of bool (k,)
        Per output, whether the stopping rule (and the KKT test when requested) ended the
        descent, rather than max_iter.
    nu_ : float
        The l1 penalty, relative to mean(y^2) of the centred targets (per output: the penalty
        is nu mean(y_j^2)); y is centred by its training mean, the model's constant mean.

    Examples
    --------
    Returned by :func:`fit_slkl`; only the active landmarks enter a prediction:

    >>> import numpy as np
    >>> import hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-5, 5, size=(300, 2))
    >>> y = np.sinc(np.linalg.norm(X, axis=1) / np.pi)
    >>> model = hkern.fit_slkl(X, y, r=60, nu=1e-3, sigma=1.0, seed=0)
    >>> K = hkern.kernel_matrix(X[:5], model.landmarks_, sigma=1.0)
    >>> bool(np.allclose(model.predict(X[:5]), model.y_mean_[0] + K @ model.coef_[:, 0]))
    True
    >>> model.weights_.shape, model.n_iter_.shape, model.objective_.shape[1]
    ((60, 1), (1,), 1)
    """

    def __init__(self, candidates, weights, active, landmarks, coef, objective, n_iter,
                 converged, nu, **kw):
        super().__init__(**kw)
        self.candidates_ = candidates
        self.weights_ = weights
        self.active_ = active
        self.landmarks_ = landmarks
        self.coef_ = coef
        self.objective_ = objective
        self.n_iter_ = n_iter
        self.converged_ = converged
        self.nu_ = nu

    nu = renamed("nu_")

    @property
    def m0_(self):
        """Number of active landmarks (union over outputs)."""
        return len(self.active_)

    def _scores(self, X):
        if self.m0_ == 0:
            return np.zeros((X.shape[0], self.coef_.shape[1]))
        # Runs inside the model's thread budget (KernelRidgeModel._checked_scores).
        return _kernel_matvec_trusted(self._kind, self._bandwidth, X, self.landmarks_, self.coef_,
                                      budget_threads())


def _candidate_scale(S):
    """1 / sqrt(k(x_m, x_m)); every hkern kernel has k(x, x) = 1 (kernels/_kernels.pxd)."""
    return np.ones(len(S))


# ------------------------------------------------------------------------------------------------
# Target scaling.  SLKL's objective is not scale-equivariant in y when nu is absolute: F(mu) for
# c * y with nu is c^2 F(mu) for y with nu / c^2, so the same nu keeps more landmarks for large
# targets and none at all for tiny ones (issue 31: y * 1e-12 kept no landmark and predicted 0).
# hkern therefore reads nu relative to mean(y^2): the penalty is nu * mean(y^2) * ||mu||_1, and
# c * y gives the weights of y and c times its predictor for every c.  The descent runs on
# y / rms(y) on a grid (descent_target: the same bits for c * y, so the same steps), and the
# predictor at the weights found is of y / rms(y) itself; a, b, F and q stay in range for any
# |y| <= 1e150.  The baselines' direct solves divide by a power of two near max|y|
# (target_scale), which scales exactly.
# ------------------------------------------------------------------------------------------------

# Scaled penalties above this keep every weight at 0 for any n and lam >= n^2 / _NU_CAP: F's
# partial derivative at mu = 0 is nu - (y^T c_m)^2 / lam with |y_i| / s <= sqrt(n), |c_m| <= 1.
_NU_CAP = 1e300
# lam / nu (scaled) above this: the exact step's sqrt(lam / nu) and the weights leave the range.
_LAM_OVER_NU_MAX = 1e300


def target_scale(y):
    """s = 2^e with max|y| / s in [0.5, 1) (1 for y = 0): y / s is exact."""
    top = float(np.max(np.abs(y))) if y.size else 0.0
    return 1.0 if top == 0.0 else float(np.ldexp(1.0, int(np.frexp(top)[1])))


def penalty_unit(y_s):
    """mean(y_s^2), the unit nu and kkt_tol are given in, for the scaled target y_s = y / s.

    1 to the grid's rounding for the descent's target (:func:`descent_target`), in [0.25 / n, 1)
    for the baselines' (max|y_s| in [0.5, 1)); 1 for y = 0 (every a_m is 0 then, so every
    weight stays 0 whatever the penalty).
    """
    ms = float(np.dot(y_s, y_s)) / len(y_s) if len(y_s) else 0.0
    return ms if ms > 0.0 else 1.0


def scaled_penalty(nu, lam, y_s, name="nu"):
    """nu * mean(y_s^2), the penalty on the scaled target y_s = y / s, capped where every weight
    is 0 anyway; ValueError where it is so small relative to lam that the weights grow without
    bound."""
    with np.errstate(over="ignore"):                  # inf is capped: every weight stays 0
        nu_s = min(nu * penalty_unit(y_s), _NU_CAP)
    if not (nu_s > 0.0 and lam / nu_s <= _LAM_OVER_NU_MAX):
        raise ValueError(
            f"{name}={nu:g} is too small (lam={lam:g}): the l1 penalty is nu * mean(y^2) and "
            f"lam / (nu * mean(y^2)) above {_LAM_OVER_NU_MAX:g} leaves the weights unbounded in "
            f"double precision; use a larger {name} or a smaller lam")
    return nu_s


# ------------------------------------------------------------------------------------------------
# Memory.  Estimates in bytes of what a fit allocates beyond X and y; see fit_slkl's max_memory.
# ------------------------------------------------------------------------------------------------

def _active_bytes(n, cap):
    """One core's active-set buffers at capacity cap: Ct (cap x n), G and work (cap x cap) and
    six cap-vectors (act, q, w, t, u, g)."""
    return 8 * (n * cap + 2 * cap * cap + 6 * cap)


def _core_fixed_bytes(n, M, precompute):
    """One core's other arrays: mu, pos, y^T c_m and ||c_m||^2 (M each), the scaled target (n)
    and, without precomputed columns, the column computed on the fly (n)."""
    return 8 * (4 * M + n + (0 if precompute else n))


def _fit_bytes(n, d, M, k, precompute, cap):
    """Peak of fit_slkl before the active set grows beyond cap columns (one core at a time)."""
    need = 8 * n * k                                  # Y, the targets as an (n, k) matrix
    need += 8 * M * k + 8 * _HISTORY_START            # weights of every output, F history
    if precompute:
        need += 8 * n * M                             # the M candidate columns (M x n)
        need += 8 * (n + M) * (d + 1)                 # centred X, X[S], squared norms (kernel)
    else:
        need += 8 * n * (d + 1)                       # centred X and its squared row norms
    return need + _core_fixed_bytes(n, M, precompute) + _active_bytes(n, cap)


# ------------------------------------------------------------------------------------------------
# The descent
# ------------------------------------------------------------------------------------------------

def candidate_columns(X, S, kind, sigma, n_threads):
    """The columns c_m of the candidates as the rows of an (M, n) array."""
    cols = _kernel_matrix_trusted(kind, sigma, np.ascontiguousarray(X[S]), X, n_threads)
    cols *= _candidate_scale(S)[:, None]
    return cols


def column_source(X, S, kind, sigma, precompute, n_threads):
    """Keyword arguments of SlklCore for the columns: precomputed, or X to compute them from."""
    if precompute:
        return {"cols": candidate_columns(X, S, kind, sigma, n_threads)}
    Xc = np.ascontiguousarray(_centred_for_accuracy(kind, X, X)[0])
    return {"X": Xc, "xsq": np.einsum("ij,ij->i", Xc, Xc), "kind": kind, "sigma": sigma}


def descend(core, rng, max_iter, tol, kkt_tol, grow=None):
    """Stochastic coordinate descent until the stopping rule (doc/specs/slkl.md, 5 D) or max_iter.

    Stops at the first step t > M with F(t - M) - F(t) < tol F(t - M), F(t) being F after t
    steps; with kkt_tol, also requires the KKT violation (``SlklCore.kkt_violation``) <=
    kkt_tol, tested at most once every M steps.  tol=None with kkt_tol stops on the KKT test
    alone.  ``grow(old_cap, new_cap)`` is called before the active set's buffers grow (the
    memory guard).  Returns (F history, steps, converged).

    Raises
    ------
    SlklNumericalError
        When a step fails (SlklCore.failure_message says why).
    """
    M = core.M
    hist = np.empty(min(max_iter, _HISTORY_START) + 1)
    hist[0] = core.F
    rule = 1 if tol is not None else (2 if kkt_tol is not None else 0)
    tol_value = 0.0 if tol is None else tol
    t, min_stop, converged = 0, 0, False
    while t < max_iter and not converged:
        draws = rng.integers(0, M, size=min(_DRAW_BATCH, max_iter - t)).astype(np.intp)
        if len(hist) < t + len(draws) + 1:
            hist = np.concatenate([hist, np.empty(max(len(hist), len(draws)))])
        i = 0
        while i < len(draws):
            done, status = core.run(draws[i:], hist, t, rule, tol_value, M, min_stop)
            i += done
            t += done
            if status == _RUN_GROW:
                new_cap = min(2 * core.cap, M)
                if grow is not None:
                    grow(core.cap, new_cap)
                core.grow(new_cap)
            elif status == _RUN_FAILED:
                raise SlklNumericalError(f"SLKL: {core.failure_message()}: {_NUMERICAL_HINT}")
            elif status == _RUN_STOPPED:
                # The tracked F drifts with the rank-1 updates when the weights are large
                # (relative 1e-3 seen on ill-conditioned fits, more than tol): rebuild G, w and
                # F from their definitions and stop only if the rule holds for the fresh F.
                try:
                    info = core.refresh()
                except ValueError:                 # non-finite F or G
                    info = -1
                if info != 0:
                    raise SlklNumericalError(f"SLKL: {core.failure_message()}: "
                                             f"{_NUMERICAL_HINT}")
                hist[t] = core.F
                if rule == 1 and not hist[t - M] - hist[t] < tol_value * hist[t - M]:
                    min_stop = t + M        # test next against the fresh F as window start
                    continue
                if kkt_tol is None or core.kkt_violation() <= kkt_tol:
                    converged = True
                    break
                min_stop = t + M
            else:
                break
    return hist[:t + 1].copy(), t, converged


@dataclass
class OutputFit:
    """What the model keeps of one output's fit (the core itself is released)."""

    weights: np.ndarray       # mu (M,)
    active: np.ndarray        # candidate indices with mu > 0 (m0,)
    beta: np.ndarray          # coefficients of the active landmarks (m0,)
    history: np.ndarray       # F after each step
    n_iter: int
    converged: bool


class SlklNumericalError(ValueError):
    """A coordinate step or the final solve failed in floating point (raised by fit_slkl with
    the argument to change in its message)."""


_NUMERICAL_HINT = ("the weights grew so large that the active columns are linearly dependent "
                   "in double precision; increase nu (fewer, smaller weights) or lam")


# The grid of the descent's target y / rms(y).  The descent amplifies a change of its target:
# at lam 1e-6 to 1e-2 (r = 80, n = 700) a change of 1e-8 of the target's scale, y + 1e8 std(y)'s
# rounding, moved F by 1e-6 within 18 to 47 steps and the predictions by 5e-4 to 6e-3.  On a
# grid of h the targets of y and y + b agree unless one of the n values lies within that change
# of a grid boundary, about n * 2e-8 / h for b = 1e8 std(y): 2^-10 (1e-3) makes it 1.4% at
# n = 700, where 2^-30, the selection's grid, left every value apart.  The descent's target is
# then within 5e-4 of y's scale of y itself; the coefficients are solved for y exactly.
DESCENT_GRID = 2.0 ** -10


def descent_target(y):
    """(s, y_s): the descent runs on y_s = y / rms(y) on a grid of ``DESCENT_GRID``, which is
    the same bits for c * y and for y + b (y centred; unless a value lies within rounding of a
    grid boundary), so that they take the same steps and keep the same landmarks and weights:
    from slightly different bits the descent ends elsewhere (3.7 y at lam 1e-2: predictions
    1.8e-3 apart, other landmarks).  |y_s| <= sqrt(n) keeps a, b, F and q in range."""
    s = rms_scale(y)
    return s, np.ascontiguousarray(on_grid(np.asarray(y, dtype=float) / s, DESCENT_GRID))


def fit_output(y, S, source, params, rng, max_iter, tol, kkt_tol, grow, n_threads):
    """Fit one target vector: the core on :func:`descent_target` with nu in its unit, then beta
    for y itself (at the weights found) and F in y's units.

    params = (lam, nu, step rule, refresh).  The core is released on return.
    """
    lam, nu, step_rule, refresh = params
    s, y_s = descent_target(y)
    nu_s = scaled_penalty(nu, lam, y_s)
    s2 = s * s
    core = SlklCore(y_s, lam, nu_s, step_rule, _candidate_scale(S), S,
                    capacity=_INITIAL_CAPACITY, refresh_every=refresh, n_threads=n_threads,
                    **source)
    # kkt_tol is in nu's unit, mean(y^2): mean(y_s^2) on the scaled target.
    history, n_iter, converged = descend(core, rng, max_iter, tol,
                                         None if kkt_tol is None
                                         else kkt_tol * penalty_unit(y_s), grow)
    try:
        # The predictor of y / s itself, not of the grid's y_s: the fit stays linear in y.
        active, beta = core.coefficients(np.ascontiguousarray(y / s))
    except ValueError as exc:              # numpy.linalg.LinAlgError included
        raise SlklNumericalError(f"{exc}: {_NUMERICAL_HINT}") from None
    return OutputFit(core.weights, active, beta * s, history * s2, n_iter, converged)


def assemble_model(fits, inputs, S, nu, n_jobs):
    """The fitted model from the outputs' fits (on ``inputs``, a FitInputs): union of active
    landmarks, beta per output, and the per-output values as arrays of one entry (or column)
    per output."""
    X = inputs.X
    k = len(fits)
    weights = np.column_stack([f.weights for f in fits])
    active_cand = np.unique(np.concatenate([f.active for f in fits])).astype(np.intp)
    coef = np.zeros((len(active_cand), k))
    for j, f in enumerate(fits):
        coef[np.searchsorted(active_cand, f.active), j] = f.beta
    active = S[active_cand]
    objective = np.full((max(len(f.history) for f in fits), k), np.nan)
    for j, f in enumerate(fits):
        objective[:len(f.history), j] = f.history
    n_iter = np.array([f.n_iter for f in fits], dtype=np.intp)
    converged = np.array([f.converged for f in fits], dtype=bool)
    return SlklModel(S, weights, active, np.ascontiguousarray(X[active]), coef, objective,
                     n_iter, converged, nu, **inputs.model_params(n_jobs))


@calibrates_probabilities(holdout_rows=holdout_rows)
@selects_hyperparameters("holdout", holdout_rows=holdout_rows, discontinuous=True)
@budgeted
def fit_slkl(X, y, r=256, *, kernel="gaussian", sigma="ard", lam="auto", task="regression",
             seed=None, n_jobs=None, nu=1e-2, step="exact", tol=1e-4, max_iter=None,
             kkt_tol=None, precompute_columns=True, refresh=1000, candidates=None,
             verbose=False, max_memory=None):
    r"""Stochastic low-rank kernel learning (Machart et al.): KRR on a learned sparse kernel.

    The kernel is the conical combination :math:`\tilde K(\mu) = \sum_{m \in S} \mu_m c_m
    c_m^T` of rank-1 Nystrom kernels of M candidate landmarks S (uniform without replacement),
    :math:`c_m = K(:, m) / \sqrt{k(x_m, x_m)}`.  The weights solve

    .. math:: \min_{\mu \ge 0} F(\mu) = y^T (I + \tilde K(\mu)/\lambda)^{-1} y
              + \nu\,\overline{y^2}\,\|\mu\|_1

    (:math:`\overline{y^2}` the mean of the squared targets: the paper's penalty with nu read
    relative to the size of y, so that c y gives the weights of y and c times its predictor)

    by stochastic coordinate descent (coordinates uniform with replacement), from
    :math:`\mu = 0`, in O(n m0 + m0^2) per step with m0 the number of non-zero weights; the
    l1 penalty makes most weights zero, and prediction uses the m0 active landmarks only.

    Parameters
    ----------
    X : array_like (n, d)
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"`` (one-vs-rest: one SLKL problem
        per class on the same candidates, prediction by argmax).
    r : int
        M, the number of candidate landmarks, 1 <= M <= n (above n it is reduced to n with a
        warning; ignored when ``candidates`` is given).
    nu : float
        l1 penalty, > 0; larger gives fewer active landmarks.  Only lam * nu matters
        (doc/specs/slkl.md, section 3): the default lam="auto" selects the product; with
        numbers, keep lam = 1 and tune nu.  nu is relative to mean(y^2)
        (the paper's nu is in units of y^2: its nu is hkern's nu times mean(y^2)), so fitting
        c * y gives the same landmarks and weights and c times the predictor (see Notes).
    lam : float or "auto", default="auto"
        Ridge parameter, > 0 (the paper uses 1), or selected.
    kernel : str
        See :func:`hkern.kernel_matrix`.
    {sigma}
        The paper's Gaussian width sigma^2 is hkern's sigma^2 with
        :math:`k = \exp(-\|x - x'\|^2 / (2\sigma^2))` (doc/specs/slkl.md, section 5 C).
    step : {"exact", "newton", "paper"}
        Coordinate update.  "exact" minimises F along the coordinate in closed form
        (:math:`\mu_m \leftarrow \max(0, \mu_m + (|a_m|\sqrt{\lambda/\nu} - 1)/b_m)`) and never
        increases F; "newton" is the projected Newton step with
        :math:`\partial^2_m F = 2\lambda a_m^2 b_m`; "paper" is Algorithm 2 as printed
        (:math:`h = \lambda a^2 b`, twice the Newton step), for reproduction.
    tol : float or None
        Stop at the first step t > M with :math:`F(\mu^{t-M}) - F(\mu^t) < tol\,F(\mu^{t-M})`
        (the paper's rule with its sign corrected).  None: no such rule.
    max_iter : int or None
        Most coordinate steps; default 200 M.
    kkt_tol : float or None
        Also require :math:`\max_m |\lambda a_m^2 - \nu'|` over active and
        :math:`\max(0, \lambda a_m^2 - \nu')` over inactive candidates to be <= kkt_tol
        :math:`\overline{y^2}`, with :math:`\nu' = \nu\,\overline{y^2}` the penalty (kkt_tol is
        in nu's unit; checked at most every M steps, cost of M steps each).  With ``tol=None``
        the KKT test alone stops the descent.
    precompute_columns : bool
        True: compute the M columns once (8 n M bytes).  False: compute a column when it is
        drawn and keep only the m0 active ones (8 n m0 bytes, one kernel row per step).
        Only True or False (numpy booleans included) are accepted.
    refresh : int
        Rebuild G = (D^{-1} + C^T C / lam)^{-1} by Cholesky every this many weight changes,
        bounding the drift of the rank-1 updates (0: only when an update's pivot fails).
    candidates : array of int, optional
        Rows of X to use as S instead of a random draw.
    task : {"regression", "classification"}
    seed : None, int or numpy.random.Generator
        Draws S and the coordinates; the same seed gives the same model.
    n_jobs : int or None
        Threads; None honours OMP_NUM_THREADS, the CPUs available and threadpoolctl limits.
        The result is bitwise the same for any n_jobs.
    {verbose}
    max_memory : int or None
        Most bytes the fit may allocate; None (default): the memory available when the call
        starts.  The fit needs about 8 n M bytes with precomputed columns, plus the active
        set's buffers, 8 (n cap + 2 cap^2) bytes for room for cap columns: cap starts at
        min(64, M) and doubles when the active set fills it, each doubling checked against
        ``max_memory`` before it is allocated.

    Returns
    -------
    SlklModel

    Raises
    ------
    ValueError
        For nu <= 0, lam <= 0, M > n, an unknown step, and the other invalid inputs; when nu is
        so small that the weights leave double precision (:math:`\lambda / (\nu\,
        \overline{y^2})` above 1e300 with y scaled to rms 1); when a step or the
        final solve fails in floating point (the active columns linearly dependent at the
        weights reached: increase nu or lam).
    hkern.MemoryLimitError
        A ValueError and MemoryError: the estimate exceeds ``max_memory`` (raised before the
        allocation).

    Notes
    -----
    Spec: ``doc/specs/slkl.md``.  The m0 x m0 matrix :math:`G = (D^{-1} + C^TC/\lambda)^{-1}`
    is updated by Sherman-Morrison (weight change), rank-1 downdate and swap-delete (weight to
    zero) and block inversion (new weight); F is tracked in O(1) per step, and rebuilt from its
    definition (with G) before the stopping rule is accepted.  The coefficients
    :math:`\beta = G C^T y / \lambda` are solved at the end from a fresh Cholesky factorisation
    of :math:`D^{-1} + C^TC/\lambda`, not from the updated G.

    Scaling of y: with an absolute penalty F is not scale-equivariant in y, since
    :math:`F_{c y, \nu}(\mu) = c^2 F_{y, \nu/c^2}(\mu)`; the penalty :math:`\nu\,\overline{y^2}`
    scales with y, so fitting c y selects the same landmarks and weights and predicts c times
    as much, for any c (issue 31; an absolute nu kept no landmark at all for y of size 1e-12).
    y is centred by its training mean (``y_mean_``, the model's constant mean, as in every
    fit), and nu is relative to the centred targets' mean square.  Internally the descent
    runs on the centred y / rms rounded to a grid of 2^-10 (``DESCENT_GRID``), the same bits
    for c y and y + b, so that they take the same steps (from other bits the descent ended
    elsewhere: 1.8e-3 apart at lam 1e-2); the coefficients are then solved for y itself at
    the weights found.  This keeps
    a, b and F in range for any accepted :math:`|y|` (up to 1e150).

    References
    ----------
    P. Machart, T. Peel, S. Anthoine, L. Ralaivola, H. Glotin, "Stochastic Low-Rank Kernel
    Learning for Regression", ICML 2011.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-5, 5, size=(400, 2)); r = np.linalg.norm(X, axis=1)
    >>> y = np.sin(r) / r
    >>> model = hkern.fit_slkl(X, y, r=100, nu=1e-3, sigma=1.0, lam=1.0, seed=0)
    >>> bool(np.all(np.diff(model.objective_[:, 0]) <= 1e-12))   # the exact step is monotone
    True
    >>> model.m0_ < 100 and float(np.mean((model.predict(X) - y) ** 2)) < 1e-3
    True
    """
    # y is centred, as for every fit (a constant mean plus the model): the l1 penalty is
    # relative to the centred targets' mean square, their variance
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory)
    X, Y = inputs.X, inputs.Y
    nu = check_parameter("nu", nu)
    check_parameter("step", step)
    tol = check_parameter("tol", tol, "fit_slkl")
    kkt_tol = check_parameter("kkt_tol", kkt_tol)
    refresh = check_parameter("refresh", refresh)
    precompute_columns = check_parameter("precompute_columns", precompute_columns)
    rng = check_seed(seed)
    (n, d), k = X.shape, Y.shape[1]
    S = draw_candidates(n, r, rng, candidates)
    M = len(S)
    max_iter = check_parameter("max_iter", max_iter, "fit_slkl")
    max_iter = 200 * M if max_iter is None else max_iter
    for j in range(k):                        # refuse a hopeless nu before any work
        scaled_penalty(nu, inputs.lam, descent_target(Y[:, j])[1])
    cap = min(_INITIAL_CAPACITY, M)
    base = (_fit_bytes(n, d, M, k, precompute_columns, cap) - _active_bytes(n, cap)
            + inputs.scaled_bytes)
    check_memory(base + _active_bytes(n, cap), max_memory,
                 what=f"fit_slkl with n={n}, r={M}"
                      + (" (precomputed columns: 8 n M bytes)" if precompute_columns else ""),
                 fix=("choose a smaller r or precompute_columns=False"
                      if precompute_columns else "fit on a subsample"))

    def grow(old_cap, new_cap):
        # max_memory=None compares the new buffers with the memory available now (which already
        # excludes what the fit holds); an explicit max_memory bounds the whole fit.
        extra = _active_bytes(n, new_cap)
        check_memory(extra if max_memory is None else base + _active_bytes(n, old_cap) + extra,
                     max_memory,
                     what=f"fit_slkl growing its active set from {old_cap} to {new_cap} columns "
                          f"(n={n})",
                     fix="increase nu (fewer active landmarks) or choose a smaller r")

    params = (inputs.lam, nu, STEPS[step], refresh)
    n_threads = budget_threads()
    with blas_threads(1):
        # BLAS on one thread: the core's products and the tiled routines split work over
        # n_threads on a fixed grid, so the result is the same for any n_jobs.
        source = column_source(X, S, inputs.kind, inputs.bandwidth, precompute_columns, n_threads)
        fits = [fit_output(np.ascontiguousarray(Y[:, j]), S, source, params, rng, max_iter, tol,
                           kkt_tol, grow, n_threads) for j in range(k)]
    return assemble_model(fits, inputs, S, nu, n_jobs)

"""fit_nystrom: kernel ridge regression on the Nystrom approximation, by the ridge in Nystrom
features (the feature map, :func:`nystrom_feature_map`) or by FALKON, and its memory plan."""
from __future__ import annotations

import numpy as np

from .. import _linalg
from .._gp import Evidence, ProfiledRidge
from .._memory import check_memory
from .._model import prepare_fit
from .._parameters import check_parameter
from .._probabilities import calibrates_probabilities
from .._ridge import block_rows, ridge_on_features
from .._sharded import runs_on_shards
from .._targets import encode_targets
from .._threads import budget_threads, budgeted
from .._validation import check_array, check_seed, scale_inputs
from ..hyperparameters import selects_hyperparameters
from ..hyperparameters.nystrom_pcg_problem import NystromPCGProblem
from ..hyperparameters.sharded import select_nystrom_on_shards
from ..kernels._api import _kernel_matrix_trusted
from ..oasis.api import selection_peak_bytes
from ..oasis.landmarks import check_landmarks, draw_landmarks
from ..solvers import falkon_bytes
from ..solvers.falkon import JITTER_STEPS, solve_falkon
from ..solvers.trace import check_early_validation, check_stopping, check_validation
from .checks import check_precision
from .model import NystromKRR
from .posterior import DeferredPosterior, nystrom_features
from .sharded import fit_nystrom_sharded

__all__ = ["fit_nystrom", "landmark_factor", "nystrom_feature_map", "nystrom_peak_bytes",
           "check_rcond"]



def landmark_factor(W, rcond, n_threads):
    """(L, jitter): the lower Cholesky factor L L^T = W + jitter I of the landmarks' kernel
    matrix W, computed in W's memory (a C-contiguous float64 array, overwritten) by the tiled,
    polled Cholesky that FALKON uses (bitwise the same for any ``n_threads``).

    The jitter starts at max(rcond, eps) trace(W) and grows tenfold while W + jitter I is not
    positive definite to working precision (nearly duplicated landmarks).  The trace, the sum
    of W's eigenvalues, is within a factor r above the largest: the jitter is relative to W's
    scale as an eigenvalue cutoff of rcond times the largest eigenvalue would be (LAPACK's
    rcond), and W's directions far below it count for nothing, without an eigendecomposition:
    r^3 / 3 flops instead of about 9 r^3.  Its floor, eps trace(W), is the Cholesky's own
    backward error.

    Raises
    ------
    ValueError
        If W + jitter I cannot be factorised for any jitter up to 1e10 times the first.
    """
    r = W.shape[0]
    diagonal = W.diagonal().copy()
    jitter = max(rcond, float(np.finfo(np.float64).eps)) * (float(diagonal.sum()) or 1.0)
    for _ in range(JITTER_STEPS + 1):
        W.flat[:: r + 1] = diagonal + jitter
        try:
            return _linalg.cholesky(W, overwrite=True, n_threads=n_threads), jitter
        except np.linalg.LinAlgError:
            _linalg.symmetrize(W, from_lower=False)     # W's upper triangle is untouched
            jitter *= 10.0
    raise ValueError(f"the kernel matrix of the {r} landmarks is not positive definite even "
                     f"with {jitter / 10:.1e} added to its diagonal: use fewer landmarks, "
                     "landmarks='rpcholesky', or a smaller sigma")


def nystrom_feature_map(W, rcond, n_threads=1):
    """(M, jitter): M (r, r), upper triangular, with M M^T = (W + jitter I)^{-1}, M = L^{-T}
    for the factor and jitter of :func:`landmark_factor` (W is not modified).

    Features Phi = K(X, Z) M give K(X, Z) (W + jitter I)^{-1} K(Z, X) = Phi Phi^T, the
    Nystrom approximation of the kernel (the NystromTransformer's map; the fit itself
    solves with L instead of forming M).
    """
    W = np.array(W, dtype=np.float64, order="C", copy=True)
    L, jitter = landmark_factor(W, rcond, n_threads)
    L_inv = _linalg.solve_triangular(L, np.eye(W.shape[0]), lower=True, n_threads=n_threads,
                                     overwrite_b=True)
    return np.ascontiguousarray(L_inv.T), jitter


def check_rcond(rcond):
    """The relative jitter of W's factor (:func:`landmark_factor`), checked: 0 <= rcond < 1."""
    return check_parameter("rcond", rcond, "fit_nystrom")


def nystrom_peak_bytes(n, r, n_outputs, landmarks="uniform", *, select_lam=True):
    """Peak bytes of :func:`fit_nystrom` beyond its inputs.

    W (r^2) is factorised in its own memory and its factor L stays alive through the fit; the
    ridge phase holds L, the Gram matrix and one block's Gram product (3 r^2) and one row block
    of C, whose features L solves in place (``block_rows(n, r) * r`` doubles, about 32 MiB).
    Selecting lam (``select_lam``, lam="auto") then holds L, the Gram matrix, its copy with
    the eigenvectors and dsyevd's workspace of 2 r^2: 5 r^2.  An adaptive landmark selection
    (oASIS, greedy, RP-Cholesky) runs first and frees its n x r factors before the fit: the
    peak is the larger of the two phases.
    """
    rows = block_rows(n, r)
    ridge = 8 * (3 * r * r + rows * r)
    if select_lam:
        ridge = max(ridge, 8 * 5 * r * r)
    return with_selection_bytes(ridge + 8 * 4 * r * n_outputs, n, r, landmarks)


def with_selection_bytes(fit_bytes, n, r, landmarks, widened=0):
    """The peak of a Nystrom fit of ``fit_bytes`` after its landmark selection: an adaptive one
    (oASIS, greedy, RP-Cholesky) frees its n x r factors before the fit, so the larger of the
    two phases (``widened``: the float64 copy of a float32 X the selection reads)."""
    if isinstance(landmarks, str) and landmarks != "uniform":
        return max(fit_bytes, selection_peak_bytes(n, r, landmarks) + widened)
    return fit_bytes


_VALIDATION_NEEDS_PCG = ("validation is used by solver='pcg' only (its error at every "
                         "iteration); the direct solver has no iterations: drop it and score "
                         "model.predict(X_val), or pass solver='pcg'")


def _selection_problem(arguments):
    """The iterative selection's view of a fit_nystrom call
    (:class:`hkern.hyperparameters.nystrom_pcg_problem.NystromPCGProblem`, given this fit's
    model class), or None for the direct solver; the PCG solver's arguments are checked here,
    before any work."""
    a = arguments
    check_parameter("solver", a["solver"], "fit_nystrom")
    check_precision(a["precision"], a["solver"], a.get("comm") is not None)
    if a["solver"] != "pcg":
        # The fit refuses these too, but only after the selection's subsample GP.
        check_stopping(a["tol"], a["max_iter"])
        if a["validation"] is not None:
            raise ValueError(_VALIDATION_NEEDS_PCG)
        return None
    X = check_array(a["X"], "X", keep_float32=True)      # widened per use (scale_inputs)
    n = X.shape[0]
    _, encoding = encode_targets(a["y"], n, a["task"])
    landmarks, r = check_landmarks(a["landmarks"], a["r"], n)
    tol, max_iter = check_stopping(a["tol"], a["max_iter"])
    check_early_validation(a, X, encoding)
    return NystromPCGProblem(a, X, encoding, landmarks, r, tol, max_iter, model=NystromKRR,
                             posterior=_deferred_posterior)


def _deferred_posterior(inputs, Z, jitter, n_threads):
    """The serial FALKON model's posterior arguments: made on first use."""
    return {"posterior": DeferredPosterior(inputs, Z, jitter)}


@runs_on_shards("fit_nystrom", fit_nystrom_sharded, select_nystrom_on_shards)
@calibrates_probabilities
@selects_hyperparameters("likelihood", profiles_ridge=True, iterative=_selection_problem)
@budgeted
def fit_nystrom(X, y, r=1024, *, kernel="gaussian", sigma="ard", lam="auto", task="regression",
                seed=None, n_jobs=None, landmarks="uniform", rcond=1e-11, solver="direct",
                tol=1e-3, max_iter=1000, validation=None, verbose=False, precision="auto",
                comm=None, max_memory=None):
    """Kernel ridge regression on the Nystrom approximation K ~ C W^+ C^T.

    r landmarks Z are chosen from X (by default uniformly without replacement); C = K(X, Z),
    W = K(Z, Z).  The model is f(x) = k(x, Z) alpha with alpha minimising
    ||C alpha - y||^2 + lam alpha^T W alpha, which is KRR with the kernel matrix C W^+ C^T.

    The direct solver solves the r-dimensional ridge problem in the features Phi = C L^{-T},
    L L^T = W + jitter I by the tiled Cholesky (the jitter ``rcond`` times W's trace,
    larger where W needs it; :func:`landmark_factor`; no explicit inverse of W).
    Phi is formed one row block at a time, so memory is O(r^2 + block * r), never O(n r);
    time O(n r^2 + r^3).  The PCG solver is FALKON's algorithm (Rudi, Carratino and Rosasco,
    2017; :mod:`hkern.solvers.falkon`): conjugate gradients on the normal equations
    (C^T C + lam W) alpha = C^T y preconditioned with two r x r Cholesky factors, each
    iteration one pass over C computed in cache and never stored: O(r^3) once and O(n r d)
    per iteration, the way to tens of thousands of centres.

    Parameters
    ----------
    X : array_like (n, d)
        A ``numpy.memmap`` (or ``np.load(path, mmap_mode="r")``) is read where it lies, by row
        blocks; it is copied once (8 n d bytes) where per-feature lengthscales scale it
        (X / sigma) or it sits far from the origin (the kernels' centred copy).
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"``.
    r : int
        Number of landmarks, 1 <= r <= n (above n it is reduced to n with a warning).
    kernel : str
        See :func:`hkern.kernel_matrix`.
    {sigma}
    lam : float or "auto", default="auto"
        Ridge regularisation, > 0, or selected.
    seed : None, int or numpy.random.Generator
        Landmark sampling.
    task : {"regression", "classification"}
    rcond : float
        The direct solver factorises W + jitter I with jitter = max(rcond, eps) trace(W)
        (trace(W) = r for the Gaussian kernel), grown tenfold while W needs more (nearly
        duplicated landmarks; ``jitter_``): W's directions far below it count for nothing, as
        eigenvalues below a relative cutoff.  0 <= rcond < 1.  The default 1e-11 (a jitter of
        1e-8 at r = 1024) gave keggundirected's test RMSE 0.132 against 0.155 for 1e-12, whose
        smaller jitter let near-duplicate landmarks draw the selected lam tenfold lower, and
        was within 0.02% of 1e-12 on kin40k, pol, elevators and protein
        (``experiments/nystrom_jitter.py``).  PCG's jitter is r * eps unless W needs more
        (``solver_trace_.jitter``).
    solver : {"direct", "pcg"}
        ``"direct"``: the ridge problem in Nystrom features (Cholesky factor of W, r x r
        Gram matrix).  ``"pcg"``: FALKON's preconditioned conjugate gradients (above), for
        large r.  PCG computes no log-determinant: ``lam="auto"`` and ``sigma="auto"`` need the
        direct solver.
    tol : float
        PCG stops when every column's relative residual in FALKON's preconditioned system is
        at most ``tol`` (> 0).
    max_iter : int
        Most PCG iterations (>= 1); a :class:`hkern.ConvergenceWarning` says when it stopped
        the solver before ``tol``.
    validation : (X_val, y_val) or None
        With PCG, a validation set whose RMSE (regression) or error rate (classification) is
        recorded at every iteration (``solver_trace_.validation_error``, and printed with
        ``verbose``).
    landmarks : {"uniform", "oasis", "greedy", "rpcholesky", "block_rpcholesky"} or array of int
        The column selector that chooses the landmarks (the names of
        :func:`hkern.select_columns`' ``method``; the adaptive ones may stop before r columns
        when the kernel matrix is numerically of lower rank), or the row indices of X to use
        (e.g. ``hkern.oasis(X, r).indices_``).
    n_jobs : int or None
        Threads; None uses the CPUs available, within OMP_NUM_THREADS and threadpoolctl
        limits.  Results are identical for any value.
    {verbose}
        With PCG: one line per iteration (largest relative residual, validation error,
        seconds).
    comm : mpi4py communicator or None
        Fit on data sharded over the ranks of ``comm`` (``solver="pcg"``, ``landmarks``
        "uniform", "oasis" (by oASIS-P) or given global row indices; doc/mpi.md): call on
        every rank with that rank's rows as ``X``, ``y`` (and ``validation``), the same other
        arguments and ``seed`` an int or None.  The fit is the one of the concatenated shards
        (rank order), with the same centres as the serial fit; every rank gets the whole model
        and predicts its own test points.  An error on any rank ends the call on every rank.
    max_memory : int or None
        Most bytes the fit may allocate (the direct solver: :func:`nystrom_peak_bytes`, about
        24 r^2 + 32 MiB, 40 r^2 with lam="auto"; PCG: :func:`hkern.solvers.falkon_bytes`,
        about 8 r^2 + 80 r k + 8 n k, 4 r^2 for the factors with ``precision="mixed"``); None
        (default): the memory available when the call starts.  With ``comm``: per rank, for
        its rows.
    precision : {"auto", "double", "mixed"}
        FALKON's arithmetic (``solver="pcg"``).  ``"mixed"``: the factors of W and the passes
        over C in single precision (float32 kernel values from the fused engine, half the
        factors' memory, about 0.55 of the time on kin40k with 8192 centres), CG's vectors,
        the right-hand side and the checks in double; the recursion's residual is replaced by
        the float64 one every decade.  The float32 factors regularise with lam (W + jitter I)
        and float32's rounding of W (jitter about sqrt(r) * 1.2e-7), a different model where
        W has many eigenvalues that small (large sigma, many centres): the fit warns when its
        answer's residual in the float64 model is above ``tol``
        (``solver_trace_.float64_model_residual``).  ``"auto"`` (default) runs mixed only
        where the 1% quantile of W's Cholesky pivots is at least 2 jitters, r >= 1024 and
        tol >= 1e-5, keeps the mixed answer when its residual in the float64 model is at
        most 6 tol, and else goes on in double from it (``solver_trace_.precision``;
        hkern.solvers.falkon.MIXED_MIN_PIVOT and MIXED_ACCEPT say why);
        ``"double"`` throughout.  The direct
        solver and a sharded fit (``comm``) compute in double (``"auto"``), and refuse
        ``"mixed"``.  doc/solvers.md, "Mixed precision".

    Returns
    -------
    NystromKRR

    Raises
    ------
    ValueError
        For invalid input; :class:`hkern.MemoryLimitError` (a ValueError) when the fit would
        need more than ``max_memory``.

    Notes
    -----
    Cost O(n r d + n r^2 + r^3) time (direct), O(r^3 + iterations * n r d) (PCG).  Predictions
    cost O(r d) per point.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 3)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_nystrom(X, y, r=100, sigma=1.0, lam=1e-3, seed=0)
    >>> float(np.sqrt(np.mean((model.predict(X) - y) ** 2))) < 0.05
    True
    """
    check_parameter("solver", solver, "fit_nystrom")
    check_precision(precision, solver)
    # FALKON reads a float32 X (scalar sigma) as it is, widening the blocks it reads.
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory, profiles_ridge=True,
                         keep_float32=solver == "pcg")
    X, Y = inputs.X, inputs.Y
    n, d = X.shape
    landmarks, r = check_landmarks(landmarks, r, n)
    rcond = check_rcond(rcond)
    rng = check_seed(seed)
    if solver == "pcg":
        if isinstance(inputs.lam, ProfiledRidge):
            raise ValueError("fit_nystrom(solver='pcg') computes no log-determinant, and "
                             "lam='auto' needs it: pass solver='direct', or a number for lam")
        tol, max_iter = check_stopping(tol, max_iter)
        validation = check_validation(validation, inputs)
        verbose = check_parameter("verbose", verbose)
        # FALKON (its model makes its posterior when its std is first asked for)
        peak = with_selection_bytes(falkon_bytes(n, r, d, Y.shape[1], budget_threads(),
                                                 precision, X.dtype), n, r,
                                    landmarks, widened=8 * n * d if X.dtype == np.float32 else 0)
    else:
        # The PCG solver's arguments: a bad value is an error whatever the solver, and the
        # validation set, recorded at each PCG iteration, would do nothing here.
        check_stopping(tol, max_iter)
        if validation is not None:
            check_validation(validation, inputs)
            raise ValueError(_VALIDATION_NEEDS_PCG)
        peak = nystrom_peak_bytes(n, r, Y.shape[1], landmarks,
                                  select_lam=isinstance(inputs.lam, ProfiledRidge))
    check_memory(peak + inputs.scaled_bytes, max_memory,
                 what=f"fit_nystrom with n={n}, r={r}", fix="choose a smaller r")

    n_threads = budget_threads()
    indices = draw_landmarks(X, r, landmarks, kind=inputs.kind, bandwidth=inputs.bandwidth,
                             rng=rng, n_jobs=n_threads, max_memory=max_memory)
    Z = scale_inputs(X[indices], None)          # float64 (X may be float32, kept)
    if solver == "pcg":
        coef, trace, n_iter, quad = solve_falkon(
            inputs, Z, landmarks=landmarks, tol=tol, max_iter=max_iter, validation=validation,
            verbose=verbose, n_threads=n_threads, precision=precision)
        return NystromKRR(Z, indices, coef, Z.shape[0], n_iter=n_iter, solver_trace=trace,
                          jitter=trace.jitter, posterior=DeferredPosterior(inputs, Z, trace.jitter),
                          evidence=Evidence(quad, None, n), **inputs.model_params(n_jobs))
    W = _kernel_matrix_trusted(inputs.kind, inputs.bandwidth, Z, Z, n_threads)
    L, jitter = landmark_factor(W, rcond, n_threads)
    del W                                     # L is W's memory

    features = nystrom_features(inputs.kind, inputs.bandwidth, Z, L, n_threads)
    coef_features, evidence, lam, factor = ridge_on_features(features, X, Y, inputs.lam, r, r,
                                                             n_threads)
    coef = _linalg.solve_triangular(L, coef_features, lower=True, trans=True,
                                    n_threads=n_threads)
    return NystromKRR(Z, indices, coef, r, jitter=jitter, landmark_factor=L,
                      posterior_factor=factor, evidence=evidence,
                      **inputs.model_params(n_jobs, lam=lam))

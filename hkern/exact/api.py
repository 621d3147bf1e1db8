"""fit_exact: exact kernel ridge regression, (K + lam I) alpha = y solved by a Cholesky
factorisation or by preconditioned conjugate gradients (:mod:`hkern.solvers.exact_pcg`)."""
from __future__ import annotations

from .._gp import Evidence, column_quads
from .._memory import check_memory, resolve_max_memory
from .._model import prepare_fit
from .._parameters import check_parameter, choices_of
from .._probabilities import calibrates_probabilities
from .._sharded import runs_on_shards
from .._targets import encode_targets
from .._threads import budget_threads, budgeted
from .._validation import check_array, check_solver
from ..hyperparameters import selects_hyperparameters
from ..hyperparameters.exact_pcg_problem import ExactPCGProblem
from ..solvers.exact_pcg import default_rank, solve_pcg
from ..solvers.preconditioners import preconditioner_kind
from ..solvers.trace import check_early_validation, check_stopping, check_validation
from .model import ExactKRR, _system_factor, unit_solve
from .sharded import fit_exact_sharded, select_exact_on_shards

__all__ = ["fit_exact", "SOLVERS"]

SOLVERS = choices_of("solver", "fit_exact")
FORMER_SOLVERS = {"cholesky": "direct"}
# solver="auto" factorises up to this many points (and when 8 n^2 bytes fit max_memory), and
# runs preconditioned CG above.
AUTO_CHOLESKY_MAX_N = 10_000


def _solver_of(solver, n, k, scaled_bytes, max_memory):
    """The solver ``solver="auto"`` stands for at n points and k outputs."""
    if solver != "auto":
        return solver
    return "direct" if n <= AUTO_CHOLESKY_MAX_N and 8 * n * n + 16 * n * k + scaled_bytes \
        <= resolve_max_memory(max_memory) else "pcg"


def _check_pcg_arguments(n, r, tol, max_iter):
    """(rank, tol, max_iter) of solver="pcg" at n points, checked."""
    if n < 2:
        raise ValueError("solver='pcg' needs at least 2 training points (its preconditioner has "
                         "rank < n); use solver='direct'")
    rank = default_rank(n) if r is None else check_parameter("r", r, "fit_exact", n=n)
    tol, max_iter = check_stopping(tol, max_iter)
    return rank, tol, max_iter


def _check_unused_pcg_arguments(solver, r, tol, max_iter, validation, check_val,
                                precision="double"):
    """The PCG solver's arguments checked when the Cholesky solver runs: a bad value is an error
    whatever the solver, and one that only PCG uses, given with solver="direct", is refused
    (it would do nothing).  ``solver``: the user's ("direct" or "auto"); ``check_val()``
    checks the validation set as the PCG fit would."""
    check_stopping(tol, max_iter)
    # r is checked against n only where it is used: under solver="direct" it is refused below.
    check_parameter("r", r, "fit_exact", n=None)
    if validation is not None:
        check_val()
    if solver == "direct":
        unused = [name for name, value in (("r", r), ("validation", validation),
                                           ("precision", precision
                                            if precision == "mixed" else None))
                  if value is not None]
        if unused:
            raise ValueError(f"{' and '.join(unused)} {'is' if len(unused) == 1 else 'are'} "
                             "used by solver='pcg' only; solver='direct' solves directly: "
                             "drop it, or pass solver='pcg'")


def _selection_problem(arguments):
    """The iterative selection's view of a fit_exact call
    (:class:`hkern.hyperparameters.exact_pcg_problem.ExactPCGProblem`, given this fit's model
    class and preconditioner kind), or None when the call runs the Cholesky solver; every
    argument of the PCG solver is checked here, before any work."""
    a = arguments
    solver = check_solver(a["solver"], "fit_exact", FORMER_SOLVERS)
    check_parameter("preconditioner", a["preconditioner"], "fit_exact")
    check_parameter("precision", a["precision"], "fit_exact")
    X = check_array(a["X"], "X", keep_float32=True)      # widened per use (prepare_fit)
    Y, encoding = encode_targets(a["y"], X.shape[0], a["task"])
    if _solver_of(solver, X.shape[0], Y.shape[1], 0, a["max_memory"]) != "pcg":
        # The direct selection's fits check these too, but only after its subsample's GP.
        _check_unused_pcg_arguments(solver, a["r"], a["tol"], a["max_iter"],
                                    a["validation"], lambda: check_early_validation(a, X,
                                                                                    encoding),
                                    a["precision"])
        return None
    if a["preconditioner"] == "hck":
        raise ValueError("the hyperparameter selection of fit_exact(solver='pcg') runs with "
                         "the Nystrom preconditioners; pass preconditioner='block_rpcholesky' "
                         "or numbers for sigma and lam")
    rank, tol, max_iter = _check_pcg_arguments(X.shape[0], a["r"], a["tol"], a["max_iter"])
    check_early_validation(a, X, encoding)
    return ExactPCGProblem(a, X, encoding, rank, tol, max_iter, model=ExactKRR,
                           preconditioner=preconditioner_kind(a["preconditioner"]))


@runs_on_shards("fit_exact", fit_exact_sharded, select_exact_on_shards)
@calibrates_probabilities
@selects_hyperparameters("likelihood", iterative=_selection_problem)
@budgeted
def fit_exact(X, y, *, kernel="gaussian", sigma="ard", lam="auto", task="regression", seed=None,
              n_jobs=None, solver="auto", preconditioner="block_rpcholesky", r=None,
              tol=1e-3, max_iter=1000, validation=None, verbose=False, precision="auto",
              comm=None, max_memory=None):
    """Exact kernel ridge regression: (K + lam I) alpha = y, by a Cholesky factorisation or by
    preconditioned conjugate gradients.

    Parameters
    ----------
    X : array_like (n, d)
        A ``numpy.memmap`` (or ``np.load(path, mmap_mode="r")``) is read where it lies, by row
        blocks (``solver="direct"`` holds the n x n matrix anyway); it is copied once
        (8 n d bytes) where per-feature lengthscales scale it (X / sigma) or it sits far from
        the origin (the kernels' centred copy).
    y : array_like (n,) or (n, k)
        Targets, or class labels for ``task="classification"`` (one-vs-rest, one solve for all
        classes).
    kernel : str
        See :func:`hkern.kernel_matrix`.
    {sigma}
    lam : float or "auto", default="auto"
        Ridge regularisation (the GP noise variance), > 0, or selected.
    seed : None, int or numpy.random.Generator
        The subsample of a hyperparameter selection, and the preconditioner's column draw.
    task : {"regression", "classification"}
    solver : {"auto", "direct", "pcg"}
        ``"direct"``: factorise K + lam I by Cholesky (O(n^3 / 3) time, 8 n^2 bytes; its
        former name ``"cholesky"`` still works, with a FutureWarning).  ``"pcg"``: block
        conjugate gradients (every output and class in one pass over K per iteration)
        preconditioned by F F^T + lam I, F the Nystrom factor of ``r`` columns chosen by
        ``preconditioner``, applied by Woodbury; K is stored when its 8 n^2 bytes are at most
        1 GiB and fit ``max_memory`` (each iteration a GEMM) and recomputed tile by tile
        otherwise (O(n r) memory).  ``"auto"`` (default): Cholesky up to n = 10 000 points
        when its 8 n^2 bytes fit, PCG above.  The PCG model has no log-determinant; its
        ``sigma="auto"|"ard"`` and ``lam="auto"`` run the staged selection of
        :mod:`hkern.hyperparameters.iterative` (see ``criterion``).
    preconditioner : {"block_rpcholesky", "rpcholesky", "oasis", "greedy", "uniform", "hck"}
        The PCG preconditioner: a Nystrom one, named by the column selector that chooses its
        columns (the names of :func:`hkern.select_columns`' ``method``); the
        default draws RPCholesky's pivots a block at a time (3.8 s for 2000 columns of
        kin40k's 36 000 points here, against 37 s one pivot at a time).  ``"hck"``:
        the preconditioner is K_hier + lam I, the hierarchical kernel of
        :func:`hkern.fit_hierarchical` with ``r`` landmarks per node, exact on its leaf
        blocks (doc/solvers.md compares them).
    r : int or None
        Rank of the PCG preconditioner (its Nystrom columns, or HCK's landmarks per node),
        1 <= r < n; None: up to min(3000, n // 4) and 1 GiB of factor (8 n r bytes), fewer
        once the Nystrom residual's mean diagonal is at most lam / 50 (block RPCholesky; the
        rank used is ``solver_trace_.rank``).
    tol : float, default=1e-3
        PCG stops when every column's relative residual ||y - (K + lam I) alpha|| / ||y||
        is at most ``tol`` (> 0).  On kin40k (the selected ARD kernel) the test RMSE at 1e-3
        was within 0.05% of the converged one (0.06243 against 0.06240) after 75 iterations,
        against 97 for 1e-4; 1e-2 was 1.5% off.
    max_iter : int
        Most PCG iterations (>= 1); a :class:`hkern.ConvergenceWarning` says when it stopped
        the solver before ``tol``.
    validation : (X_val, y_val) or None
        With PCG, a validation set whose RMSE (regression) or error rate (classification) is
        recorded at every iteration (``solver_trace_.validation_error``, and printed with
        ``verbose``); it costs one kernel product with X_val per iteration.
    {verbose}
        With PCG: one line per iteration (largest relative residual, validation error,
        seconds).
    comm : mpi4py communicator or None
        Fit on data sharded over the ranks of ``comm``: every rank passes its own rows of X
        and y (the data set is their concatenation in rank order) and the same other
        arguments.  Runs PCG (``solver`` "pcg" or "auto") with the block-RPCholesky
        preconditioner built on the shards, in any ``precision``, and selects sigma and lam
        by the hold-out criterion (regression); no rank holds all of X during the fit (X
        passes a block of columns at a time), and the result, selection included, is bit for
        bit that of ``solver="pcg"`` on the concatenated data in one process, for any number
        of ranks and shard sizes (:mod:`hkern.exact.sharded`).  Every rank gets the whole
        model (its ``predict(return_std=True)`` is the serial model's).  An error on one
        rank ends the fit on every rank.
    max_memory : int or None
        Most bytes the fit may allocate; None (default): the memory available when the call
        starts.  The Cholesky fit needs about 8 n^2 bytes (the kernel matrix, factorised in
        place); PCG 16 n r for the preconditioner (HCK's: about 40 n r), 40 n k for its
        vectors, and 8 n^2 more to store K (up to 1 GiB; else one 256 KiB tile of it per
        thread).
    n_jobs : int or None
        Threads; None uses the CPUs available, within OMP_NUM_THREADS and threadpoolctl
        limits.  Results are identical for any value.
    precision : {"double", "mixed", "auto"}
        With PCG: ``"mixed"`` computes the kernel products (the float32 engine, or a stored
        float32 K) and the Nystrom preconditioner's factor in single precision, with CG's
        vectors, sums and the coefficients in float64, and judges convergence by the residual
        of K + lam I in float64 (restarting from it, iterative refinement, where float32
        held it above ``tol``).  On kin40k: 0.49 of the time and 0.58 of the memory of
        ``"double"``, the same test RMSE (doc/solvers.md, "Mixed precision").  ``"auto"``
        (default): mixed where float32 reaches the system (eps32 lambda_max(K) / lam at most 0.1,
        estimated on 2000 rows before the solve; there the shared sets lost at most 0.02% of test
        RMSE) and ``tol`` is at least 1e-5, double otherwise, and double from the mixed solution
        wherever the mixed solve stops short of ``tol`` before ``max_iter`` (``max_iter`` iterations
        each; ``solver_trace_.precision`` says which ran).
        ``solver="direct"`` is float64 only (``"mixed"`` is refused with it).

    Returns
    -------
    ExactKRR

    Raises
    ------
    ValueError
        For invalid input; :class:`hkern.MemoryLimitError` (a ValueError) when 8 n^2 bytes
        exceed ``max_memory``.

    Notes
    -----
    Cost O(n^2 d + n^3 / 3) time, 8 n^2 bytes.  The Cholesky factorisation is hkern's tiled one
    (``hkern._linalg.potrf_tiled``): OpenMP threads over 256 x 256 tiles, each a single-threaded
    BLAS call.  Multi-threaded OpenBLAS ``dpotrf``/``dsyrk`` have crashed near n = 16 000-18 000
    on this project's machines and change their rounding with the thread count; the tiled
    form does neither, so results are identical for any ``n_jobs``.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = np.sin(X[:, 0])
    >>> model = hkern.fit_exact(X, y, sigma=1.0, lam=1e-3)
    >>> float(np.abs(model.predict(X) - y).max()) < 0.05
    True
    """
    solver = check_solver(solver, "fit_exact", FORMER_SOLVERS)
    check_parameter("preconditioner", preconditioner, "fit_exact")
    check_parameter("precision", precision, "fit_exact")
    inputs = prepare_fit(X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                         max_memory=max_memory)
    X, Y = inputs.X, inputs.Y
    n = X.shape[0]
    chosen = _solver_of(solver, n, Y.shape[1], inputs.scaled_bytes, max_memory)
    if chosen != "pcg":
        _check_unused_pcg_arguments(solver, r, tol, max_iter, validation,
                                    lambda: check_validation(validation, inputs), precision)
    solver = chosen
    if solver == "pcg":
        return _fit_pcg(inputs, n_jobs=n_jobs, preconditioner=preconditioner, r=r,
                        tol=tol, max_iter=max_iter, seed=seed, validation=validation,
                        verbose=verbose, max_memory=max_memory, precision=precision)
    check_memory(8 * n * n + 16 * n * Y.shape[1] + inputs.scaled_bytes, max_memory,
                 what=f"fit_exact with n={n} (the n x n kernel matrix)",
                 fix="fit on a subsample, or use fit_nystrom, fit_rff or fit_hierarchical")
    n_threads = budget_threads()
    factor = _system_factor(inputs.kind, inputs.bandwidth, inputs.lam, X, n_threads)
    alpha_unit, norms, evidence = unit_solve(factor, Y, n_threads, inputs.lam)
    del factor
    return ExactKRR(X, alpha_unit, coef_scale=norms, evidence=evidence,
                    **inputs.model_params(n_jobs))


def _fit_pcg(inputs, *, n_jobs, preconditioner, r, tol, max_iter, seed, validation, verbose,
             max_memory, precision):
    """fit_exact(solver="pcg") after its arguments are checked (hkern.solvers.exact_pcg)."""
    rank, tol, max_iter = _check_pcg_arguments(inputs.X.shape[0], r, tol, max_iter)
    validation = check_validation(validation, inputs)
    alpha, trace, n_iter = solve_pcg(
        inputs, preconditioner=preconditioner_kind(preconditioner), rank=rank, tol=tol,
        max_iter=max_iter, seed=seed,
        validation=validation, verbose=check_parameter("verbose", verbose), max_memory=max_memory,
        n_threads=budget_threads(), adaptive=r is None, precision=precision)
    # No log-determinant from CG; y^T A^{-1} y (the signal variance) from its answer.
    evidence = Evidence(column_quads(inputs.Y, alpha), None, inputs.X.shape[0])
    return ExactKRR(inputs.X, alpha, n_iter=n_iter, solver_trace=trace, evidence=evidence,
                    **inputs.model_params(n_jobs))

"""Python face of GP-GRIEF: :func:`fit_grief` checks its arguments, standardises the data,
initialises the hyperparameters and runs the type-II (``_search``) or type-I (``_type1``) fit;
the fitted model is :class:`hkern.grief.model.GriefGP`."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .._memory import check_memory
from .._parameters import check_parameter
from .._progress import Progress
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import (
    check_array,
    check_int,
    check_rank,
    check_seed,
    check_targets,
)
from ..hyperparameters.exact_gp import BOUNDS, fit_exact_ard
from ._basis import BLOCK, make_grids
from ._search import fit_type2
from ._standardise import Standardiser
from ._type1 import fit_type1
from .model import GriefGP

# GriefGP is named here too: the API reference documents it as hkern.grief.api.GriefGP.
__all__ = ["GriefGP", "fit_grief", "grief_peak_bytes"]

# Type-II searches besides the paper's initialisation (see fit_grief, n_restarts).
RESTARTS_DEFAULT = 2

KERNELS = ("gaussian", "rbf")


def _check_grid_size(grid_size, d):
    if isinstance(grid_size, (numbers.Integral, np.integer)) and not isinstance(grid_size, bool):
        sizes = [check_int(grid_size, "grid_size", low=2,
                           hint="a grid needs at least 2 points per dimension")] * d
    else:
        try:
            sizes = list(grid_size)
        except TypeError:
            raise ValueError(f"grid_size must be an int >= 2 or a sequence of {d} ints >= 2, "
                             f"got {grid_size!r}") from None
        if len(sizes) != d:
            raise ValueError(f"grid_size has {len(sizes)} entries but X has {d} features; give "
                             "one grid size per column or a single int")
        sizes = [check_int(s, f"grid_size[{i}]", low=2,
                           hint="a grid needs at least 2 points per dimension")
                 for i, s in enumerate(sizes)]
    return np.array(sizes, dtype=np.intp)


@budgeted
def fit_grief(X, y, r=1000, *, kernel="gaussian", seed=None, n_jobs=None, grid_size=10,
              inference="type2", lengthscales=None, signal_variance=None, noise=None,
              optimize=True, max_iter=200, optimize_subset=None, init_subset=1000,
              n_restarts=RESTARTS_DEFAULT, n_iter=10_000, burn_in=1000, thin=50,
              w_prior="kernel", grid_inputs=None, verbose=False, max_memory=None):
    """Fit a GP-GRIEF model: a GP with r product eigenfunctions of a grid of m = prod(mbar_i)
    inducing points (Evans & Nair, "Scalable Gaussian processes with grid-structured
    eigenfunctions", ICML 2018).

    Inputs and targets are standardised internally (training mean and standard deviation,
    computed at an exact power-of-two scale so that data of any accepted magnitude, 1e-300 to
    1e150, give the same model as the same data near 1); the
    grid of dimension i is ``linspace(min, max, grid_size[i])`` of the training column, or its
    sorted unique values when it has no more than ``grid_size[i]`` of them.  Columns that are
    constant on the training set carry no information and are ignored (see
    ``active_features_``).  The kernel is SE-ARD, s2 exp(-sum_i (x_i - z_i)^2 / (2 ls_i^2)),
    factored with unit amplitude per dimension; each 1-D grid kernel matrix gets a 1e-12 jitter.

    Unlike the other fits it takes no ``sigma``, ``lam`` or ``task``: a Gaussian process learns
    its lengthscales, signal variance and noise variance (``lengthscales``, ``signal_variance``
    and ``noise`` start the search, or fix the values with ``optimize=False``), the three
    numbers that ``sigma`` and ``lam`` stand for in a kernel ridge fit, and its Gaussian
    likelihood models real-valued targets only (regression).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    r : int, default=1000
        Number of basis functions, the paper's p: capped at m, and reduced to n with a warning
        when above it, as every fit reduces its rank (the paper used p = 100 below about 900
        points and 1000 above).  Above n each search step costs O(p^3) for little gain; split
        0, the default call against r = 1000 kept: housing 2.485 against 2.408 in 11 s against
        37 s, yacht 0.432 against 0.403 (1.9 s, 9.0 s), autompg 2.627 against 2.607.
    grid_size : int or sequence of int, default=10
        Grid points per dimension (each >= 2).
    kernel : {"gaussian"}, default="gaussian"
        SE-ARD (alias "rbf").
    inference : {"type2", "type1"}, default="type2"
        ``"type2"``: maximise the log marginal likelihood over lengthscales, s2 and noise
        (L-BFGS-B, analytic gradients; the lengthscale gradients differentiate the 1-D
        eigenproblems with the selected index set held fixed).  ``"type1"``: keep the
        initial lengthscales and integrate over per-basis weights w and the noise by MALA in
        the SVD basis, with the paper's log-normal priors (w: mode 1, variance 100; noise: mode
        noise0, variance 0.04), ``n_iter`` iterations, ``burn_in``, keeping every ``thin``-th.
    seed : int, numpy.random.Generator or None
        Drives the initialisation subset and the MCMC.
    lengthscales, signal_variance, noise : optional
        Initial hyperparameters in the original units.  When all three are None they come from
        a type-II fit of an exact SE-ARD GP on ``init_subset`` random training points.
    optimize : bool, default=True
        Type II only: False keeps the initial hyperparameters.
    max_iter : int, default=200
        L-BFGS-B iterations (type II).
    optimize_subset : int or None, default=None
        Type II only: run the L-BFGS-B search on this many random training points (when n is
        larger), then build the final model on all points at the hyperparameters found.  Each
        search step then costs O(optimize_subset p^2) instead of O(n p^2).  None (the paper's
        method) searches on all points.
    init_subset : int, default=1000
    n_restarts : int, default=2
        Type II only: extra L-BFGS-B searches besides the one from the paper's initialisation.
        The LML is multimodal (and only piecewise smooth), so one search can stop in a poor
        local optimum.  Restart k starts from the initial lengthscales times
        ``exp(N(0, 1))`` per dimension (seeded by ``seed``), with s2 and the noise re-fitted at
        those lengthscales; every search gets ``max_iter`` iterations.  The run with the largest
        training LML (on all training points, also with ``optimize_subset``) is kept; test data
        play no part.  0 gives the single search of the paper.  Cost: (1 + n_restarts) searches.
        The default 2 was chosen by measurement (doc/results/grief.md).
        One more search is added when an input's initial lengthscale is below the smallest gap
        of its grid (``screened_``): there the input's 1-D grid spectrum is flat, Algorithm 1
        spends the p slots on near-copies of the same functions, and a poor start cannot
        recover (keggundirected split 0: test RMSE 0.62 from the plain start); the extra
        search starts from the same point with those inputs switched off.
    n_iter, burn_in, thin : int
        MALA schedule (type I); the step size adapts during burn-in towards 57.4% acceptance.
        burn_in < n_iter, and 1 <= thin <= n_iter - burn_in (floor((n_iter - burn_in) / thin)
        samples are kept).  With given hyperparameters, type I centres the noise prior at
        ``noise``, which must then lie within [1e-6, 10] var(y).
    w_prior : {"kernel", "unit"}, default="kernel"
        Type I only: where the log-normal prior of the weights of the orthogonalised (SVD)
        basis is centred.  ``"kernel"``: mode s_i^2 (the squared singular values of the scaled
        basis), so the prior centre is the eq. 3 kernel s2 Phi Phi', with the log-spread of
        the paper's prior (log-variance 1.237).  ``"unit"`` (the paper's code,
        doc/specs/grief.md, section 7, item 5): mode 1 and variance 100 for every weight, i.e.
        the prior kernel on the training points is centred at U~ U~', not at the SE kernel;
        with p~ close to n it extrapolates badly (10-fold test RMSE on housing 50.7 against
        3.16 with ``"kernel"``; energy 0.479 against 0.448; yacht 0.224 against 0.143;
        doc/results/grief.md).  The paper used the SVD basis only for n > 1e6, so at smaller
        n it sampled the weights of the plain eigenfunctions, whose w = 1 is the base kernel:
        ``"kernel"`` is the closer match there.
    grid_inputs : ndarray of shape (n_points, n_features), optional
        Further inputs the grids must span, typically the points you will predict at: the grid
        of dimension i is then built from the training column and this column together (range
        and unique values).  Only the inputs are used, never any targets.  A grid that covers
        the prediction region keeps the eigenfunctions from decaying at test points outside
        the training range; the authors' code builds its grid on the training and test inputs.
        It is not always better (10 folds, test inputs as grid_inputs: concreteslump 4.17
        against 4.49 with the training-range grid, housing 3.43 against 3.08, the other small
        sets within 1%; doc/results/grief.md).  None: the training inputs alone.
    n_jobs : int or None
        Threads of the basis, the Gram matrices and the triangular solves (hkern's tiled
        kernels, OpenMP).  BLAS calls made through NumPy/SciPy in the fit and in ``predict``
        run on one thread, so results are bitwise identical for any value.  None: the CPUs
        available, bounded by OMP_NUM_THREADS and an enclosing threadpoolctl limit.
    verbose : bool, default=False
        Print one line per step (the grid, the exact-GP initialisation, the type-II search or
        the type-I sampling) with the seconds since the call started.
    max_memory : int, float or None
        Largest peak memory (bytes) the fit may use; None (default) is the memory available
        now.  The peak (:func:`hkern.grief.api.grief_peak_bytes`: the standardised data, the
        exact-GP initialisation on ``init_subset`` points, p x p matrices and blocks of 4096
        rows of Phi) is estimated before anything large is allocated.

    Returns
    -------
    GriefGP

    Raises
    ------
    ValueError
        For r < 1, grid_size < 2, non-finite X or y, all-constant X, an unknown kernel or
        inference, malformed hyperparameters, a MALA schedule that keeps no sample
        (``thin > n_iter - burn_in``), and grid_inputs that are non-finite or have a
        different number of columns from X.
    hkern.MemoryLimitError
        (a ValueError and a MemoryError) when the estimated peak exceeds ``max_memory``.

    Examples
    --------
    >>> import numpy as np, hkern
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, (300, 3)); y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    >>> gp = hkern.fit_grief(X, y, r=100, grid_size=10, seed=0)
    >>> gp.m_
    1000
    >>> bool(np.sqrt(np.mean((gp.predict(X) - np.sin(X[:, 0])) ** 2)) < 0.1)
    True
    """
    X = check_array(X, "X", min_samples=2)
    y = check_targets(y, X.shape[0], "y")
    if y.ndim != 1:
        if y.shape[1] != 1:
            raise ValueError(f"y must have shape (n_samples,); got {y.shape}. Fit one model per "
                             "output")
        y = y[:, 0].copy()
    n, d_in = X.shape
    # p > n buys no rank on the training points (Phi W Phi' has rank <= n) and costs O(p^3)
    # per likelihood step, so r is reduced to n as every other fit reduces its rank.
    p = check_rank(r, n)
    sizes = _check_grid_size(grid_size, d_in)
    if not isinstance(kernel, str) or kernel.lower() not in KERNELS:
        raise ValueError(f"kernel must be 'gaussian' (SE-ARD, the product kernel GRIEF needs); "
                         f"got {kernel!r}")
    inference = check_parameter("inference", inference)
    w_prior = check_parameter("w_prior", w_prior)
    maxiter = check_parameter("max_iter", max_iter, "fit_grief")
    init_subset = check_parameter("init_subset", init_subset)
    n_restarts = check_parameter("n_restarts", n_restarts)
    optimize_subset = check_parameter("optimize_subset", optimize_subset)
    optimize = check_parameter("optimize", optimize)
    n_iter = check_parameter("n_iter", n_iter)
    burn_in = check_parameter("burn_in", burn_in, n_iter=n_iter)
    thin = check_parameter("thin", thin, n_iter=n_iter, burn_in=burn_in)
    rng = check_seed(seed)
    if grid_inputs is not None:
        grid_inputs = check_array(grid_inputs, "grid_inputs")
        if grid_inputs.shape[1] != d_in:
            raise ValueError(f"grid_inputs must have the {d_in} columns of X; got "
                             f"{grid_inputs.shape[1]}")
    given = _given_hyperparameters(lengthscales, signal_variance, noise, d_in)

    # NumPy/SciPy BLAS calls of the fit run on one thread: OpenBLAS's threaded dot products,
    # eigensolvers and products change their rounding with the thread count.  The O(n p^2)
    # work runs in hkern's tiled kernels and OpenMP loops on n_threads threads, which give
    # the same bits for any count.
    n_threads = budget_threads()
    progress = Progress("fit_grief", verbose)
    with blas_threads(1):
        x_scaler = Standardiser(X)
        if x_scaler.active.size == 0:
            raise ValueError("every column of X is constant on the training set; GRIEF needs at "
                             "least one varying input")
        active = x_scaler.active
        y_scaler = Standardiser(y[:, None], keep_constant=True)
        ys = y_scaler.transform(y[:, None])[:, 0]
        y_mean, y_std = float(y_scaler.mean_[0]), float(y_scaler.std_[0])
        Xs = x_scaler.transform(X)
        span = Xs
        if grid_inputs is not None:
            with np.errstate(over="ignore"):
                span = np.vstack([Xs, x_scaler.transform(grid_inputs)])
        if not np.isfinite(span).all():
            raise ValueError("grid_inputs lie too many standard deviations (of the training "
                             "columns) from X for double precision; drop the far points")
        grids = make_grids(span, sizes[active])
        del span
        m = math.prod(int(g.size) for g in grids)
        d = active.size
        check_memory(
            grief_peak_bytes(n, d, min(p, m), 0 if given else min(n, init_subset),
                             n if optimize_subset is None else min(n, optimize_subset),
                             inference, optimize and maxiter > 0, (n_iter - burn_in) // thin),
            max_memory, what=f"fit_grief with n={n}, d={d}, r={min(p, m)}",
            fix="choose a smaller r" + ("" if given else " or init_subset"))
        progress(f"grid of m = {m} inducing points over {d} inputs, r = {min(p, m)}")
        if given:
            theta0 = _standardised_theta(given, x_scaler, y_std)
        else:
            sub = np.sort(rng.choice(n, size=min(n, init_subset), replace=False))
            theta0 = fit_exact_ard(Xs[sub], ys[sub])
            progress(f"exact-GP initialisation on {len(sub)} points")

        if inference == "type2":
            posterior, lml, record = fit_type2(theta0, Xs, ys, grids, p, rng, optimize, maxiter,
                                               optimize_subset, n_restarts, n_threads)
            theta = record["theta"]
            record["restart_lmls"] = record["restart_lmls"] - n * np.log(y_std)
            progress(f"type-II search: log marginal likelihood {lml - n * np.log(y_std):.6g}")
        else:
            _check_type1_noise(theta0, d, given)
            posterior, lml, record = fit_type1(theta0, Xs, ys, grids, p, rng, n_iter, burn_in,
                                               thin, w_prior, n_threads)
            theta = theta0
            progress(f"type-I sampling: {n_iter} MALA steps")
    ls_out = np.full(d_in, np.inf)
    ls_out[active] = np.exp(theta[:d]) * x_scaler.std_
    return GriefGP(inference=inference, n_features=d_in, active_features=active, n_train=n, m=m,
                   lengthscales=ls_out, signal_variance=float(np.exp(theta[d])) * y_std**2,
                   noise=posterior.noise * y_std**2, posterior=posterior, x_scaler=x_scaler,
                   y_mean=y_mean, y_std=y_std, lml=lml - n * np.log(y_std), n_jobs=n_jobs,
                   **record)


def grief_peak_bytes(n, d, p, init_rows, search_rows, inference, searching, n_kept):
    """Estimated peak bytes of :func:`fit_grief` beyond X and y.

    Doubles alive at the peak: the standardised inputs and targets (n d + n, and one more n d
    for a moment while they are formed), then the largest phase:

    * the exact-GP initialisation on ``init_rows`` points: its kernel matrix, the covariance,
      its Cholesky factor, the inverse (and the identity it is solved from), and the gradient's
      weight matrices, about 7 init_rows^2;
    * type II, with B = min(search rows, 4096) rows of Phi at a time: A = Phi'Phi is
      accumulated beside one product and up to two blocks of Phi (2 p^2 + 2 B p, with
      B = min(n, 4096) for the final model on all rows); an LML
      with gradient holds A, P, its factor, an identity and the factor's inverse (5 p^2),
      and the gradient pass holds A and the factor beside four B x p blocks (Phi, two
      triangular solves, the outer-product weights) and, measured, about one more that the
      allocator keeps from the previous block; without a search only the LML's A, P
      and factor (3 p^2); a search subset is copied (search_rows d);
    * type I: the accumulation as above, then A, its scaled copy, the eigendecomposition's
      copy, vectors and workspace (about 6 p^2), and the kept samples' weights, noise ratios
      and coefficients (about 5 n_kept p).
    """
    B = min(search_rows, BLOCK)
    init = 7 * init_rows * init_rows
    gram = 2 * p * p + 2 * min(n, BLOCK) * p      # the final model is built on all rows
    if inference == "type2" and searching:
        fit = max(gram, 5 * p * p, 2 * p * p + 5 * B * p) + (
            search_rows * d if search_rows < n else 0)
    elif inference == "type2":
        fit = max(gram, 3 * p * p)
    else:
        fit = max(gram, 6 * p * p) + 5 * n_kept * (p + 1)
    return 8 * (n * d + n + max(n * d, init, fit))


def _given_hyperparameters(lengthscales, signal_variance, noise, d_in):
    """(ls (d_in,), s2, noise) in the caller's units, checked; None when none is given."""
    given = [v is not None for v in (lengthscales, signal_variance, noise)]
    if any(given) and not all(given):
        raise ValueError("give all of lengthscales, signal_variance and noise, or none of them "
                         "(then they are initialised by an exact GP on a subset)")
    if not all(given):
        return None
    try:
        ls = np.broadcast_to(np.asarray(lengthscales, dtype=np.float64), (d_in,))
    except (TypeError, ValueError):
        raise ValueError(f"lengthscales must be one positive number or {d_in} (one per column "
                         f"of X), got {lengthscales!r}") from None
    if not np.all(np.isfinite(ls)) or np.any(ls <= 0):
        raise ValueError(f"lengthscales must be finite and > 0, got {lengthscales!r}")
    return (ls, check_parameter("signal_variance", signal_variance),
            check_parameter("noise", noise))


def _standardised_theta(given, x_scaler, y_std):
    """theta0 = [log ls, log s2, log noise] in the units the model works in (standardised)."""
    ls, s2, noise = given
    active = x_scaler.active
    var = np.float64(y_std) ** 2        # NumPy: var(y) may underflow, and s2 / 0 is then inf
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        theta0 = np.concatenate([np.log(ls[active] / x_scaler.std_),
                                 [np.log(s2 / var), np.log(noise / var)]])
    if not np.all(np.isfinite(theta0)):
        raise ValueError("lengthscales, signal_variance or noise are so far from the spread of X "
                         "and y (standard deviations, and var(y) for signal_variance and noise) "
                         "that their ratio does not fit a double; rescale X or y, or give "
                         "hyperparameters in the units of the data")
    return theta0


def _check_type1_noise(theta0, d, given):
    """Type I centres the noise prior at the initial noise: it must lie in the search box."""
    lo, hi = BOUNDS["log_noise"]
    if given is not None and not lo <= theta0[d + 1] <= hi:
        raise ValueError(f"noise is {np.exp(theta0[d + 1]):.3g} var(y); inference='type1' "
                         f"centres the noise prior there and needs it within "
                         f"[{np.exp(lo):g}, {np.exp(hi):g}] var(y) (the box of the type-II "
                         "search); pass a noise in that range")

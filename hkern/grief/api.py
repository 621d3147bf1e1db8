"""Python face of GP-GRIEF: validation, standardisation, type-II / type-I fits, prediction."""
from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.optimize import minimize

from .. import _linalg
from .._memory import check_memory
from .._threads import blas_threads, thread_budget
from .._validation import (
    check_array,
    check_bool,
    check_choice,
    check_int,
    check_n_features,
    check_positive,
    check_seed,
    check_targets,
)
from ._basis import BLOCK, GriefBasis, make_grids
from ._init import BOUNDS, fit_exact_ard
from ._lml import plain_lml, svd_lml, svd_transform
from ._mala import lognormal_params, mala
from ._type2 import type2_lml

__all__ = ["GriefGP", "fit_grief", "grief_peak_bytes"]

# Type-II searches besides the paper's initialisation (see fit_grief, n_restarts).
RESTARTS_DEFAULT = 2

KERNELS = ("gaussian", "rbf")


class GriefGP:
    """A fitted GP-GRIEF model (returned by :func:`fit_grief`).

    Attributes
    ----------
    inference : {"type2", "type1"}
    lengthscales_ : (d,) ndarray
        SE-ARD lengthscales in the original units of X (``inf`` for ignored constant columns).
    signal_variance_ : float
        Kernel amplitude s2, in the original units of y.
    noise_ : float
        Noise variance, in the original units of y (type I: the posterior mean of the sampled
        noise).
    active_features_ : ndarray of int
        Columns of X the model uses (constant training columns are ignored).
    p_ : int
        Number of basis functions, min(p, m).
    m_ : int
        Number of grid points prod(mbar_i) (a Python int; may be astronomically large).
    restart_lmls_, restart_thetas_, restart_ : ndarray, ndarray, int
        Type II only: the training LML (original units of y, as
        :meth:`log_marginal_likelihood`) and the log-parameters [log ls, log s2, log noise]
        (standardised units) at the end of each search, and the index of the one kept (the
        largest LML).  Order: the search from the paper's initialisation, then (when
        ``screened_``) the one from the same point with the unresolved inputs switched off,
        then the ``n_restarts`` random restarts.  With one search and ``optimize_subset`` the
        LML is not evaluated on all points and is nan.
    screened_ : bool
        Type II only: whether some inputs had an initial lengthscale below the smallest gap of
        their grid, so that a search with them switched off was added (see ``n_restarts``).
    acceptance_rate_, samples_ : float, ndarray
        Type I only: MALA acceptance rate after burn-in and the kept samples of
        [log w, log noise] (standardised units).
    """

    def __init__(self, **state):
        self.__dict__.update(state)

    # -- prediction ------------------------------------------------------------------------
    def _standardise(self, X):
        X = check_n_features(X, self.n_features_in_)
        with np.errstate(over="ignore"):
            # A point beyond double precision in standard deviations is infinitely far: every
            # basis function is 0 there, and the prediction is the prior.
            return self._x_scaler.transform(X)

    def predict(self, X, *, return_std=False, include_noise=False):
        """Predictive mean (and standard deviation) at X.

        The same face as the kernel ridge models that are GPs (``hkern.fit_exact``,
        ``fit_hierarchical``, ``fit_independent``): the latent f by default, the noise with
        ``include_noise``.

        Parameters
        ----------
        X : ndarray of shape (n_test, n_features)
        return_std : bool, default=False
            Also return the predictive standard deviation.
        include_noise : bool, default=False
            With ``return_std``: the standard deviation of y* (latent variance + noise) instead
            of that of the latent f*.

        Returns
        -------
        mean : ndarray of shape (n_test,)
        std : ndarray of shape (n_test,), only with ``return_std``
            The square root of the predictive variance, in the units of y.  Type II:
            V[f*] = noise phi*' P^-1 phi* (doc/specs/grief.md, section 3).  Type I:
            E[V] + Var[mean] over the MCMC samples.  With ``include_noise``, V[f*] + ``noise_``.

        Examples
        --------
        >>> import numpy as np, hkern
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(-2, 2, (200, 2)); y = np.sin(X[:, 0]) * np.cos(X[:, 1])
        >>> gp = hkern.fit_grief(X, y + 0.05 * rng.normal(size=200), r=50, grid_size=8, seed=0)
        >>> mean, std = gp.predict(X[:5], return_std=True)
        >>> bool(np.all(std >= 0)) and mean.shape == (5,)
        True
        """
        return_std = check_bool(return_std, "return_std")
        include_noise = check_bool(include_noise, "include_noise")
        Xs = self._standardise(X)
        with thread_budget(self.n_jobs) as n_threads, blas_threads(1):
            # BLAS calls made through NumPy run on one thread (their results can change with
            # the thread count); the large products go through hkern's tiled kernels on
            # n_threads OpenMP threads, which are bitwise equal for any count.
            return self._predict(Xs, return_std, include_noise, n_threads)

    def _predict(self, Xs, return_std, include_noise, n_threads):
        """Mean, and with ``return_std`` the predictive standard deviation, in y's units."""
        means, vars_ = [], []
        for _, Phi in self._basis.phi_blocks(Xs, n_threads):
            if self.inference == "type2":
                means.append(_linalg.matvec(Phi, self._beta))
                if return_std:
                    T = _linalg.solve_triangular(self._L, Phi.T.copy(), lower=True)
                    vars_.append(self._noise_s * np.einsum("ij,ij->j", T, T))
            else:
                Pt = _linalg.matmul(Phi, self._V, n_threads=n_threads) / self._s
                m = Pt @ self._coef_mean
                means.append(m)
                if return_std:
                    e_var = (Pt**2) @ self._var_weights
                    spread = _linalg.matmul(Pt, self._coef_samples, trans_b=True,
                                            n_threads=n_threads) - m[:, None]
                    vars_.append(e_var + np.mean(spread**2, axis=1))
        mean = np.concatenate(means) * self._y_std + self._y_mean
        if not return_std:
            return mean
        # Standardised units, then scaled by std(y): var * std(y)^2 could underflow (y ~ 1e-300)
        # where the standard deviation itself is a normal number.
        var = np.concatenate(vars_)
        if include_noise:
            var = var + self._noise_s
        return mean, np.sqrt(var) * self._y_std

    def log_marginal_likelihood(self):
        """log p(y | hyperparameters) of the fitted model, in the original units of y.

        The log density of the training targets under the fitted GP, the same meaning as the
        ``log_marginal_likelihood()`` of the kernel ridge models that are GPs
        (:func:`hkern.fit_exact`, :func:`hkern.fit_hierarchical`): there the prior mean is 0,
        here the training mean of y (a fixed offset).  Type II: the eq. 3 kernel
        s2 Phi Phi' + noise I at the fitted hyperparameters.  Type I: the SVD-basis model at
        the posterior-mean weights and noise.  The Jacobian of the scaling of y, -n log(std y),
        is included so the value is the density of y itself.  The model does not keep the
        training inputs, so it is not evaluated at other targets.

        Examples
        --------
        >>> import numpy as np, hkern
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 3)); y = X[:, 0] + 0.1 * rng.normal(size=100)
        >>> bool(np.isfinite(hkern.fit_grief(X, y, r=30, seed=0).log_marginal_likelihood()))
        True
        """
        return self._lml_s - self.n_train_ * np.log(self._y_std)

    def __repr__(self):
        return (f"GriefGP(inference={self.inference!r}, p={self.p_}, m={_short(self.m_)}, "
                f"d={self.n_features_in_})")


def _short(m):
    return str(m) if m < 10**6 else f"~1e{len(str(m)) - 1}"


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


def fit_grief(X, y, r=1000, *, kernel="gaussian", seed=None, n_jobs=None, grid_size=10,
              inference="type2", lengthscales=None, signal_variance=None, noise=None,
              optimize=True, max_iter=200, optimize_subset=None, init_subset=1000,
              n_restarts=RESTARTS_DEFAULT, n_iter=10_000, burn_in=1000, thin=50,
              w_prior="kernel", grid_inputs=None, max_memory=None):
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

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    r : int, default=1000
        Number of basis functions, the paper's p (capped at m).
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
    p = check_int(r, "r", low=1, hint="r is the number of basis functions (the paper's p)")
    sizes = _check_grid_size(grid_size, d_in)
    if not isinstance(kernel, str) or kernel.lower() not in KERNELS:
        raise ValueError(f"kernel must be 'gaussian' (SE-ARD, the product kernel GRIEF needs); "
                         f"got {kernel!r}")
    inference = check_choice(inference, "inference", ("type2", "type1"))
    w_prior = check_choice(w_prior, "w_prior", ("unit", "kernel"))
    maxiter = check_int(max_iter, "max_iter", low=0)
    init_subset = check_int(init_subset, "init_subset", low=2)
    n_restarts = check_int(n_restarts, "n_restarts", low=0)
    if optimize_subset is not None:
        optimize_subset = check_int(optimize_subset, "optimize_subset", low=2)
    optimize = check_bool(optimize, "optimize")
    n_iter = check_int(n_iter, "n_iter", low=1)
    burn_in = check_int(burn_in, "burn_in", low=0, high=n_iter - 1,
                        hint="burn_in must leave some iterations to keep")
    kept = n_iter - burn_in
    thin = check_int(thin, "thin", low=1, high=kept,
                     hint=f"MALA keeps every thin-th of the n_iter - burn_in = {kept} iterations "
                          "after burn-in, so thin above that keeps no sample; lower thin or "
                          "raise n_iter")
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
    with thread_budget(n_jobs) as n_threads, blas_threads(1):
        x_scaler = _Standardiser(X)
        if x_scaler.active.size == 0:
            raise ValueError("every column of X is constant on the training set; GRIEF needs at "
                             "least one varying input")
        active = x_scaler.active
        y_scaler = _Standardiser(y[:, None], keep_constant=True)
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
                             inference, optimize and maxiter > 0, kept // thin),
            max_memory, what=f"fit_grief with n={n}, d={d}, r={min(p, m)}",
            fix="choose a smaller r" + ("" if given else " or init_subset"))
        if given:
            theta0 = _standardised_theta(given, x_scaler, y_std)
        else:
            sub = np.sort(rng.choice(n, size=min(n, init_subset), replace=False))
            theta0 = fit_exact_ard(Xs[sub], ys[sub])

        state = {"inference": inference, "n_features_in_": d_in, "active_features_": active,
                 "n_train_": n, "m_": m, "n_jobs": n_jobs, "_x_scaler": x_scaler,
                 "_y_mean": y_mean, "_y_std": y_std}
        if inference == "type2":
            state.update(_type2(theta0, Xs, ys, grids, p, rng, optimize, maxiter,
                                optimize_subset, n_restarts, n_threads))
            theta = state["theta_"]
            state.update(restart_lmls_=state["restart_lmls_"] - n * np.log(y_std),
                         noise_=state["_noise_s"] * y_std**2,
                         signal_variance_=float(np.exp(theta[d])) * y_std**2)
        else:
            _check_type1_noise(theta0, d, given)
            state.update(_type1(theta0, Xs, ys, grids, p, rng, n_iter, burn_in, thin, w_prior,
                                n_threads))
            state["noise_"] = state["_noise_s"] * y_std**2
            state["signal_variance_"] = float(np.exp(theta0[d])) * y_std**2
            theta = theta0
    ls_out = np.full(d_in, np.inf)
    ls_out[active] = np.exp(theta[:d]) * x_scaler.std_
    state.update(lengthscales_=ls_out, p_=state["_basis"].p)
    return GriefGP(**state)


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


class _Standardiser:
    """Column means and standard deviations, computed at an exact power-of-two scale.

    Each column is multiplied by 2^k with its largest magnitude in [0.5, 1) when that magnitude
    is outside [2^-100, 2^100] (k = 0 otherwise, so ordinary data are treated exactly as
    ``(A - A.mean(0)) / A.std(0)``).  Multiplying by a power of two is exact, and it keeps the
    squares inside the statistics from underflowing (columns near 1e-300 had std 0 and were
    taken for constant) or overflowing.  Constant columns are found exactly (max == min): the
    rounding of a mean could give a constant column such as 3e100 a standard deviation of 1e84.

    Attributes
    ----------
    active : ndarray of int
        The non-constant columns (every column with ``keep_constant``: a constant one then gets
        k = 0 and standard deviation 1).
    mean_, std_ : ndarray
        Per active column, in the caller's units.
    """

    SAFE = (2.0**-100, 2.0**100)

    def __init__(self, A, keep_constant=False):
        high, low = A.max(axis=0), A.min(axis=0)
        constant = high == low
        self.active = np.arange(A.shape[1]) if keep_constant else np.flatnonzero(~constant)
        top = np.maximum(high, -low)[self.active]
        constant = constant[self.active]
        safe = constant | ((top >= self.SAFE[0]) & (top <= self.SAFE[1]))
        self.k = np.where(safe, 0, np.clip(-np.frexp(top)[1], -1022, 1023)).astype(np.intc)
        # C order: A[:, active] is Fortran-ordered, and the column sums would then be taken in
        # another order than A.mean(axis=0) takes them.
        scaled = np.ldexp(A[:, self.active], self.k, order="C")
        self.mean_s = scaled.mean(axis=0)
        self.std_s = np.where(constant, 1.0, scaled.std(axis=0))
        self.mean_ = np.ldexp(self.mean_s, -self.k)
        self.std_ = np.ldexp(self.std_s, -self.k)

    def transform(self, A):
        """(2^k A[:, active] - mean) / std (scaled statistics), C-contiguous."""
        Z = np.ldexp(A[:, self.active], self.k, order="C")
        Z -= self.mean_s
        Z /= self.std_s
        return np.ascontiguousarray(Z)


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
    return (ls, check_positive(signal_variance, "signal_variance"),
            check_positive(noise, "noise"))


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


def _type2(theta0, Xs, ys, grids, p, rng, optimize, maxiter, optimize_subset, n_restarts,
           n_threads):
    """Type-II fit: the searches (see fit_grief, n_restarts), the best kept, the final model."""
    n, d = Xs.shape
    search = None
    if optimize_subset is not None and optimize_subset < n:
        search = np.sort(rng.choice(n, size=optimize_subset, replace=False))
    Xq, yq = (Xs, ys) if search is None else (Xs[search], ys[search])
    searching = optimize and maxiter > 0
    starts = [theta0]
    screened = _screened_start(theta0, grids) if searching else None
    if screened is not None:
        starts.append(screened)
    # Drawn after the subsets so that n_restarts=0 reproduces the single-search stream.
    starts += [np.concatenate([theta0[:d] + rng.standard_normal(d), theta0[d:]])
               for _ in range(n_restarts if searching else 0)]
    thetas, lmls = [], []
    for start in starts:
        theta, lml = _optimise_type2(start, Xq, yq, grids, p, optimize, maxiter, n_threads)
        if search is not None:
            lml = np.nan
        if len(starts) > 1 and not np.isfinite(lml):
            # Compare the candidates on all training points, not on the search subset.
            lml = type2_lml(theta, Xs, ys, grids, p, grad=False, n_threads=n_threads)[0]
        thetas.append(theta)
        lmls.append(float(lml))
    best = int(np.nanargmax(lmls)) if len(starts) > 1 else 0
    theta = thetas[best]
    lml, _, basis, L, beta = type2_lml(theta, Xs, ys, grids, p, grad=False, n_threads=n_threads)
    return dict(restart_lmls_=np.array(lmls), restart_thetas_=np.array(thetas), restart_=best,
                screened_=screened is not None, _basis=basis, _L=L, _beta=beta,
                _noise_s=float(np.exp(theta[d + 1])), _lml_s=float(lml), theta_=theta)


def _bounds(d):
    return [BOUNDS["log_ls"]] * d + [BOUNDS["log_s2"], BOUNDS["log_noise"]]


def _screened_start(theta0, grids):
    """theta0 with the inputs its grid does not resolve switched off (lengthscale at its upper
    bound), or None when every input is resolved.

    An input whose lengthscale is below the smallest gap of its grid has a flat 1-D grid
    spectrum (K^(i) ~ I), so nearly every one of its mbar_i eigenfunctions ties with the first
    and Algorithm 1 spends the p slots on their products.  The exact-GP initialisation on a
    subset can leave such lengthscales where the subset barely sees an input: on
    keggundirected split 0 three sparse inputs (99.5% of the values equal, the rest up to 52
    standard deviations away; 4 to 5 off-mode values in the 1000 points) kept lengthscale ~1
    against grid gaps of 5.8 and 10.7.  The LML on all points was -63 000 after the amplitude
    re-fit and the search from there could not leave it (test RMSE 0.62); with the three
    inputs off it is +38 500 before any search (RMSE 0.117, the paper 0.118).  The switched-off
    start is an extra search, not a replacement: a switched-off input stays off (the LML is
    flat there), and on breastcancer the search from the plain start ends higher on 4 of 10
    folds.
    """
    d = len(grids)
    gaps = np.array([np.min(np.diff(g)) for g in grids])
    unresolved = np.exp(theta0[:d]) < gaps
    if not unresolved.any():
        return None
    off = theta0.copy()
    off[:d][unresolved] = BOUNDS["log_ls"][1]
    return off


def _optimise_type2(theta0, X, y, grids, p, optimize, maxiter, n_threads):
    """L-BFGS-B on -LML / n (scaled so the tolerances do not depend on n), from theta0 clipped
    to the bounds, with s2 and the noise re-fitted first.

    Returns (theta, lml): the best point evaluated and its LML on (X, y) (nan when no search ran).
    """
    if not optimize or maxiter == 0:
        return theta0, np.nan
    n, d = X.shape
    bounds = _bounds(d)
    theta0 = np.clip(theta0, [b[0] for b in bounds], [b[1] for b in bounds])
    theta0 = _refit_amplitudes(theta0, X, y, grids, p, bounds[d:], n_threads)
    best = {"f": np.inf, "x": theta0}

    def neg(theta):
        lml, g, *_ = type2_lml(theta, X, y, grids, p, n_threads=n_threads)
        if -lml < best["f"]:
            best.update(f=-lml, x=theta.copy())
        return -lml / n, -g / n

    minimize(neg, theta0, jac=True, method="L-BFGS-B", bounds=bounds,
             options={"maxiter": maxiter})
    # The LML is piecewise smooth (the index set is discrete): keep the best point seen.
    return best["x"], -best["f"]


def _refit_amplitudes(theta, X, y, grids, p, bounds, n_threads):
    """Re-fit s2 and the noise at the initial lengthscales before the full search.

    The exact-GP initial noise is often far too small for the rank-p kernel (the residual the
    basis cannot represent must be explained as noise); starting the full search there let it
    slide into the "everything is noise" optimum on yacht.  With the lengthscales fixed, Phi is
    fixed, so this 2-parameter search costs O(p^3) per step after one O(n p^2) Gram matrix.
    """
    n, d = X.shape
    basis = GriefBasis(grids, np.exp(theta[:d]), p)
    A, r = basis.gram(X, y, n_threads)
    yy = float(y @ y)

    def neg(t):
        s2, noise = np.exp(t)
        lml, dw, dnoise, _, _ = plain_lml(yy, r, A, n, np.full(basis.p, s2), noise)
        return -lml / n, -np.array([s2 * dw.sum(), noise * dnoise]) / n

    res = minimize(neg, theta[d:], jac=True, method="L-BFGS-B", bounds=bounds)
    return np.concatenate([theta[:d], res.x])


def _type1(theta0, X, y, grids, p, rng, n_iter, burn_in, thin, w_prior, n_threads):
    """MALA over [log w, log noise] in the SVD basis at fixed lengthscales theta0[:d]."""
    n, d = X.shape
    basis = GriefBasis(grids, np.exp(theta0[:d]), p)
    A, r = basis.gram(X, y, n_threads)
    s, V, uy = svd_transform(np.exp(theta0[d]) * A, np.sqrt(np.exp(theta0[d])) * r)
    # The amplitude s2 is folded into Phi (fixed, doc/specs/grief.md, 7.2); the SVD basis
    # absorbs it anyway.
    V = V * np.sqrt(np.exp(theta0[d]))
    rho = uy**2
    noise0 = float(np.exp(theta0[d + 1]))
    mu_w, s2_w = lognormal_params(1.0, 100.0)
    mu_n, s2_n = lognormal_params(noise0, 0.04)
    pt = s.size
    # "kernel": mode s_i^2 with the paper's log-spread; the log-normal with mode M has
    # mu = log M + s2 for a fixed log-variance s2 (doc/specs/grief.md, section 4).
    mu_ws = np.full(pt, mu_w) if w_prior == "unit" else 2.0 * np.log(s) + s2_w
    mu = np.concatenate([mu_ws, [mu_n]])
    s2 = np.concatenate([np.full(pt, s2_w), [s2_n]])
    yy = float(y @ y)
    samples, acc, step = mala(yy, rho, n, mu, s2, rng, n_iter, burn_in, thin)
    w, noise = np.exp(samples[:, :-1]), np.exp(samples[:, -1])
    coef = uy * w / (w + noise[:, None])                      # per-sample mean coefficients
    w_mean, noise_mean = w.mean(axis=0), float(noise.mean())
    lml = svd_lml(yy, rho, n, w_mean, noise_mean, grad=False)[0]
    return {"_basis": basis, "_V": V, "_s": s, "_coef_mean": coef.mean(axis=0),
            "_coef_samples": coef,
                "_var_weights": np.mean(w * noise[:, None] / (w + noise[:, None]), axis=0),
                "_noise_s": noise_mean, "_lml_s": float(lml), "samples_": samples,
                "acceptance_rate_": float(acc), "mala_step_": step}

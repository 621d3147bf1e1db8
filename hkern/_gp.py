"""The Gaussian-process face of the kernel ridge models that are GP posteriors.

Every regression fit models each output column y_j as a constant mean mu_j (the training mean,
hkern._targets) plus a zero-mean GP with signal variance s2_j, observed with noise:

    y_j = mu_j + f_j + noise,   f_j ~ GP(0, s2_j k),   noise ~ N(0, s2_j lam I),

so the centred targets have covariance s2_j A, A = K + lam I.  Kernel ridge regression with
kernel k and ridge lam is that model's posterior mean whatever s2_j (it scales the kernel and
the noise together); s2_j is estimated by maximum likelihood, s2_j = y_j^T A^{-1} y_j / n
(y_j centred), the maximum the hyperparameter selection's profiled likelihood takes
(:meth:`Evidence.profiled_lml`), and every fit has y_j^T A^{-1} y_j from its solve
(:class:`Evidence`).  Exact KRR (k the kernel), HCK (k the hierarchical kernel k_hier' of the
jittered base kernel; A = K_hier' + (lam - lam') I, the jitter lam' on the training diagonal
being part of lam, so that A's diagonal is k(x_i, x_i) + lam) and the independent kernel (k
block-diagonal on the leaves) are such models; Nystrom and random features are the GP of their
approximate kernel (:mod:`hkern.nystrom.model`, :mod:`hkern.features.model`).
:class:`GaussianProcessKRR` gives them the methods GRIEF's :class:`hkern.grief.GriefGP` has,
with one meaning:

* ``predict(X, return_std=True)``: the posterior mean mu_j + k(x, X) A^{-1} y_j and the
  posterior standard deviation of the latent mu_j + f_j(x),
  sqrt(s2_j (k(x, x) - k(x, X) A^{-1} k(X, x))), in the units of y; ``include_noise=True``
  adds the noise variance of a new target, s2_j lam.  ``return_cov`` and ``sample_y`` as in
  scikit-learn's ``GaussianProcessRegressor``.
* ``log_marginal_likelihood()``: log p(y_train | hyperparameters, mu, s2) at the fitted mean
  and signal variance, log N(y - mu | 0, s2 A) in the units of y, summed over the columns of a
  2-D y (outputs are independent GPs sharing the kernel); ``log_marginal_likelihood(y)``
  evaluates the fitted model's density at other targets y.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from . import _linalg
from ._targets import exact_sums
from ._threads import budget_threads, budgeted
from ._validation import check_bool, check_int, check_rhs, check_seed

__all__ = ["Evidence", "GaussianProcessKRR", "MarginalLikelihood",
           "ProfiledRidge", "best_ridge", "column_quads", "gaussian_lml",
           "likelihood_needs_training_inputs", "profiled_gaussian_lml"]


def gaussian_lml(quad, logdet, n, k):
    """log N(Y | 0, A) summed over the k columns of Y (n, k), from quad = sum(Y * A^{-1} Y)
    and logdet = log det A: -quad / 2 - k logdet / 2 - k n log(2 pi) / 2."""
    return float(-0.5 * quad - 0.5 * k * logdet - 0.5 * k * n * math.log(2.0 * math.pi))


@dataclass(frozen=True)
class Evidence:
    """What a Gaussian log-likelihood of the targets needs: quad[j] = y_j^T A^{-1} y_j for each
    column y_j of Y (n, k), and logdet = log det A, A = K + lam I the model's target covariance.

    A fit that solves with A has both at no extra cost (exact KRR, HCK, the independent kernel,
    and Nystrom and random features, whose A = Phi Phi^T + lam I through Woodbury); an
    iterative solver has quad from its answer (y^T alpha) but no log-determinant (None).
    """

    quad: np.ndarray
    logdet: float | None
    n: int

    def signal_variance(self):
        """The maximum-likelihood signal variance of each column, s2_j = quad_j / n (0 for a
        zero column)."""
        return np.maximum(np.asarray(self.quad, dtype=float), 0.0) / max(self.n, 1)

    def lml(self, signal_variance=None):
        """log N(y_j | 0, s2_j A), summed over the columns y_j; ``signal_variance`` (k,) the
        s2_j, None: 1 (the kernel's own scale)."""
        if signal_variance is None:
            return gaussian_lml(float(np.sum(self.quad)), self.logdet, self.n, len(self.quad))
        s2 = np.asarray(signal_variance, dtype=float)
        if not (s2 > 0).all():
            raise ValueError("an output of y is constant (its training mean everywhere), so "
                             "its fitted signal variance is 0 and the likelihood is a point "
                             "mass: drop the constant column, or compare fits of it by their "
                             "error on held-out data")
        with np.errstate(divide="ignore"):
            per_column = -0.5 * np.asarray(self.quad) / s2 - 0.5 * self.n * np.log(s2)
        return float(np.sum(per_column)) + gaussian_lml(0.0, self.logdet, self.n,
                                                         len(self.quad))

    def profiled_lml(self):
        """max over s2_j of log N(y_j | 0, s2_j A), summed over the columns y_j.

        The signal variance scales the kernel and the noise together, so it leaves the ridge
        predictor unchanged; at its optimum s2_j = quad_j / n this is
        -n/2 log(quad_j / n) - logdet / 2 - n/2 (1 + log 2 pi).  Unlike ``lml`` it does not
        depend on the units of y, which is what makes it a criterion for sigma and lam: on
        kin40k (HCK, r = 512) it ranks lam as the test error does and ``lml`` does not.
        """
        quad = np.asarray(self.quad, dtype=float)
        if not (quad > 0).all():
            return -math.inf        # a zero target column has no scale to profile
        return float(profiled_gaussian_lml(quad, self.logdet, self.n))


def profiled_gaussian_lml(quad, logdet, n):
    """sum_j [-n/2 log(quad_j / n) - logdet / 2 - n/2 (1 + log 2 pi)] over the last axis of
    ``quad`` (``logdet`` broadcast against it): :meth:`Evidence.profiled_lml`, for one
    covariance or (with a leading axis) several."""
    per_column = -0.5 * n * np.log(quad / n) - 0.5 * logdet \
        - 0.5 * n * (1.0 + math.log(2.0 * math.pi))
    return np.sum(per_column, axis=-1)


@dataclass(frozen=True)
class ProfiledRidge:
    """A ``lam`` that asks a fit to choose the ridge itself, in [low, high].

    The fits that solve ridge regression on explicit features (Nystrom, random features) hold,
    before any ridge is added, the Gram matrix whose eigendecomposition gives the profiled
    likelihood (:meth:`Evidence.profiled_lml`) of *every* lam at O(p) each
    (:func:`best_ridge`); they accept this object for ``lam`` and fit at the best lam, which
    becomes the model's ``lam``.  The hyperparameter selection uses it: one fit per bandwidth
    instead of one per (bandwidth, lam) pair.
    """

    low: float = 1e-8
    high: float = 1e2


# Points per decade of the grid in log lam that brackets the best ridge before Brent's method
# refines it: the profiled likelihood is smooth and its optimum spans factors of 2 or more.
_RIDGE_GRID_PER_DECADE = 20


def best_ridge(eigenvalues, projections, energy, n, low, high):
    """The lam in [low, high] maximising the profiled Gaussian likelihood of targets Y (n, k)
    under A = G + lam I, for G symmetric positive semi-definite.

    Parameters
    ----------
    eigenvalues : ndarray (q,)
        The eigenvalues s_i > 0 of G that are not zero (at most n).
    projections : ndarray (q, k)
        c_ij = (v_i^T y_j)^2, the squared projection of each target column on the eigenvector
        of s_i.
    energy : ndarray (k,)
        y_j^T y_j.
    n : int
    low, high : float
        The interval searched, 0 < low <= high.

    Returns
    -------
    float

    Notes
    -----
    y_j^T A^{-1} y_j = sum_i c_ij / (s_i + lam) + (y_j^T y_j - sum_i c_ij) / lam and
    log det A = sum_i log(s_i + lam) + (n - q) log lam: each lam costs O(q k).  A grid of
    20 points per decade finds the best bracket, Brent's method (scipy's bounded scalar
    minimiser) the optimum within it to 1e-4 in log lam.
    """
    s = np.asarray(eigenvalues, dtype=float)
    c = np.asarray(projections, dtype=float).reshape(len(s), -1)
    outside = np.maximum(np.asarray(energy, dtype=float) - c.sum(axis=0), 0.0)
    n_zero = n - len(s)

    def criterion(log_lams):
        lams = np.exp(np.atleast_1d(log_lams))[:, None]
        quad = (1.0 / (s[None, :] + lams)) @ c + outside[None, :] / lams
        logdet = np.log(s[None, :] + lams).sum(axis=1) + n_zero * np.log(lams[:, 0])
        with np.errstate(divide="ignore"):
            value = profiled_gaussian_lml(quad, logdet[:, None], n)
        return np.where(np.isfinite(value), value, -np.inf)

    lo, hi = math.log(low), math.log(high)
    if hi <= lo:
        return float(low)
    grid = np.linspace(lo, hi, max(3, int(round((hi - lo) / math.log(10.0)
                                                * _RIDGE_GRID_PER_DECADE)) + 1))
    values = criterion(grid)
    i = int(np.argmax(values))
    bracket = (grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)])
    refined = minimize_scalar(lambda t: -criterion(t)[0], bounds=bracket, method="bounded",
                              options={"xatol": 1e-4})
    best = refined.x if -refined.fun > values[i] else grid[i]
    if best <= lo or best >= hi:            # an end of the interval, exactly
        return float(low if best <= lo else high)
    return float(min(max(math.exp(best), low), high))


def column_quads(Y, alpha):
    """quad[j] = Y[:, j] . alpha[:, j] for alpha = A^{-1} Y: the per-output y^T A^{-1} y,
    summed exactly (hkern._targets.exact_sums): the same bits for any order or split of the
    rows, so that a fit on MPI shards has the serial signal variance and likelihood."""
    return exact_sums(np.asarray(Y) * np.asarray(alpha)).sum()


def likelihood_needs_training_inputs(model, kept):
    """The error of ``log_marginal_likelihood(y)`` on a model that keeps ``kept`` instead of
    its training inputs: its likelihood is known at the training targets only."""
    return ValueError(f"{type(model).__name__} keeps {kept}, not its training inputs, so its "
                      "likelihood is known at the training targets only: call "
                      "log_marginal_likelihood() without y")


class MarginalLikelihood:
    """Mixin: ``log_marginal_likelihood(y=None)`` of a kernel ridge model whose fit solved with
    its target covariance A and kept the :class:`Evidence` (put it before
    :class:`hkern._model.KernelRidgeModel` in the bases).

    The Gaussian-process models, which keep their training inputs
    (:class:`GaussianProcessKRR`), implement ``_evidence_at(Y, max_memory)`` (the
    :class:`Evidence` of other centred targets Y (n, k)).  The feature models (Nystrom, random
    features: A = Phi Phi^T + lam I) keep only their features' weights, so they know the
    likelihood of the training targets alone.
    """

    # What a user can do when an iterative fit left no log-determinant, and on a classifier.
    _NO_EVIDENCE_FIX = ("fit with the direct solver (solver='direct') for the likelihood, or "
                        "compare fits by their error on held-out data")
    _LABELS_FIX = "fit real-valued targets (e.g. the +-1 encoding of the labels) as a regression"

    @budgeted
    def log_marginal_likelihood(self, y=None, *, max_memory=None):
        """GP log marginal likelihood log p(y | hyperparameters) = log N(y - mu | 0, s2 A).

        mu is the fitted mean (``y_mean_``), s2 the signal variance (``signal_variance_``) and
        A = K + lam I, K the model's kernel matrix on the training inputs (for HCK
        A = K_hier' + (lam - lam') I, whose leaf diagonal blocks are K + lam I; for Nystrom and
        random features A = Phi Phi^T + lam I, Phi the training inputs' features):
        -1/2 (y - mu)^T A^{-1} (y - mu) / s2 - n/2 log s2 - 1/2 log det A - n/2 log(2 pi), in
        the units of y, summed over the columns of a 2-D y.  At the training targets s2 is its
        maximum-likelihood value, so this is the profiled likelihood the hyperparameter
        selection maximises.  The same meaning as
        :meth:`hkern.grief.GriefGP.log_marginal_likelihood`.  On a classifier (``y`` given):
        log N(y | 0, A), the kernel's own scale and no mean.

        Parameters
        ----------
        y : array_like (n,) or (n, k), optional
            Targets in training order, evaluated under the fitted model (its mean and signal
            variance).  None (default): the training targets, from the fit (no extra work).
        max_memory : int or None
            With ``y``: most bytes the evaluation may allocate; None: the memory available when
            the call starts.

        Raises
        ------
        ValueError
            With ``y`` on a model that keeps no training inputs (Nystrom, random features).
            With ``y=None`` after an iterative solver (no log-determinant was computed), or on
            a classifier: class labels have no Gaussian likelihood (pass ``y``, e.g. their +-1
            one-vs-rest encoding, where the model keeps its training inputs).
        """
        if y is None:
            self._require_regression("log_marginal_likelihood()", self._LABELS_FIX)
            if self._evidence is None or self._evidence.logdet is None:
                raise ValueError("this model was fitted by an iterative solver, which computes "
                                 f"no log-determinant; {self._NO_EVIDENCE_FIX}")
            return self._evidence.lml(self._evidence.signal_variance())
        n = self._n_train()
        Y = self._checked_targets(y, max_memory).reshape(n, -1)
        if self.encoding_.task != "regression":
            return self._evidence_at(np.ascontiguousarray(Y), max_memory).lml()
        mean, s2 = self.encoding_.offset, self._signal_variances()
        if len(mean) == 1:      # one fitted output: its mean and variance for every column
            mean, s2 = np.repeat(mean, Y.shape[1]), np.repeat(s2, Y.shape[1])
        elif Y.shape[1] != len(mean):
            raise ValueError(f"y has {Y.shape[1]} column(s) but the model was fitted on "
                             f"{len(mean)} outputs: pass one column per output (or fit one)")
        return self._evidence_at(np.ascontiguousarray(Y - mean), max_memory).lml(s2)

    def _require_regression(self, call, fix):
        if self.encoding_.task != "regression":
            raise ValueError(f"{call} is defined for regression, but this model was fitted with "
                             f"task='classification' (its predictions are class labels); {fix}")

    def _n_train(self):
        """The number of training rows (of the targets a likelihood is evaluated at)."""
        return self._evidence.n

    def _checked_targets(self, y, max_memory):
        """Targets y for ``log_marginal_likelihood(y)``, checked: float64 (n,) or (n, k)."""
        return check_rhs(y, self._n_train(), "y")

    def _signal_variances(self):
        """s2_j per output column (k,), from the fit's y^T A^{-1} y."""
        return self._evidence.signal_variance()

    def _evidence_at(self, Y, max_memory):
        raise likelihood_needs_training_inputs(self, "the weights of its features")


# scikit-learn's GaussianProcessRegressor adds this to the diagonal of a posterior covariance
# before factorising it for samples; rounding makes it indefinite at that level.
_SAMPLE_JITTER = 1e-10


class GaussianProcessKRR(MarginalLikelihood):
    """Mixin: ``predict(X, return_std=..., return_cov=...)``, ``sample_y`` and
    ``log_marginal_likelihood(y=None)`` of a kernel ridge model (put it before
    :class:`hkern._model.KernelRidgeModel` in the bases).

    Subclasses are constructed with ``evidence`` (an :class:`Evidence` of the centred training
    targets, computed by the fit from the quantities it already has; see
    :class:`hkern._model.KernelRidgeModel`) and implement
    ``_latent_variance(X, n_threads, max_memory)`` (the posterior variance of f at validated X
    under the unit-amplitude kernel, shape (m,), unclipped), ``_evidence_at(Y, max_memory)``
    (the :class:`Evidence` of other centred targets) and, for ``return_cov`` and
    ``sample_y``, ``_latent_covariance(X, n_threads, max_memory)`` ((m, m), unit amplitude).
    """

    _NO_EVIDENCE_FIX = "pass the training targets as y to evaluate it by a factorisation"
    _LABELS_FIX = "pass y (e.g. the +-1 one-vs-rest encoding of the labels)"
    # Why the model has no posterior covariance between points (subclasses that have one
    # implement _latent_covariance).
    _NO_COVARIANCE = "this model"

    def predict(self, X, *, return_std=False, return_cov=False, include_noise=False,
                max_memory=None):
        """Predictions at X, and the posterior standard deviation or covariance.

        Parameters
        ----------
        X : array_like (m, d)
        return_std : bool, default=False
            Also return the standard deviation of the GP posterior at X (regression only), in
            the units of y.
        return_cov : bool, default=False
            Also return the posterior covariance between the m points (m x m per output;
            regression only).  Not with ``return_std``.
        include_noise : bool, default=False
            With ``return_std`` or ``return_cov``: of a new target y = mu + f(x) + noise
            (noise variance ``noise_``) instead of the latent mu + f(x).
        max_memory : int or None
            With ``return_std`` or ``return_cov``: most bytes the variance may allocate; None:
            the memory available when the call starts.  The mean alone allocates O(m k) plus
            per-thread buffers and is not checked.

        Returns
        -------
        y_pred : ndarray (m,) or (m, k)
            Predicted outputs (regression) or class labels (classification).
        y_std : ndarray (m,) or (m, k), only with ``return_std``
            Posterior standard deviation at each point (per output for a 2-D y: the outputs
            share the kernel and the noise relative to their signal variance).  Rounding below
            zero is clipped to 0.
        y_cov : ndarray (m, m) or (m, m, k), only with ``return_cov``

        Raises
        ------
        ValueError
            With ``return_std`` or ``return_cov`` on a classifier: its predictions are labels,
            which have no Gaussian posterior (``decision_function`` gives the one-vs-rest
            scores).
        """
        return_std = check_bool(return_std, "return_std")
        return_cov = check_bool(return_cov, "return_cov")
        include_noise = check_bool(include_noise, "include_noise")
        if return_std and return_cov:
            raise ValueError("at most one of return_std and return_cov may be True (as in "
                             "scikit-learn): the standard deviation is the square root of the "
                             "covariance's diagonal")
        if not (return_std or return_cov):
            return super().predict(X)
        call = "predict(X, return_std=True)" if return_std else "predict(X, return_cov=True)"
        self._require_regression(call, "use decision_function for the one-vs-rest scores")
        X = self._check_X(X)
        if return_cov:
            mean, cov = self._mean_and_covariance(X, max_memory)
            if include_noise:
                cov.flat[:: cov.shape[0] + 1] += self.lam
            return mean, self._per_output(cov[:, :, None] * self._signal_variances())
        mean, var = self._mean_and_variance(X, max_memory)
        if include_noise:
            var = var + self.lam
        var = np.maximum(var, 0.0)[:, None] * self._signal_variances()
        return mean, self._per_output(np.sqrt(var))

    def sample_y(self, X, n_samples=1, *, seed=None, include_noise=False, max_memory=None):
        """Draws of the posterior at X (regression), as scikit-learn's
        ``GaussianProcessRegressor.sample_y``.

        Parameters
        ----------
        X : array_like (m, d)
        n_samples : int, default=1
        seed : None, int or numpy.random.Generator
        include_noise : bool, default=False
            Draws of new targets (with the noise) instead of the latent mu + f.
        max_memory : int or None
            As for ``predict(X, return_cov=True)``.

        Returns
        -------
        ndarray (m, n_samples), or (m, k, n_samples) for a 2-D y
        """
        n_samples = check_int(n_samples, "n_samples", low=1)
        rng = check_seed(seed)
        mean, cov = self.predict(X, return_cov=True, include_noise=include_noise,
                                 max_memory=max_memory)
        covs = cov[:, :, None] if cov.ndim == 2 else cov
        means = mean[:, None] if mean.ndim == 1 else mean
        m, k = means.shape
        draws = np.empty((m, k, n_samples))
        for j in range(k):
            C = covs[:, :, j]
            C.flat[:: m + 1] += _SAMPLE_JITTER * max(float(np.max(np.diag(C), initial=0.0)),
                                                     np.finfo(float).tiny)
            factor = _linalg.cholesky(C, overwrite=True)
            draws[:, j, :] = means[:, j:j + 1] + _linalg.matmul(
                factor, rng.standard_normal((m, n_samples)))
        return draws[:, 0, :] if mean.ndim == 1 else draws

    def _per_output(self, values):
        """(..., k) values in y's form: the last axis dropped for 1-D targets."""
        return values[..., 0] if self.encoding_.squeeze else values

    @budgeted
    def _mean_and_variance(self, X, max_memory):
        """Predictions and the latent posterior variance at checked X, in the model's budget."""
        var = self._latent_variance(X, budget_threads(), max_memory)
        return self.encoding_.decode(self._scores(X)), var

    @budgeted
    def _mean_and_covariance(self, X, max_memory):
        """Predictions and the latent posterior covariance at checked X."""
        cov = self._latent_covariance(X, budget_threads(), max_memory)
        return self.encoding_.decode(self._scores(X)), cov

    def _latent_covariance(self, X, n_threads, max_memory):
        raise ValueError(f"{type(self).__name__} has no posterior covariance between points "
                         f"({self._NO_COVARIANCE}); predict(X, return_std=True) gives the "
                         "standard deviation at each point, and fit_exact's model the "
                         "covariance")


"""The fitted GP-GRIEF model: prediction with its standard deviation, and the log marginal
likelihood."""
from __future__ import annotations

import numpy as np

from .._gp import likelihood_needs_training_inputs
from .._model import FittedModel, renamed
from .._threads import blas_threads, budget_threads, budgeted
from .._validation import check_bool

__all__ = ["GriefGP"]


class GriefGP(FittedModel):
    """A fitted GP-GRIEF model (returned by :func:`hkern.fit_grief`; not built directly).

    The keyword arguments of the constructor are the attributes below (without the trailing
    underscore), and ``posterior``, ``x_scaler``, ``y_mean``, ``y_std``, ``lml``: what
    prediction needs, in the standardised units the model works in.

    Attributes
    ----------
    inference_ : {"type2", "type1"}
    n_features_in_ : int
        Number of columns of the training X.
    active_features_ : ndarray of int
        Columns of X the model uses (constant training columns are ignored).
    n_train_ : int
        Number of training points.
    lengthscales_ : ndarray (n_features,)
        SE-ARD lengthscales in the original units of X (``inf`` for ignored constant columns).
    signal_variance_ : float
        Kernel amplitude s2, in the original units of y.
    noise_ : float
        Noise variance, in the original units of y (type I: the posterior mean of the sampled
        noise).
    p_ : int
        Number of basis functions, min(p, m).
    m_ : int
        Number of grid points prod(mbar_i) (a Python int; may be astronomically large).
    theta_ : ndarray (d + 2,)
        Type II only (None for type I): the kept log-parameters [log ls, log s2, log noise]
        (standardised units), for the d active features.
    restart_lmls_, restart_thetas_, restart_ : ndarray, ndarray, int
        Type II only (None for type I): the training LML (original units of y, as
        :meth:`log_marginal_likelihood`) and the log-parameters [log ls, log s2, log noise]
        (standardised units) at the end of each search, and the index of the one kept (the
        largest LML).  Order: the search from the paper's initialisation, then (when
        ``screened_``) the one from the same point with the unresolved inputs switched off,
        then the ``n_restarts`` random restarts.  With one search and ``optimize_subset`` the
        LML is not evaluated on all points and is nan.
    screened_ : bool
        Type II only (None for type I): whether some inputs had an initial lengthscale below
        the smallest gap of their grid, so that a search with them switched off was added (see
        ``n_restarts``).
    n_iter_ : int
        Type II only (None for type I, which has no ``max_iter``): the L-BFGS-B iterations of
        the kept search, each search being bounded by ``max_iter``; 0 without a search
        (``optimize=False``).  As scikit-learn's ``KMeans`` and ``GaussianMixture`` report the
        run they keep of their ``n_init``.  The short re-fit of s2 and the noise before each
        search is not counted.
    restart_n_iter_ : ndarray of int
        Type II only (None for type I): the L-BFGS-B iterations of every search, in the order
        of ``restart_lmls_``.
    acceptance_rate_, samples_ : float, ndarray
        Type I only (None for type II): MALA acceptance rate after burn-in and the kept samples
        of [log w, log noise] (standardised units).
    mala_step_ : float
        Type I only (None for type II): the MALA step size at the end of burn-in.
    n_jobs : int or None
        The thread budget of ``predict`` (see :class:`hkern._model.FittedModel`).
    """

    def __init__(self, *, inference, n_features, active_features, n_train, m, lengthscales,
                 signal_variance, noise, posterior, x_scaler, y_mean, y_std, lml, n_jobs,
                 theta=None, restart_lmls=None, restart_thetas=None, restart=None,
                 screened=None, n_iter=None, restart_n_iter=None, samples=None,
                 acceptance_rate=None, mala_step=None):
        super().__init__(n_features=n_features, n_jobs=n_jobs)
        self.inference_ = inference
        self.active_features_ = active_features
        self.n_train_ = n_train
        self.lengthscales_ = lengthscales
        self.signal_variance_ = signal_variance
        self.noise_ = noise
        self.p_ = posterior.basis.p
        self.m_ = m
        # type II: the searches
        self.theta_ = theta
        self.restart_lmls_ = restart_lmls
        self.restart_thetas_ = restart_thetas
        self.restart_ = restart
        self.screened_ = screened
        self.n_iter_ = n_iter
        self.restart_n_iter_ = restart_n_iter
        # type I: the sampler
        self.samples_ = samples
        self.acceptance_rate_ = acceptance_rate
        self.mala_step_ = mala_step
        # what prediction needs: the posterior (Type2Posterior or Type1Posterior), the
        # standardisation of X and of y, and the training LML in y's units
        self._posterior = posterior
        self._x_scaler = x_scaler
        self._y_mean = y_mean
        self._y_std = y_std
        self._lml = lml

    inference = renamed("inference_")

    # -- prediction ------------------------------------------------------------------------
    def _standardise(self, X):
        """Checked inputs in the units the model works in (standardised, active columns)."""
        X = self._check_X(X)
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
        return self._predict(self._standardise(X), return_std, include_noise)

    @budgeted
    def _predict(self, Xs, return_std, include_noise):
        """Mean, and with ``return_std`` the predictive standard deviation, in y's units."""
        n_threads = budget_threads()
        means, vars_ = [], []
        # BLAS calls made through NumPy run on one thread (their results can change with the
        # thread count); the large products go through hkern's tiled kernels on n_threads
        # OpenMP threads, which are bitwise equal for any count.
        with blas_threads(1):
            for _, Phi in self._posterior.basis.phi_blocks(Xs, n_threads):
                mean, var = self._posterior.moments(Phi, return_std, n_threads)
                means.append(mean)
                vars_.append(var)
        mean = np.concatenate(means) * self._y_std + self._y_mean
        if not return_std:
            return mean
        # Standardised units, then scaled by std(y): var * std(y)^2 could underflow (y ~ 1e-300)
        # where the standard deviation itself is a normal number.
        var = np.concatenate(vars_)
        if include_noise:
            var = var + self._posterior.noise
        return mean, np.sqrt(var) * self._y_std

    def log_marginal_likelihood(self, y=None, *, max_memory=None):
        """log p(y | hyperparameters) of the fitted model, in the original units of y.

        The log density of the training targets under the fitted GP, the same meaning as the
        ``log_marginal_likelihood()`` of the kernel ridge models that are GPs
        (:func:`hkern.fit_exact`, :func:`hkern.fit_hierarchical`): there the prior mean is 0,
        here the training mean of y (a fixed offset).  Type II: the eq. 3 kernel
        s2 Phi Phi' + noise I at the fitted hyperparameters.  Type I: the SVD-basis model at
        the posterior-mean weights and noise.  The Jacobian of the scaling of y, -n log(std y),
        is included so the value is the density of y itself.  The model does not keep the
        training inputs, so it is not evaluated at other targets: ``y`` (and ``max_memory``,
        which goes with it) are there for the signature every GP model shares
        (:meth:`hkern.HierarchicalKRR.log_marginal_likelihood`), and a ``y`` is refused.

        Examples
        --------
        >>> import numpy as np, hkern
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 3)); y = X[:, 0] + 0.1 * rng.normal(size=100)
        >>> bool(np.isfinite(hkern.fit_grief(X, y, r=30, seed=0).log_marginal_likelihood()))
        True
        """
        if y is not None:
            raise likelihood_needs_training_inputs(self, "its basis and weights")
        return self._lml

    def _repr_fields(self):
        return {"inference": repr(self.inference_), "p": str(self.p_), "m": _short(self.m_),
                "d": str(self.n_features_in_)}


def _short(m):
    return str(m) if m < 10**6 else f"~1e{len(str(m)) - 1}"

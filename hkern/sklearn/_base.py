"""What every hkern estimator shares: parameters in, one hkern fit function, its model out.

An estimator is its fit function's keyword arguments held as parameters (same names, same
defaults; ``random_state`` in place of ``seed``, the estimator's role in place of ``task``).
``fit`` checks the data with scikit-learn's machinery (so that ``n_features_in_``,
``feature_names_in_`` and scikit-learn's error messages are those of every other estimator),
calls the function with keyword arguments and keeps what it returns as ``model_``; prediction
delegates to that model.  The hkern function validates every parameter itself.
"""
from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    ClassNamePrefixFeaturesOutMixin,
    RegressorMixin,
    TransformerMixin,
)
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from .._probabilities import model_probabilities
from .._threads import budget_threads, budgeted
from ._compat import validate_data

__all__ = ["seed_from_random_state", "HkernEstimator", "HkernRegressor", "HkernGPRegressor",
           "HkernClassifier", "HkernTransformer", "MIN_SAMPLES", "DIRECT_SOLVER_N_ITER",
           "ITERATIVE_SOLVERS"]

# Every estimator refuses a one-sample fit with scikit-learn's message ("Found array with 1
# sample(s)"): the tree methods need r < n, a classifier two classes, and the size argument of
# the others (r landmarks, features, candidates) is meaningless for one point.
MIN_SAMPLES = 2

# The solver names that iterate ("cg": fit_meka's former name of "pcg").  With any other
# solver, an estimator with max_iter fails scikit-learn's check that n_iter_ >= 1 after a fit:
# a direct solver does not iterate (n_iter_ is None), as for scikit-learn's Ridge.
ITERATIVE_SOLVERS = ("pcg", "cg")
DIRECT_SOLVER_N_ITER = {
    "check_non_transformer_estimators_n_iter":
        "the direct solver does not iterate (n_iter_ is None, as for scikit-learn's Ridge with "
        "a direct solver); max_iter bounds solver='pcg' only"}


def seed_from_random_state(random_state):
    """hkern's ``seed`` for a scikit-learn ``random_state``.

    An int is passed on as it is, so ``Estimator(random_state=0)`` fits the model that
    ``hkern.fit_<method>(..., seed=0)`` returns.  None (numpy's global random state, as in
    scikit-learn) and a ``numpy.random.RandomState`` give a seed drawn from that state, so that
    successive fits differ and ``np.random.seed`` makes them reproducible.

    Examples
    --------
    >>> import numpy as np
    >>> from hkern.sklearn._base import seed_from_random_state
    >>> seed_from_random_state(7)
    7
    >>> a = seed_from_random_state(np.random.RandomState(0))
    >>> a == seed_from_random_state(np.random.RandomState(0))
    True
    """
    state = check_random_state(random_state)    # refuses what scikit-learn refuses
    if isinstance(random_state, numbers.Integral):
        return int(random_state)
    return int(state.randint(np.iinfo(np.int32).max))


class HkernEstimator(BaseEstimator):
    """Base of the estimators: ``_fit_function`` called with the estimator's parameters."""

    #: the hkern function, e.g. ``staticmethod(hkern.fit_nystrom)``
    _fit_function = None
    #: arguments the estimator fixes rather than exposes (the task of a regressor)
    _fixed_arguments = {}

    def _call_fit_function(self, *data):
        """``_fit_function(*data, **parameters)`` with random_state mapped to seed."""
        kwargs = self.get_params(deep=False)
        if "random_state" in kwargs:
            kwargs["seed"] = seed_from_random_state(kwargs.pop("random_state"))
        return type(self)._fit_function(*data, **kwargs, **self._fixed_arguments)

    def _fit_model(self, X, y):
        """Fit ``model_``; its iteration count, where it has one, is also ``n_iter_`` (the
        attribute scikit-learn expects of an estimator with ``max_iter``), and the
        hyperparameters it used, ``sigma_`` and ``lam_`` (those ``sigma="auto"``/``"ard"`` or
        ``lam="auto"`` chose, the ``selection_`` record saying how), are the estimator's too."""
        self.model_ = self._call_fit_function(X, y)
        for name in ("n_iter_", "sigma_", "lam_", "selection_"):
            if hasattr(self.model_, name):
                setattr(self, name, getattr(self.model_, name))

    def _checked_input(self, X):
        """X for prediction: fitted, the features seen in fit, converted by scikit-learn."""
        check_is_fitted(self)
        return validate_data(self, X, reset=False)

    def _expected_failed_checks(self):
        """The scikit-learn estimator checks this estimator fails for a stated reason, as
        {check name: reason}: scikit-learn < 1.6 reads them from the ``_xfail_checks`` tag,
        later versions take them as ``expected_failed_checks`` of ``check_estimator`` and
        ``parametrize_with_checks``.  An estimator with a ``solver`` parameter set to a direct
        solver has no iterations to count (:data:`DIRECT_SOLVER_N_ITER`)."""
        solver = self.get_params(deep=False).get("solver", "pcg")
        return {} if solver in ITERATIVE_SOLVERS else dict(DIRECT_SOLVER_N_ITER)

    def __sklearn_tags__(self):
        return super().__sklearn_tags__()

    def _more_tags(self):      # scikit-learn < 1.6 reads its tags here
        return {"_xfail_checks": self._expected_failed_checks()}


class HkernRegressor(RegressorMixin, HkernEstimator):
    """Regressors: multi-output targets (n, k) are fitted in one solve, as by the function."""

    _fixed_arguments = {"task": "regression"}
    #: whether the function accepts 2-D targets
    _multi_output = True

    def fit(self, X, y):
        """Fit the model on X (n_samples, n_features) and y (n_samples,) or (n_samples, k).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, multi_output=self._multi_output, y_numeric=True,
                             ensure_min_samples=MIN_SAMPLES)
        self._fit_model(X, y)
        return self

    def predict(self, X):
        """Predicted targets for X (n_samples, n_features): (n_samples,) or (n_samples, k)."""
        X = self._checked_input(X)
        return self.model_.predict(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = self._multi_output
        return tags

    def _more_tags(self):      # scikit-learn < 1.6 reads its tags here
        return {"multioutput": self._multi_output}


class HkernGPRegressor(HkernRegressor):
    """Regressors whose model is a Gaussian-process posterior (exact KRR, Nystrom, random
    features, HCK, the independent kernel, GRIEF): ``predict`` also gives the posterior
    standard deviation or covariance, and ``sample_y`` draws, as scikit-learn's
    ``GaussianProcessRegressor`` does."""

    def predict(self, X, return_std=False, return_cov=False):
        """Posterior mean at X (n_samples, n_features), and its standard deviation or
        covariance.

        Parameters
        ----------
        X : array_like (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of the latent mean + f at X (without the noise),
            in the units of y, computed by the model (see its ``predict``).
        return_cov : bool, default=False
            Also return the posterior covariance between the points (where the model has one).

        Returns
        -------
        mean : ndarray (n_samples,) or (n_samples, k)
        std : ndarray (n_samples,) or (n_samples, k), only with ``return_std``
        cov : ndarray (n_samples, n_samples) or (n_samples, n_samples, k), only with
            ``return_cov``
        """
        X = self._checked_input(X)
        if return_cov:
            return self.model_.predict(X, return_std=return_std, return_cov=True)
        if return_std:
            return self.model_.predict(X, return_std=True)
        return self.model_.predict(X)

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draws of the latent posterior at X: (n_samples_X, n_samples), or
        (n_samples_X, k, n_samples) for 2-D y, as scikit-learn's
        ``GaussianProcessRegressor.sample_y`` (``random_state``: the seed)."""
        X = self._checked_input(X)
        return self.model_.sample_y(X, n_samples, seed=random_state)

class HkernClassifier(ClassifierMixin, HkernEstimator):
    """Classifiers: one-vs-rest on any labels, all classes in one fit (task "classification")."""

    _fixed_arguments = {"task": "classification"}

    def fit(self, X, y):
        """Fit the model on X (n_samples, n_features) and class labels y (n_samples,).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, ensure_min_samples=MIN_SAMPLES)
        check_classification_targets(y)
        self._fit_model(X, y)
        self.classes_ = self.model_.classes_
        return self

    def predict(self, X):
        """Class labels for X (n_samples, n_features): the class of the largest score."""
        X = self._checked_input(X)
        return self.model_.predict(X)

    def decision_function(self, X):
        """One-vs-rest scores for X (n_samples, n_features).

        Returns
        -------
        scores : ndarray (n_samples, n_classes), or (n_samples,) for two classes
            For two classes scikit-learn's convention: one score, positive for ``classes_[1]``
            (half the difference of the two classes' scores, the score of ``classes_[1]`` itself
            when the two are opposite, as for every method fitted by one linear solve).
        """
        X = self._checked_input(X)
        scores = self.model_.decision_function(X)
        if len(self.classes_) == 2:
            return (scores[:, 1] - scores[:, 0]) / 2
        return scores

    def predict_proba(self, X):
        """Class probabilities for X (n_samples, n_features), from ``model_.predict_proba``:
        softmax(beta * scores) with the inverse temperature beta the fit chose on a held-out
        fifth of the training rows (``model_.calibration_``).

        Returns
        -------
        proba : ndarray (n_samples, n_classes)
            Columns in the order of ``classes_``; each row sums to 1, and its largest entry is
            the class ``predict`` gives.
        """
        X = self._checked_input(X)
        return self.model_.predict_proba(X)

    def predict_log_proba(self, X):
        """The logarithm of :meth:`predict_proba` (n_samples, n_classes), computed from the
        scores without rounding small probabilities to 0 first."""
        X = self._checked_input(X)
        return model_probabilities(self.model_, X, log=True)


class HkernTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin, HkernEstimator):
    """Feature maps: ``fit`` learns the map from X alone, ``transform`` applies it.

    Subclasses implement ``_fit(X)`` (checked X; sets the fitted attributes and
    ``_n_features_out``) and ``_transform(X, n_threads)``.
    """

    def fit(self, X, y=None):
        """Learn the feature map from X (n_samples, n_features); y is ignored.

        Returns
        -------
        self
        """
        X = validate_data(self, X, ensure_min_samples=MIN_SAMPLES)
        self._fit(X)
        return self

    @budgeted
    def transform(self, X):
        """The features of X (n_samples, n_features): an (n_samples, n_components) array whose
        inner products approximate the kernel."""
        X = self._checked_input(X)
        return self._transform(X, budget_threads())

"""The main fits (Nystrom, random Fourier features, exact KRR) on kin40k split 0.

(The file keeps its former name, "baselines", so that the benchmarks keep their names in the
recorded history, asv_bench/records.)

Inputs and targets are standardised with training statistics, so ``track_test_rmse`` is the
test RMSE in units of the training standard deviation of y.  All fits use the Gaussian
kernel, sigma = 2.0, lam = 0.01, seed = 0 and the default n_jobs (every core).

Each class fits its models once in ``setup_cache`` (not timed, shared by every benchmark of
the class, in a separate process): ``time_predict`` and ``track_test_rmse`` use those models,
while ``time_fit`` / ``peakmem_fit`` fit afresh.  A fit takes seconds, so timed benchmarks
use ``number = 1``, one round and at most three samples.
"""
import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

import hkern

from .common import SlowFit, grid, kin40k, model_rmse

KERNEL = "gaussian"
SIGMA = 2.0
LAM = 0.01
SEED = 0
N_EXACT = 5000  # training subsample of the exact solver (O(n^3): 36k points would take minutes)


def exact_subsample():
    """The fixed N_EXACT-point training subsample (seed 0) for the exact solver, and the test
    set."""
    X_train, y_train, X_test, y_test = kin40k()
    idx = np.sort(np.random.default_rng(SEED).choice(X_train.shape[0], N_EXACT, replace=False))
    return X_train[idx], y_train[idx], X_test, y_test


def fit_sklearn_nystroem(X, y, r):
    """The scikit-learn peer of hkern.fit_nystrom: Nystroem features + ridge (no intercept)."""
    model = make_pipeline(
        Nystroem(kernel="rbf", gamma=1.0 / (2.0 * SIGMA**2), n_components=r, random_state=SEED),
        Ridge(alpha=LAM, fit_intercept=False),
    )
    return model.fit(X, y)


class _LowRankFit(SlowFit):
    """fit / predict / test RMSE of one hkern fit function (``fit(X, y, r)``) at each r.

    Each subclass defines its own ``setup_cache`` (asv keys the cache by the function's place
    in the source, so an inherited one would be shared between the subclasses).
    """

    params = grid([256, 1024])
    param_names = ["r"]

    def _cache(self):
        X_train, y_train, _, _ = data = kin40k()
        return {"data": data, "models": {r: self.fit(X_train, y_train, r) for r in self.params}}

    def setup(self, cache, r):
        self.X_train, self.y_train, self.X_test, self.y_test = cache["data"]

    def time_fit(self, cache, r):
        self.fit(self.X_train, self.y_train, r)

    def peakmem_fit(self, cache, r):
        self.fit(self.X_train, self.y_train, r)

    def time_predict(self, cache, r):
        cache["models"][r].predict(self.X_test)

    time_predict.repeat = (3, 10, 10.0)
    time_predict.rounds = 2

    def track_test_rmse(self, cache, r):
        return model_rmse(cache["models"][r], self.X_test, self.y_test)

    track_test_rmse.unit = "RMSE"


class Nystrom(_LowRankFit):
    """hkern.fit_nystrom on all 36000 training points, with scikit-learn's Nystroem peer."""

    @staticmethod
    def fit(X, y, r):
        return hkern.fit_nystrom(X, y, r=r, kernel=KERNEL, sigma=SIGMA, lam=LAM, seed=SEED)

    def setup_cache(self):
        cache = self._cache()
        X_train, y_train, _, _ = cache["data"]
        cache["peers"] = {r: fit_sklearn_nystroem(X_train, y_train, r) for r in self.params}
        return cache

    setup_cache.timeout = 300

    def time_fit_sklearn_nystroem(self, cache, r):
        fit_sklearn_nystroem(self.X_train, self.y_train, r)

    def track_test_rmse_sklearn_nystroem(self, cache, r):
        return model_rmse(cache["peers"][r], self.X_test, self.y_test)

    track_test_rmse_sklearn_nystroem.unit = "RMSE"


class RFF(_LowRankFit):
    """hkern.fit_rff (random Fourier features) on all 36000 training points."""

    @staticmethod
    def fit(X, y, r):
        return hkern.fit_rff(X, y, r=r, kernel=KERNEL, sigma=SIGMA, lam=LAM, seed=SEED)

    def setup_cache(self):
        return self._cache()

    setup_cache.timeout = 300


class Exact(SlowFit):
    """hkern.fit_exact on a fixed 5000-point subsample of the training set."""

    def setup_cache(self):
        X_train, y_train, _, _ = data = exact_subsample()
        model = hkern.fit_exact(X_train, y_train, kernel=KERNEL, sigma=SIGMA, lam=LAM)
        return {"data": data, "model": model}

    setup_cache.timeout = 300

    def setup(self, cache):
        self.X_train, self.y_train, self.X_test, self.y_test = cache["data"]

    def time_fit(self, cache):
        hkern.fit_exact(self.X_train, self.y_train, kernel=KERNEL, sigma=SIGMA, lam=LAM)

    def peakmem_fit(self, cache):
        hkern.fit_exact(self.X_train, self.y_train, kernel=KERNEL, sigma=SIGMA, lam=LAM)

    def time_predict(self, cache):
        cache["model"].predict(self.X_test)

    time_predict.repeat = (3, 10, 10.0)
    time_predict.rounds = 2

    def track_test_rmse(self, cache):
        return model_rmse(cache["model"], self.X_test, self.y_test)

    track_test_rmse.unit = "RMSE"


class NystromThreads(SlowFit):
    """fit_nystrom (r = 1024) on kin40k with 1 and 2 threads (results are bitwise identical)."""

    params = grid([1, 2])
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        self.X_train, self.y_train, _, _ = kin40k()

    def time_fit(self, n_jobs):
        hkern.fit_nystrom(self.X_train, self.y_train, r=1024, kernel=KERNEL, sigma=SIGMA,
                          lam=LAM, seed=SEED, n_jobs=n_jobs)

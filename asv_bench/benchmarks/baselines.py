"""The baselines (Nystrom, random Fourier features, exact KRR) on kin40k split 0.

Inputs and targets are standardised with training statistics, so ``track_test_rmse`` is the
test RMSE in units of the training standard deviation of y.  All fits use the Gaussian
kernel, sigma = 2.0, lam = 0.01, seed = 0 and the default n_jobs (every core).

Each class fits its models once in ``setup_cache`` (not timed, shared by every benchmark of
the class, in a separate process): ``time_predict`` and ``track_test_rmse`` use those models,
while ``time_fit`` / ``peakmem_fit`` fit afresh.  A fit takes seconds, so timed benchmarks
use ``number = 1``, one round and at most three samples.
"""
import functools

import numpy as np
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline

import hkern
from hkern.datasets import load_uci, standardize

KERNEL = "gaussian"
SIGMA = 2.0
LAM = 0.01
SEED = 0
N_EXACT = 5000  # training subsample of the exact solver (O(n^3): 36k points would take minutes)


@functools.lru_cache(maxsize=None)
def kin40k():
    """Standardised kin40k split 0: X_train (36000, 8), y_train, X_test (4000, 8), y_test."""
    X_train, y_train, X_test, y_test, _ = standardize(*load_uci("kin40k", split=0))
    return X_train, y_train, X_test, y_test


def exact_subsample():
    """The fixed N_EXACT-point training subsample (seed 0) for the exact solver, and the test
    set."""
    X_train, y_train, X_test, y_test = kin40k()
    idx = np.sort(np.random.default_rng(SEED).choice(X_train.shape[0], N_EXACT, replace=False))
    return X_train[idx], y_train[idx], X_test, y_test


def rmse(model, X, y):
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def fit_sklearn_nystroem(X, y, r):
    """The scikit-learn peer of hkern.fit_nystrom: Nystroem features + ridge (no intercept)."""
    model = make_pipeline(
        Nystroem(kernel="rbf", gamma=1.0 / (2.0 * SIGMA**2), n_components=r, random_state=SEED),
        Ridge(alpha=LAM, fit_intercept=False),
    )
    return model.fit(X, y)


class _SlowFit:
    """Timing attributes shared by the fit benchmarks (each fit takes 1-10 s)."""

    number = 1
    repeat = (1, 3, 20.0)  # at least 1, at most 3 samples, stop after ~20 s
    min_run_count = 1
    warmup_time = 0.0
    rounds = 1
    timeout = 180


class Nystrom(_SlowFit):
    """hkern.fit_nystrom on all 36000 training points, with scikit-learn's Nystroem peer."""

    params = [256, 1024]
    param_names = ["r"]

    def setup_cache(self):
        X_train, y_train, _, _ = data = kin40k()
        models = {r: hkern.fit_nystrom(X_train, y_train, r=r, kernel=KERNEL, sigma=SIGMA,
                                       lam=LAM, seed=SEED) for r in self.params}
        peers = {r: fit_sklearn_nystroem(X_train, y_train, r) for r in self.params}
        return {"data": data, "models": models, "peers": peers}

    setup_cache.timeout = 300

    def setup(self, cache, r):
        self.X_train, self.y_train, self.X_test, self.y_test = cache["data"]

    def time_fit(self, cache, r):
        hkern.fit_nystrom(self.X_train, self.y_train, r=r, kernel=KERNEL, sigma=SIGMA, lam=LAM,
                          seed=SEED)

    def peakmem_fit(self, cache, r):
        hkern.fit_nystrom(self.X_train, self.y_train, r=r, kernel=KERNEL, sigma=SIGMA, lam=LAM,
                          seed=SEED)

    def time_predict(self, cache, r):
        cache["models"][r].predict(self.X_test)

    time_predict.repeat = (3, 10, 10.0)
    time_predict.rounds = 2

    def track_test_rmse(self, cache, r):
        return rmse(cache["models"][r], self.X_test, self.y_test)

    track_test_rmse.unit = "RMSE"

    def time_fit_sklearn_nystroem(self, cache, r):
        fit_sklearn_nystroem(self.X_train, self.y_train, r)

    def track_test_rmse_sklearn_nystroem(self, cache, r):
        return rmse(cache["peers"][r], self.X_test, self.y_test)

    track_test_rmse_sklearn_nystroem.unit = "RMSE"


class RFF(_SlowFit):
    """hkern.fit_rff (random Fourier features) on all 36000 training points."""

    params = [256, 1024]
    param_names = ["r"]

    def setup_cache(self):
        X_train, y_train, _, _ = data = kin40k()
        models = {r: hkern.fit_rff(X_train, y_train, r=r, kernel=KERNEL, sigma=SIGMA, lam=LAM,
                                   seed=SEED) for r in self.params}
        return {"data": data, "models": models}

    setup_cache.timeout = 300

    def setup(self, cache, r):
        self.X_train, self.y_train, self.X_test, self.y_test = cache["data"]

    def time_fit(self, cache, r):
        hkern.fit_rff(self.X_train, self.y_train, r=r, kernel=KERNEL, sigma=SIGMA, lam=LAM,
                      seed=SEED)

    def peakmem_fit(self, cache, r):
        hkern.fit_rff(self.X_train, self.y_train, r=r, kernel=KERNEL, sigma=SIGMA, lam=LAM,
                      seed=SEED)

    def time_predict(self, cache, r):
        cache["models"][r].predict(self.X_test)

    time_predict.repeat = (3, 10, 10.0)
    time_predict.rounds = 2

    def track_test_rmse(self, cache, r):
        return rmse(cache["models"][r], self.X_test, self.y_test)

    track_test_rmse.unit = "RMSE"


class Exact(_SlowFit):
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
        return rmse(cache["model"], self.X_test, self.y_test)

    track_test_rmse.unit = "RMSE"


class NystromThreads(_SlowFit):
    """fit_nystrom (r = 1024) on kin40k with 1 and 2 threads (results are bitwise identical)."""

    params = [1, 2]
    param_names = ["n_jobs"]

    def setup(self, n_jobs):
        self.X_train, self.y_train, _, _ = kin40k()

    def time_fit(self, n_jobs):
        hkern.fit_nystrom(self.X_train, self.y_train, r=1024, kernel=KERNEL, sigma=SIGMA,
                          lam=LAM, seed=SEED, n_jobs=n_jobs)

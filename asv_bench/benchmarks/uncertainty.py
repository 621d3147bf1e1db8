"""The predictive standard deviation of the main fits (issue 52), so that a slowdown is caught:

* ``ExactPCGStd``: the PCG model's std without an n x n matrix (hkern.exact.variance: the
  training targets nearest each group of test points and global summaries of them all), on
  the 12 000-point kin40k subsample of ``solvers.ExactPCG`` at 500 test points, beside the
  Cholesky variance of the same model; ``peakmem_`` shows no 8 n^2 bytes.  The whole-set
  numbers (36 000 rows, 4 000 test points, against the default fit's time) come from
  experiments/pcg_std.py.
* ``FalkonStd``: ``fit_nystrom(solver="pcg")``'s first std at kin40k's 4 000 test points
  (2 048 centres, sigma 2, lam 1e-3, as ``solvers.NystromPCG``), its posterior pass included.
* ``HierarchicalStd``: ``fit_hierarchical``'s std at the 4 000 test points (r = 256).
"""
import copy

import numpy as np

import hkern
from hkern.exact import variance

from .common import SlowFit, kin40k
from .solvers import NYSTROM_LAM, NYSTROM_SIGMA, exact_data, fit_exact_pcg, fit_falkon

TEST_POINTS = 500


class ExactPCGStd(SlowFit):
    """The PCG model's conditional std and its Cholesky std on 12 000 kin40k rows."""

    def setup_cache(self):
        X, y, Xt, _ = exact_data()
        return {"model": fit_exact_pcg(X, y), "Xt": Xt[:TEST_POINTS]}

    setup_cache.timeout = 300

    def setup(self, cache):
        self.model = cache["model"]
        self.Xt = self.model._check_X(cache["Xt"])

    def _conditional(self):
        m = self.model
        return variance.conditional_variance(m.kernel, m._bandwidth, m.X_fit_, m.lam, self.Xt,
                                             np.ones(len(self.Xt)), n_threads=2,
                                             max_memory=None)

    def time_std_conditional(self, cache):
        self._conditional()

    def peakmem_std_conditional(self, cache):
        self._conditional()

    def time_std_model(self, cache):
        # At 12 000 rows and 500 points the n x n factor is the cheaper: the model's choice.
        self.model.predict(cache["Xt"], return_std=True)


class FalkonStd(SlowFit):
    """FALKON's first std at the 4 000 kin40k test points: the model makes its posterior
    factors then (one pass over the training rows), so each sample starts from a fresh copy
    of the fitted model (``number = 1``)."""

    number = 1

    def setup_cache(self):
        X, y, Xt, _ = kin40k()
        return {"model": fit_falkon(X, y, 2048), "Xt": Xt}

    setup_cache.timeout = 300

    def setup(self, cache):
        self.model = copy.deepcopy(cache["model"])

    def time_std(self, cache):
        self.model.predict(cache["Xt"], return_std=True)

    def peakmem_std(self, cache):
        self.model.predict(cache["Xt"], return_std=True)


class HierarchicalStd(SlowFit):
    """HCK's std at the 4 000 kin40k test points (r = 256)."""

    def setup_cache(self):
        X, y, Xt, _ = kin40k()
        model = hkern.fit_hierarchical(X, y, r=256, sigma=NYSTROM_SIGMA, lam=NYSTROM_LAM,
                                       seed=0)
        return {"model": model, "Xt": Xt}

    setup_cache.timeout = 300

    def time_std(self, cache):
        cache["model"].predict(cache["Xt"], return_std=True)

    def peakmem_std(self, cache):
        cache["model"].predict(cache["Xt"], return_std=True)

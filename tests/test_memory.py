"""The memory guard: estimates held against measured peak RSS, refusals before allocation.

Issue 16 defect 11: outside fit_exact nothing checked memory, so an oversized call failed late
with NumPy's "Unable to allocate".  Each estimate here is compared with the peak resident memory
of the call in a fresh interpreter (tests/memory_probe.py), within 1.5x either way.
"""
import time

import numpy as np
import pytest
from memory_probe import assert_estimate_close

import hkern
from hkern._memory import (
    MemoryLimitError,
    available_memory,
    check_memory,
    recorded_estimates,
    resolve_max_memory,
)

SETUP = """
rng = np.random.default_rng(0)
X = rng.normal(size=({n}, {d})); y = np.sin(X[:, 0])
"""


class TestGuard:
    def test_refusal_names_the_need_and_the_fix(self):
        with pytest.raises(MemoryLimitError, match=r"thing needs about 2.00 GiB at its peak, "
                                                   r"more than max_memory=1.00 GiB \(the "
                                                   r"max_memory argument\); choose a smaller r"):
            check_memory(2 * 2**30, 2**30, what="thing", fix="choose a smaller r")

    def test_is_a_value_error_and_a_memory_error(self):
        assert issubclass(MemoryLimitError, ValueError)
        assert issubclass(MemoryLimitError, MemoryError)
        assert hkern.MemoryLimitError is MemoryLimitError

    def test_default_is_the_memory_available(self):
        assert resolve_max_memory(None) == pytest.approx(available_memory(), rel=0.2)
        assert 0 < available_memory()
        with pytest.raises(MemoryLimitError, match=r"\(the memory available now\)"):
            check_memory(2**62, None, what="x", fix="y")

    @pytest.mark.parametrize("bad", [0, -1, "8GB", True, float("nan")])
    def test_bad_max_memory(self, bad):
        with pytest.raises(ValueError, match="max_memory must be None .* or a number of bytes"):
            resolve_max_memory(bad)

    def test_estimates_are_recorded_in_call_order(self):
        with recorded_estimates() as log:
            check_memory(10, None, what="a", fix="")
            check_memory(20, None, what="b", fix="")
        assert log == [("a", 10), ("b", 20)]


# Each oversized call must fail before allocating: a refusal in well under a second.
OVERSIZED = {
    "kernel_matrix": lambda X, y: hkern.kernel_matrix(X, X, max_memory=2**20),
    "kernel_matvec": lambda X, y: hkern.kernel_matvec(X, X, np.ones((len(X), 200)),
                                                      max_memory=2**20),
    "fit_exact": lambda X, y: hkern.fit_exact(X, y, max_memory=2**20, sigma=1.0, lam=1e-2),
    "fit_nystrom": lambda X, y: hkern.fit_nystrom(X, y, r=2000, max_memory=2**20, sigma=1.0,
                                                  lam=1e-2),
    "fit_rff": lambda X, y: hkern.fit_rff(X, y, r=2000, max_memory=2**20, sigma=1.0, lam=1e-2),
}


@pytest.mark.parametrize("name", sorted(OVERSIZED))
def test_refused_before_allocating(name, rng):
    X = rng.normal(size=(2000, 3))
    y = X[:, 0].copy()
    start = time.perf_counter()
    with pytest.raises(MemoryLimitError, match=r"needs about .* more than max_memory=1.0 MiB"):
        OVERSIZED[name](X, y)
    assert time.perf_counter() - start < 0.5


def test_kernel_matrix_of_a_huge_shape_is_refused_at_once():
    X = np.broadcast_to(np.zeros(3), (2_000_000, 3))     # 2e6 x 2e6 result: 29 TiB
    with pytest.raises(MemoryLimitError, match=r"kernel_matrix of shape \(2000000, 2000000\)"):
        hkern.kernel_matrix(X)


@pytest.mark.parametrize("setup, call", [
    (SETUP.format(n=5000, d=10), "hkern.kernel_matrix(X, n_jobs=1)"),
    (SETUP.format(n=5000, d=10), "hkern.kernel_matrix(X[:2000], X, n_jobs=2)"),
    (SETUP.format(n=4000, d=5) + "B = rng.normal(size=(4000, 3000))",
     "hkern.kernel_matvec(X, X, B, n_jobs=2)"),
    (SETUP.format(n=5000, d=5), "hkern.fit_exact(X, y, n_jobs=2, sigma=1.0, lam=1e-2)"),
    (SETUP.format(n=20000, d=5), "hkern.fit_nystrom(X, y, r=2000, seed=0, n_jobs=2,"
                                 "sigma=1.0, lam=1e-2)"),
    (SETUP.format(n=3000, d=5), "hkern.fit_nystrom(X, y, r=3000, seed=0, n_jobs=2,"
                                "sigma=1.0, lam=1e-2)"),
    (SETUP.format(n=3000, d=5), "hkern.fit_nystrom(X, y, r=3000, seed=0, n_jobs=2,"
                                "sigma=1.0, lam='auto')"),
    (SETUP.format(n=100000, d=5),
     "hkern.fit_nystrom(X, y, r=150, landmarks='oasis', seed=0, n_jobs=2, sigma=1.0, lam=1e-2)"),
    (SETUP.format(n=20000, d=5), "hkern.fit_rff(X, y, r=3000, seed=0, n_jobs=2,"
                                 "sigma=1.0, lam=1e-2)"),
    (SETUP.format(n=3000, d=5), "hkern.fit_rff(X, y, r=6000, seed=0, n_jobs=2,"
                                "sigma=1.0, lam=1e-2)"),
], ids=["kernel_matrix", "kernel_matrix_rect", "kernel_matvec", "fit_exact", "fit_nystrom",
        "fit_nystrom_r_eq_n", "fit_nystrom_r_eq_n_select_lam", "fit_nystrom_oasis", "fit_rff",
        "fit_rff_dual"])
def test_estimate_matches_peak_rss(setup, call):
    assert_estimate_close(setup, call)

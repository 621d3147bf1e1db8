"""Memory guard of HCK and the independent kernel (issue 16, defect 11).

fit_hierarchical, fit_independent and the HCK model's solve / matvec / log_marginal_likelihood
estimate their peak memory from the sizes of the problem before allocating anything large, and
refuse above ``max_memory`` with hkern._memory.MemoryLimitError.  Each estimate is held against
the peak RSS of the call, measured in a fresh interpreter (tests/memory_probe.py), within 1.5x.
"""
import time

import numpy as np
import pytest
from memory_probe import assert_estimate_close

import hkern
from hkern._memory import MemoryLimitError, recorded_estimates
from hkern.hierarchical import plan as hplan


@pytest.mark.parametrize("n,r,leaf_size", [(2, 1, None), (3, 1, None), (13, 2, 1), (100, 7, None),
                                            (257, 32, None), (301, 8, 30), (1000, 600, None),
                                            (200, 64, 20), (999, 5, 3), (64, 63, None)])
def test_tree_sizes_are_the_operators(n, r, leaf_size):
    # _tree_sizes counts, level by level, exactly the entries HCKOperator allocates.
    X = np.random.default_rng(n).normal(size=(n, 2))
    m = hkern.fit_hierarchical(X, np.ones(n), r=r, leaf_size=leaf_size, seed=0, n_jobs=1,
                               sigma=1.0, lam=1e-2)
    f = m._op.factors()
    s = hplan.tree_sizes(n, r, m.depth_)
    assert s["sq"] == f["sq_off"][-1] and s["w"] == f["w_off"][-1]
    assert s["u"] == f["u_off"][-1] and s["b"] == f["b_off"][-1]
    assert s["ranks"] == f["rank"].sum() and s["r_max"] == m._op.r_max
    assert s["leaf_max"] == m._op.leaf_max and s["n_nonleaf"] == (1 << m.depth_) - 1


SETUP = """
rng = np.random.default_rng(0)
X = rng.normal(size=({n}, {d}))
y = rng.normal(size=({n}, {k}))
"""


@pytest.mark.parametrize("n,d,k,r,leaf", [
    (120_000, 3, 1, 64, None),     # factors ~ 300 MiB
    (30_000, 40, 4, 256, None),    # r^2 blocks and workspaces weigh more
    (5_000, 3, 1, 3_000, None),    # depth 0: one n x n leaf block
    (40_000, 2, 1, 8, 500),        # leaf_size larger than r
])
def test_fit_hierarchical_estimate_matches_peak_rss(n, d, k, r, leaf):
    assert_estimate_close(SETUP.format(n=n, d=d, k=k),
                          f"hkern.fit_hierarchical(X, y, r={r}, leaf_size={leaf}, seed=0, "
                          "n_jobs=2, sigma=1.0, lam=1e-2)")


@pytest.mark.parametrize("n,d,k,r", [
    (100_000, 100, 1, 64),         # the data dominate: tree-ordered and centred copies of X
    (5_000, 3, 1, 3_000),          # depth 0: one n x n leaf block
    (20_000, 3, 2, 1_500),         # a 2500 x 2500 leaf block per thread
])
def test_fit_independent_estimate_matches_peak_rss(n, d, k, r):
    assert_estimate_close(SETUP.format(n=n, d=d, k=k),
                          f"hkern.fit_independent(X, y, r={r}, seed=0, n_jobs=2,"
                           "sigma=1.0, lam=1e-2)")


MODEL = SETUP + """
model = hkern.fit_hierarchical(X, y[:, 0], r=64, seed=0, n_jobs=2, sigma=1.0, lam=1e-2)
B = rng.normal(size=({n}, 300))
"""


@pytest.mark.parametrize("call", ["model.solve(B)", "model.matvec(B)",
                                  "model.log_marginal_likelihood(B)",
                                  "model.solve(np.asfortranarray(B))"])
def test_operator_estimates_match_peak_rss(call):
    assert_estimate_close(MODEL.format(n=20_000, d=3, k=1), call)


# ----------------------------------------------------------------------------------------------
# Refusals: fast, before allocating, naming the argument to change.
# ----------------------------------------------------------------------------------------------
def _huge():
    # n = 2e6 points that pass validation without costing much: one feature, 16 MB.
    n = 2_000_000
    return np.broadcast_to(np.linspace(-1, 1, n)[:, None], (n, 1)), np.zeros(n)


def test_issue_reproducer_n_2e6_r_4096_is_refused_at_once():
    # Was: numpy's "Unable to allocate 31.9 GiB" after building the tree (~1 s).  The factors
    # alone need about 300 GiB.
    X, y = _huge()
    start = time.perf_counter()
    with pytest.raises(MemoryLimitError, match=r"fit_hierarchical with n=2000000, r=4096.*"
                       r"choose a smaller r.*max_memory"):
        hkern.fit_hierarchical(X, y, r=4096, sigma=1.0, lam=1e-2)
    assert time.perf_counter() - start < 0.5


@pytest.mark.parametrize("fit,kw,need", [
    (hkern.fit_hierarchical, dict(r=4096), 300 * 2**30),
    (hkern.fit_hierarchical, dict(r=256), 3 * 2**30),
    (hkern.fit_independent, dict(r=4096), 0.5 * 2**30),
    (hkern.fit_independent, dict(r=8, leaf_size=2_000_000), 2**40),   # one n x n block
])
def test_fits_refuse_above_max_memory_before_allocating(fit, kw, need):
    X, y = _huge()
    start = time.perf_counter()
    with recorded_estimates() as log:
        with pytest.raises(MemoryLimitError, match=r"needs about .* more than max_memory="
                           r"512\.0 MiB \(the max_memory argument\); choose a smaller r") as info:
            fit(X, y, max_memory=2**29, **kw)
    assert time.perf_counter() - start < 0.5
    assert isinstance(info.value, ValueError) and isinstance(info.value, MemoryError)
    assert log[0][1] > need
    if "leaf_size" in kw:
        assert "or leaf_size" in str(info.value)


def test_operator_refuses_many_right_hand_sides():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 3))
    m = hkern.fit_hierarchical(X, X[:, 0], r=16, seed=0, sigma=1.0, lam=1e-2)
    B = np.broadcast_to(np.ones((2000, 1)), (2000, 100_000))   # needs ~5 GiB
    for method in (m.solve, m.matvec, m.log_marginal_likelihood):
        name = "y" if method == m.log_marginal_likelihood else "B"
        with pytest.raises(MemoryLimitError, match=rf"100000 right-hand side\(s\) in {name} "
                           rf".*pass {name} in blocks of fewer columns"):
            method(B, max_memory=2**30)
    assert m.solve(B[:, :3], max_memory=2**30).shape == (2000, 3)


@pytest.mark.parametrize("bad", [0, -1, "1GB", True])
def test_bad_max_memory(bad):
    X = np.random.default_rng(0).normal(size=(50, 2))
    for fit in (hkern.fit_hierarchical, hkern.fit_independent):
        with pytest.raises(ValueError, match="max_memory must be None"):
            fit(X, X[:, 0], r=4, max_memory=bad)
    m = hkern.fit_hierarchical(X, X[:, 0], r=4, sigma=1.0, lam=1e-2)
    with pytest.raises(ValueError, match="max_memory must be None"):
        m.solve(X[:, 0], max_memory=bad)


def test_max_memory_is_the_last_parameter():
    import inspect
    for fn in (hkern.fit_hierarchical, hkern.fit_independent,
               hkern.hierarchical.HierarchicalKRR.solve, hkern.hierarchical.HierarchicalKRR.matvec,
               hkern.hierarchical.HierarchicalKRR.log_marginal_likelihood):
        params = list(inspect.signature(fn).parameters)
        assert params[-1] == "max_memory", fn

"""Mixed-precision exact PCG (issue 32, item 2): fit_exact(solver="pcg", precision="mixed") computes
the kernel's products and the Nystrom preconditioner's factor in float32, keeps CG's vectors and
sums in float64, and judges convergence by the residual of the float64 system.  Each piece is
checked against a dense float64 computation from its definition, and the fit against the same
fit in double precision."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracles import dense_kernel, zero_mean

import hkern
from hkern.oasis.api import nystrom_factor
from hkern.solvers import ConvergenceWarning, NystromPreconditioner, block_pcg, exact_pcg
from hkern.solvers.operators import KernelSystem, single_times

EPS32 = float(np.finfo(np.float32).eps)


def gaussian_kernel(X, Y, sigma):
    return dense_kernel(X, Y, kernel="gaussian", sigma=sigma)


def data(n=800, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + np.cos(X[:, 1] * X[:, 2]) + 0.1 * rng.normal(size=n)
    # mean exactly 0: the fits solve for y itself, whose dense residuals the tests check
    return X, zero_mean(y)


def test_single_times_keeps_any_scale():
    """A float32 matrix times a float64 V at float32's relative precision, for V far outside
    float32's range (the power-of-two scaling is exact)."""
    rng = np.random.default_rng(0)
    A = rng.normal(size=(300, 200)).astype(np.float32)
    V = rng.normal(size=(200, 3))
    reference = A.astype(np.float64) @ V
    bound = 4 * 200 * EPS32 * (np.abs(A.astype(np.float64)) @ np.abs(V)).max()
    for scale in (1e-200, 1.0, 1e200):
        out = single_times(A, V * scale)
        assert out.dtype == np.float64
        assert np.abs(out / scale - reference).max() <= bound


def test_float32_nystrom_preconditioner_against_the_dense_inverse():
    """M^{-1} R with a float32 factor F equals (F F^T + lam I)^{-1} R of the same F in float64
    to float32's precision times M's conditioning, and log det M and the draws' covariance
    use the same F."""
    rng = np.random.default_rng(0)
    F = (rng.normal(size=(400, 30)) / 4).astype(np.float32)
    lam = 0.05
    M = NystromPreconditioner(F, lam, n_threads=2)
    f = F.astype(np.float64)
    dense = f @ f.T + lam * np.eye(400)
    R = rng.normal(size=(400, 2))
    exact = np.linalg.solve(dense, R)
    condition = np.linalg.norm(f, 2) ** 2 / lam
    assert np.linalg.norm(M(R) - exact) <= 10 * EPS32 * condition * np.linalg.norm(exact)
    assert M.logdet() == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-6)
    assert np.array_equal(M(R), NystromPreconditioner(F, lam, n_threads=1)(R))


def test_float32_block_rpcholesky_factor():
    """The float32 factor approximates K as the float64 one does: K - F F^T is positive
    semidefinite to float32 rounding, and its trace matches the float64 factor's."""
    X, _ = data(600)
    K = gaussian_kernel(X, X, 1.5)
    traces = {}
    for dtype in (np.float64, np.float32):
        F = nystrom_factor(X, 60, method="block_rpcholesky", kernel="gaussian", sigma=1.5,
                           seed=0, n_jobs=2, max_memory=None, dtype=dtype)
        assert F.dtype == dtype and F.shape == (600, 60)
        f = F.astype(np.float64)
        residual = K - f @ f.T
        assert np.linalg.eigvalsh(residual).min() >= -1e-4
        traces[dtype] = np.trace(residual)
    assert traces[np.float32] == pytest.approx(traces[np.float64], rel=1e-2)


@pytest.mark.parametrize("stored", [True, False])
def test_mixed_kernel_system_against_the_dense_product(stored):
    """(K + lam I) V with K in float32 (stored, or recomputed by the float32 engine) equals the
    dense float64 product to float32 precision; V and the result are float64."""
    X, _ = data(500)
    V = np.random.default_rng(1).normal(size=(500, 3))
    K = gaussian_kernel(X, X, 1.5)
    system = KernelSystem(0, 1.5, X.astype(np.float32), 0.1, stored=stored, n_threads=2)
    out = system(V)
    assert out.dtype == np.float64
    bound = 100 * EPS32 * (np.abs(K) @ np.abs(V)).max()
    assert np.abs(out - (K @ V + 0.1 * V)).max() <= bound


@pytest.mark.parametrize("stored", [True, False])
def test_mixed_exact_pcg_meets_tol_in_float64(monkeypatch, stored):
    """fit_exact(solver="pcg", precision="mixed"): the coefficients solve the float64 system
    (K + lam I) alpha = y to tol, the residual reported is the dense one, and the predictions
    are those of the double-precision fit to that tolerance; the same bits for n_jobs 1 and
    2."""
    if not stored:
        monkeypatch.setattr(exact_pcg, "STORED_KERNEL_MAX_BYTES", 0)
    X, y = data()
    lam, tol = 1e-3, 1e-6
    fits = {p: hkern.fit_exact(X, y, solver="pcg", sigma=1.5, lam=lam, seed=0, tol=tol,
                               r=100, precision=p, n_jobs=2) for p in ("double", "mixed")}
    mixed = fits["mixed"]
    trace = mixed.solver_trace_
    assert trace.precision == "mixed" and trace.stored_kernel == stored
    assert fits["double"].solver_trace_.precision == "double"
    K = gaussian_kernel(X, X, 1.5)
    alpha = mixed.dual_coef_.ravel()
    dense = np.linalg.norm(y - (K + lam * np.eye(len(y))) @ alpha) / np.linalg.norm(y)
    assert trace.converged and dense <= tol
    assert trace.true_residual[0] == pytest.approx(dense, rel=1e-3)
    Xt = np.random.default_rng(2).normal(size=(200, 4))
    gap = np.abs(mixed.predict(Xt) - fits["double"].predict(Xt)).max()
    assert gap <= 1e-3 * np.abs(fits["double"].predict(Xt)).max()
    again = hkern.fit_exact(X, y, solver="pcg", sigma=1.5, lam=lam, seed=0, tol=tol, r=100,
                            precision="mixed", n_jobs=1)
    assert np.array_equal(again.dual_coef_, mixed.dual_coef_)


def test_mixed_exact_pcg_refines_from_the_float64_residual():
    """Where the float32 products hold the residual above tol (here tol = 1e-8, far below
    float32's precision), CG restarts from the float64 residual (iterative refinement: the
    recorded residual jumps up to it) until the float64 system meets tol."""
    X, y = data(1500)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = hkern.fit_exact(X, y, solver="pcg", sigma=1.5, lam=1e-3, seed=0, tol=1e-8,
                                r=300, precision="mixed", max_iter=2000)
    residuals = model.solver_trace_.residuals[:, 0]
    assert np.any(np.diff(residuals) > 0)          # a restart from the float64 residual
    K = gaussian_kernel(X, X, 1.5)
    alpha = model.dual_coef_.ravel()
    dense = np.linalg.norm(y - (K + 1e-3 * np.eye(len(y))) @ alpha) / np.linalg.norm(y)
    assert dense <= 1e-8
    assert model.solver_trace_.converged


def test_block_pcg_judges_by_the_exact_operator():
    """block_pcg(exact_a=...) computes its true residual with the exact operator: a recursion
    on a perturbed operator is not reported as converged against the exact one."""
    rng = np.random.default_rng(0)
    A = np.diag(np.linspace(1, 10, 50))
    E = 1e-3 * np.diag(rng.uniform(-1, 1, 50))
    B = rng.normal(size=(50, 1))
    result = block_pcg(lambda V: (A + E) @ V, B, tol=1e-10, max_iter=200,
                       exact_a=lambda V: A @ V)
    dense = np.linalg.norm(B - A @ result.X) / np.linalg.norm(B)
    assert result.true_residual[0] == pytest.approx(dense, rel=1e-6)
    # The restart from the exact residual is a step of iterative refinement: 1e-3 -> 1e-6.
    assert dense < 1e-5


@pytest.mark.parametrize("call", [
    lambda X, y: hkern.fit_exact(X, y, solver="pcg", precision="single"),
    lambda X, y: hkern.fit_exact(X, y, solver="direct", precision="mixed"),
    lambda X, y: hkern.fit_exact(X, y, solver="pcg", precision=32),
])
def test_bad_precision_is_refused_by_name(call):
    X, y = data(200)
    with pytest.raises(ValueError, match="precision"):
        call(X, y)


def test_mixed_memory_estimates_follow_the_precision():
    """The memory plan follows the precision: the factor's n r entries and a stored K's n^2
    take 4 bytes instead of 8, and the float32 copy of X takes 4 n d more."""
    kind = exact_pcg.NYSTROM_PRECONDITIONERS["block_rpcholesky"]
    n, d, r = 36000, 8, 3000
    for stored, kernel in ((False, 0), (True, 4 * n * n)):
        double = exact_pcg.pcg_bytes(n, d, 1, r, stored, 2, kind)
        mixed = exact_pcg.pcg_bytes(n, d, 1, r, stored, 2, kind, "mixed")
        assert double - mixed == 4 * n * r + kernel - 4 * n * d


def test_float32_reach_estimates_the_top_eigenvalue():
    """float32_reach = eps32 lambda_max(K) / lam, lambda_max from a 2000-row subsample scaled
    to n rows: within 10% of the dense top eigenvalue here."""
    from hkern._model import prepare_fit
    X, y = data(3000)
    inputs = prepare_fit(X, y, kernel="gaussian", sigma=2.0, lam=1e-3, task="regression")
    top = np.linalg.eigvalsh(gaussian_kernel(X, X, 2.0))[-1]
    reach = exact_pcg.float32_reach(inputs, 2)
    assert reach == pytest.approx(EPS32 * top / 1e-3, rel=0.1)


def test_auto_precision_runs_mixed_within_float32_reach():
    X, y = data(1500)
    auto = hkern.fit_exact(X, y, solver="pcg", sigma=1.5, lam=1e-2, seed=0, r=200,
                           precision="auto")
    mixed = hkern.fit_exact(X, y, solver="pcg", sigma=1.5, lam=1e-2, seed=0, r=200,
                            precision="mixed")
    assert auto.solver_trace_.precision == "mixed"
    assert np.array_equal(auto.dual_coef_, mixed.dual_coef_)


@pytest.mark.parametrize("sigma,lam,tol", [(8.0, 1e-6, 1e-3), (1.5, 1e-2, 1e-9)])
def test_auto_precision_runs_double_beyond_float32_reach(sigma, lam, tol):
    """A wide kernel with a tiny lam (eps32 lambda_max / lam far above MIXED_MAX_REACH), or a
    tol below MIXED_MIN_TOL: the double fit, bit for bit."""
    X, y = data(1500)
    kwargs = dict(solver="pcg", sigma=sigma, lam=lam, tol=tol, seed=0, r=200, max_iter=1000)
    auto = hkern.fit_exact(X, y, precision="auto", **kwargs)
    double = hkern.fit_exact(X, y, precision="double", **kwargs)
    assert auto.solver_trace_.precision == "double"
    assert np.array_equal(auto.dual_coef_, double.dual_coef_)


def test_auto_precision_goes_on_in_double_where_mixed_falls_short(monkeypatch):
    """Where the mixed solve stops short of tol before max_iter (here its refinement is
    switched off, at a tol of 1e-8 that float32 alone cannot reach; and a float32 system
    whose rounding outweighs lam = 1e-6, with the reach test switched off: its recursion
    stops converging, MixedPrecisionStall, before CG meets the indefiniteness), "auto" ends in
    double precision at the float64 residual tol, with no warning and one record."""
    import hkern.solvers.cg as cg
    X, y = data(1500)
    cases = [(1.5, 1e-4, 1e-8, "mixed, then double", {"_REFINEMENTS": 0}),
             (1.5, 1e-6, 1e-6, "mixed (stalled), then double", {})]
    for sigma, lam, tol, ran, patch in cases:
        monkeypatch.setattr(exact_pcg, "MIXED_MAX_REACH", np.inf)
        monkeypatch.setattr(exact_pcg, "MIXED_MIN_TOL", 0.0)
        for name, value in patch.items():
            monkeypatch.setattr(cg, name, value)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            model = hkern.fit_exact(X, y, solver="pcg", sigma=sigma, lam=lam, seed=0, r=200,
                                    tol=tol, precision="auto", max_iter=3000)
        monkeypatch.undo()
        trace = model.solver_trace_
        assert trace.precision == ran
        K = gaussian_kernel(X, X, sigma)
        alpha = model.dual_coef_.ravel()
        dense = np.linalg.norm(y - (K + lam * np.eye(len(y))) @ alpha) / np.linalg.norm(y)
        assert trace.converged and dense <= tol
        assert len(trace.residuals) == model.n_iter_ + 1 == len(trace.seconds)


def test_explicit_mixed_on_an_indefinite_float32_system_says_so():
    X, y = data(1500)
    with pytest.raises(np.linalg.LinAlgError, match="precision='double'"):
        hkern.fit_exact(X, y, solver="pcg", sigma=1.5, lam=1e-6, seed=0, r=300, tol=1e-9,
                        precision="mixed", max_iter=2000)

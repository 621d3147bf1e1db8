"""Mixed-precision FALKON (issue 32, item 2): fit_nystrom(solver="pcg", precision="mixed") holds
W's two factors in float32, computes the passes over C = K(X, Z) in float32 with float64 sums,
solves with the float32 factors in double arithmetic, and replaces CG's recursive residual with
the float64 one every decade.  Each piece is checked against a dense float64 computation from
its definition: the mixed triangular solve, the fused float32 normal pass, the system and its
float64 checks, the reliable updates of block_pcg, and the fits and precision="auto"'s
choices."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from oracles import dense_kernel

import hkern
from hkern import _linalg
from hkern.kernels._api import _kernel_normal_times_trusted
from hkern.solvers import ConvergenceWarning, FalkonSystem, block_pcg, falkon_bytes
from hkern.solvers import falkon as falkon_module

EPS32 = float(np.finfo(np.float32).eps)


def data(n=1500, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.05 * rng.normal(size=n)
    return X, y


def gaussian(X, Y, sigma=1.0):
    return dense_kernel(X, Y, kernel="gaussian", sigma=sigma)


@pytest.mark.parametrize("n", [1, 5, 255, 256, 257, 600])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_mixed_triangular_solve_against_the_dense_solve(n, lower, trans, k):
    """op(T) X = B for the float32 triangle (T's own diagonal ignored, ``diag`` used), in
    double arithmetic: the dense float64 solve of the same float32 entries to double's
    precision times T's conditioning, bitwise the same for 1 and 2 threads."""
    rng = np.random.default_rng(n + 7 * k)
    A = (0.3 * rng.normal(size=(n, n)) / np.sqrt(n)).astype(np.float32)
    A.flat[:: n + 1] = 1e6           # never read
    diag = rng.uniform(1.0, 2.0, size=n)
    T = (np.tril(A, -1) if lower else np.triu(A, 1)).astype(np.float64) + np.diag(diag)
    B = rng.normal(size=(n, k))
    X1 = _linalg.solve_triangular_mixed(A, B, diag, lower=lower, trans=trans, n_threads=1)
    X2 = _linalg.solve_triangular_mixed(A, B, diag, lower=lower, trans=trans, n_threads=2)
    reference = np.linalg.solve(T.T if trans else T, B)
    assert X1.dtype == np.float64 and X1.shape == B.shape
    assert np.array_equal(X1, X2)
    assert np.abs(X1 - reference).max() <= 1e-13 * np.linalg.cond(T) * np.abs(reference).max()
    vector = _linalg.solve_triangular_mixed(A, B[:, 0], diag, lower=lower, trans=trans)
    assert vector.shape == (n,) and np.array_equal(vector, X1[:, 0])


def test_mixed_triangular_solve_refuses_a_float64_triangle():
    with pytest.raises(ValueError, match="float32"):
        _linalg.solve_triangular_mixed(np.eye(3), np.ones(3), np.ones(3))


@pytest.mark.parametrize("n, m, d", [(700, 300, 3), (513, 257, 8), (200, 513, 17), (40, 7, 1)])
def test_fused_float32_normal_pass_against_the_dense_product(n, m, d):
    """K^T (K u) by the fused float32 block (Gaussian) against float64, with half the centres
    among the points (a zero distance each: the cancellation path), to float32's precision,
    bitwise the same for 1 and 2 threads."""
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, d))
    shared = min(m // 2, n)
    Z = np.ascontiguousarray(np.vstack([X[:shared], rng.normal(size=(m - shared, d))]))
    U = rng.normal(size=(m, 2))
    K = gaussian(X, Z)
    reference = K.T @ (K @ U)
    X32, Z32 = X.astype(np.float32), Z.astype(np.float32)
    out1 = _kernel_normal_times_trusted(0, 1.0, X32, Z32, U, None, 1)
    out2 = _kernel_normal_times_trusted(0, 1.0, X32, Z32, U, None, 2)
    assert np.array_equal(out1, out2)
    bound = 20 * EPS32 * (K.T @ (K @ np.abs(U))).max()
    assert np.abs(out1 - reference).max() <= bound


def mixed_system(n=600, m=80, lam=1e-3, sigma=1.0, seed=0):
    X, y = data(n, seed=seed)
    Z = np.ascontiguousarray(X[:: n // m][:m])
    return X, y, Z, FalkonSystem(0, sigma, X, Z, lam, 2, precision="mixed")


def dense_factors(system):
    """The float32 system's factors as float64 matrices: T (upper, T^T T = W + jitter I to
    float32's rounding) and A (A^T A = (n / m) T T^T + lam I)."""
    P = system._P.astype(np.float64)
    T = np.triu(P, 1) + np.diag(system._t_diag)
    A = (np.tril(P, -1) + np.diag(system._b_diag)).T
    return T, A


def test_mixed_system_against_the_dense_preconditioned_operator():
    """B^T (C^T C + lam T^T T) B with B = T^{-1} A^{-1} from the float32 factors: the float32
    operator to float32's precision, the float64 one (``exact``) and the right-hand side to
    double's, and alpha = B beta."""
    X, y, Z, system = mixed_system()
    assert system._P.dtype == np.float32 and system.mixed
    T, A = dense_factors(system)
    n, m = X.shape[0], Z.shape[0]
    W = gaussian(Z, Z)
    assert np.abs(T.T @ T - W - system.jitter * np.eye(m)).max() <= 50 * EPS32
    assert np.abs(A.T @ A - (n / m) * T @ T.T - 1e-3 * np.eye(m)).max() \
        <= 50 * EPS32 * (n / m) * np.abs(T @ T.T).max()
    C = gaussian(X, Z)
    B = np.linalg.solve(T, np.linalg.inv(A))
    operator = B.T @ (C.T @ C + 1e-3 * T.T @ T) @ B
    U = np.random.default_rng(1).normal(size=(m, 2))
    exact = operator @ U
    # Double's precision times B's conditioning squared (the dense reference's own error).
    double = 10 * np.finfo(np.float64).eps * np.linalg.cond(B) ** 2
    assert np.abs(system.exact(U) - exact).max() <= double * np.abs(exact).max()
    assert np.abs(system(U) - exact).max() <= 1e-3 * np.abs(exact).max()
    rhs = B.T @ C.T @ y[:, None]
    assert np.abs(system.rhs(y[:, None]) - rhs).max() <= double * np.abs(rhs).max()
    assert np.abs(system.coef(U) - B @ U).max() <= double * np.abs(B @ U).max()


def test_mixed_system_on_other_rows_passes_over_those_rows():
    """on_rows (a selection's final fit on all rows, from a hold-out candidate's factors): the
    float32 passes read the new rows.  They read the candidate's until this was found: the
    final fit of an explicit precision="mixed" selection stalled, its float32 operator and
    its float64 check built from different rows."""
    X, y, Z, _ = mixed_system()
    candidate = FalkonSystem(0, 1.0, X[:400], Z, 1e-3, 2, precision="mixed")
    part = candidate.on_rows(X)
    T, A = dense_factors(candidate)
    C = gaussian(X, Z)
    B = np.linalg.solve(T, np.linalg.inv(A))
    U = np.random.default_rng(1).normal(size=(Z.shape[0], 2))
    operator = B.T @ (C.T @ C + 1e-3 * T.T @ T) @ B @ U
    double = 10 * np.finfo(np.float64).eps * np.linalg.cond(B) ** 2
    assert np.abs(part(U) - operator).max() <= 1e-3 * np.abs(operator).max()
    assert np.abs(part.exact(U) - operator).max() <= double * np.abs(operator).max()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_mixed_selection_final_fit_converges_in_mixed():
    """The selection's final fit from the chosen candidate's mixed factors (on_rows): 17
    iterations to tol in float32; with the candidate's rows in its float32 passes it stalled
    at 1.1e-3."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=3000)
    model = hkern.fit_nystrom(X, y, 200, solver="pcg", precision="mixed", sigma="auto",
                              lam="auto", seed=0)
    assert model.solver_trace_.precision == "mixed" and model.solver_trace_.converged


def test_float64_model_residual_against_the_dense_double_model():
    """The answer's residual in the float64 model B^T (C^T C + lam W) B beta = B^T C^T y, the
    float32 factors' B."""
    X, y, Z, system = mixed_system()
    T, A = dense_factors(system)
    C, W = gaussian(X, Z), gaussian(Z, Z)
    B = np.linalg.solve(T, np.linalg.inv(A))
    beta = np.random.default_rng(2).normal(size=(Z.shape[0], 1))
    rhs = system.rhs(y[:, None])
    residual = rhs - B.T @ (C.T @ C + 1e-3 * W) @ B @ beta
    expected = np.linalg.norm(residual) / np.linalg.norm(rhs)
    assert system.float64_model_residual(beta, rhs) == pytest.approx(expected, rel=1e-8)


def test_beta_of_inverts_coef_in_a_double_system():
    X, y = data(500)
    Z = np.ascontiguousarray(X[:60])
    system = FalkonSystem(0, 1.0, X, Z, 1e-2, 2)
    alpha = np.random.default_rng(3).normal(size=(60, 2))
    assert np.allclose(system.coef(system.beta_of(alpha)), alpha, rtol=1e-8, atol=1e-10)
    _, _, _, mixed = mixed_system()
    with pytest.raises(ValueError, match="double"):
        mixed.beta_of(alpha)


def test_block_pcg_reliable_updates_meet_tol_against_the_exact_operator():
    """CG on an approximate operator (a symmetric perturbation of a tenth of its smallest
    eigenvalue) with the exact one for the residual: with replace_below every decade's
    residual is the true one, the answer meets tol against the exact operator with no
    restart, and the end check reuses the last replacement."""
    rng = np.random.default_rng(0)
    n = 300
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    A = Q @ np.diag(np.logspace(0, 3, n)) @ Q.T
    E = rng.normal(size=(n, n))
    approx = A + 0.1 * (E + E.T) / np.linalg.norm(E + E.T, 2)
    calls = []

    def exact(V):
        calls.append(V.shape[1])
        return A @ V

    b = rng.normal(size=(n, 1))
    result = block_pcg(lambda V: approx @ V, b, tol=1e-6, max_iter=500, exact_a=exact,
                       replace_below=0.1)
    true = np.linalg.norm(b - A @ result.X) / np.linalg.norm(b)
    assert result.converged.all() and true <= 1e-6
    assert result.true_residual[0] == pytest.approx(true, rel=1e-6)
    assert result.exact.all() and not result.restarted.any()
    assert len(calls) <= 8           # a replacement a decade, and none at the end
    plain = block_pcg(lambda V: approx @ V, b, tol=1e-6, max_iter=500, exact_a=exact)
    assert plain.restarted.any()     # without them the end check finds the gap


@pytest.fixture
def regression():
    X, y = data(1500)
    return X[:1200], y[:1200], X[1200:], y[1200:]


def test_mixed_falkon_solves_the_float32_factors_model(regression):
    """fit_nystrom(precision="mixed"): alpha solves (C^T C + lam T^T T) alpha = C^T y with the
    float32 factors' T to tol in float64, and its record says so."""
    X, y, X_test, y_test = regression
    with pytest.warns(ConvergenceWarning, match="float64 model"):
        # At tol 1e-6 the float32 factors' jitter is visible in the float64 model.
        model = hkern.fit_nystrom(X, y, 200, solver="pcg", sigma=0.7, lam=1e-3, seed=0,
                                  tol=1e-6, precision="mixed", n_jobs=2)
    trace = model.solver_trace_
    assert trace.precision == "mixed" and trace.converged and trace.true_residual[0] <= 1e-6
    assert 1e-6 < trace.float64_model_residual <= 1e-3
    double = hkern.fit_nystrom(X, y, 200, solver="pcg", sigma=0.7, lam=1e-3, seed=0, tol=1e-6,
                               precision="double", n_jobs=2)
    assert np.array_equal(model.landmark_indices_, double.landmark_indices_)
    difference = np.abs(model.predict(X_test) - double.predict(X_test)).max()
    assert difference <= 1e-3 * np.abs(double.predict(X_test)).max()


def test_mixed_falkon_is_the_same_for_any_thread_count(regression):
    X, y, _, _ = regression
    fits = [hkern.fit_nystrom(X, y, 150, solver="pcg", sigma=0.7, lam=1e-3, seed=0,
                              precision="mixed", n_jobs=j) for j in (1, 2)]
    assert np.array_equal(fits[0].coef_, fits[1].coef_)


def test_explicit_mixed_warns_where_the_float32_model_differs(regression):
    """At a wide bandwidth the float32 jitter changes the model: the fit warns with the
    answer's residual in the float64 model."""
    X, y, _, _ = regression
    with pytest.warns(ConvergenceWarning, match="float64 model"):
        model = hkern.fit_nystrom(X, y, 400, solver="pcg", sigma=4.0, lam=1e-4, seed=0,
                                  precision="mixed")
    assert model.solver_trace_.float64_model_residual > 1e-3


def test_auto_runs_mixed_where_the_pivots_clear_the_jitter(regression, monkeypatch):
    X, y, _, _ = regression
    monkeypatch.setattr(falkon_module, "MIXED_MIN_CENTRES", 100)
    model = hkern.fit_nystrom(X, y, 200, solver="pcg", sigma=0.5, lam=1e-3, seed=0)
    assert model.solver_trace_.precision == "mixed"
    assert model.solver_trace_.float64_model_residual <= 1e-3


def test_auto_runs_double_below_its_least_number_of_centres(regression):
    X, y, _, _ = regression
    model = hkern.fit_nystrom(X, y, 200, solver="pcg", sigma=0.5, lam=1e-3, seed=0)
    assert model.solver_trace_.precision == "double"


def test_auto_runs_double_where_the_pivots_do_not(regression, monkeypatch):
    X, y, _, _ = regression
    monkeypatch.setattr(falkon_module, "MIXED_MIN_CENTRES", 100)
    model = hkern.fit_nystrom(X, y, 400, solver="pcg", sigma=4.0, lam=1e-4, seed=0)
    assert model.solver_trace_.precision == "double"
    assert model.solver_trace_.float64_model_residual is None


def _auto_without_the_screen(regression, monkeypatch, accept=None):
    """fit_nystrom's auto precision with the pivot test off (200 centres, sigma 1, lam 1e-3,
    no ConvergenceWarning allowed) and, with ``accept``, MIXED_ACCEPT set to it; returns the
    model and how far its predictions are from the double fit's, over their scale."""
    X, y, _, _ = regression
    monkeypatch.setattr(falkon_module, "MIXED_MIN_PIVOT", 0.0)
    monkeypatch.setattr(falkon_module, "MIXED_MIN_CENTRES", 100)
    if accept is not None:
        monkeypatch.setattr(falkon_module, "MIXED_ACCEPT", accept)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = hkern.fit_nystrom(X, y, 200, solver="pcg", sigma=1.0, lam=1e-3, seed=0)
    double = hkern.fit_nystrom(X, y, 200, solver="pcg", sigma=1.0, lam=1e-3, seed=0,
                               precision="double")
    scale = np.abs(double.predict(X[:50])).max()
    return model, np.abs(model.predict(X[:50]) - double.predict(X[:50])).max() / scale


def test_auto_keeps_a_mixed_answer_within_its_bound_of_the_float64_model(regression,
                                                                          monkeypatch):
    """With the pivot test off, a mixed answer 1.8 tol from the float64 model's (within
    MIXED_ACCEPT tol): auto keeps it, without a warning, and predicts as double does to
    within that model difference."""
    model, gap = _auto_without_the_screen(regression, monkeypatch)
    trace = model.solver_trace_
    assert trace.precision == "mixed" and trace.converged
    assert 1e-3 < trace.float64_model_residual <= falkon_module.MIXED_ACCEPT * 1e-3
    assert gap <= 1e-2


def test_auto_goes_on_in_double_where_the_mixed_answer_falls_short(regression, monkeypatch):
    """With the pivot test off and the bound at tol, a mixed answer further than tol from the
    float64 model's (here 1.8e-3): auto continues in double from it, and the answer meets
    tol there."""
    model, gap = _auto_without_the_screen(regression, monkeypatch, accept=1.0)
    trace = model.solver_trace_
    assert trace.precision == "mixed, then double" and trace.converged
    assert trace.true_residual[0] <= 1e-3 and trace.jitter < 1e-10     # the float64 factors
    assert gap <= 1e-2


@pytest.mark.parametrize("call, match", [
    (lambda X, y: hkern.fit_nystrom(X, y, 50, solver="pcg", precision="single"), "precision"),
    (lambda X, y: hkern.fit_nystrom(X, y, 50, solver="direct", precision="mixed"), "pcg"),
    (lambda X, y: hkern.fit_nystrom(X, y, 50, precision="mixed"), "pcg"),
])
def test_bad_precision_is_refused_by_name(call, match):
    X, y = data(200)
    with pytest.raises(ValueError, match=match):
        call(X, y)


def test_sharded_fits_refuse_mixed():
    from hkern.nystrom.checks import check_precision
    check_precision("auto", "pcg", sharded=True)
    with pytest.raises(ValueError, match="sharded"):
        check_precision("mixed", "pcg", sharded=True)


def test_mixed_memory_estimate_follows_the_precision():
    """The factor pair takes 4 bytes an entry instead of 8, plus float32 copies of X and Z."""
    n, m, d = 36000, 8192, 8
    double = falkon_bytes(n, m, d, 1, 2)
    mixed = falkon_bytes(n, m, d, 1, 2, "mixed")
    assert double - mixed == 4 * m * m - 4 * (n + m) * d
    assert falkon_bytes(n, m, d, 1, 2, "auto") == double

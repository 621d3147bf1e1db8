"""Dense-reference tests of hkern.solvers: block PCG against scipy.linalg.solve, the Nystrom
preconditioner against the dense inverse of F F^T + lam I, the kernel system operator against
K + lam I."""
import numpy as np
import pytest
import scipy.linalg as sla
from fresh_python import run_python
from hck_model import make_kern, matrix_to_original, reconstruct
from numpy.linalg import LinAlgError
from oracles import hck_system, rel_norm, zero_mean

import hkern
from hkern.hierarchical.plan import default_jitter
from hkern.hierarchical.preconditioner import HCKPreconditioner
from hkern.kernels import kernel_kind
from hkern.solvers import KernelSystem, NystromPreconditioner, block_pcg


def spd_system(rng, n=120, k=3, decay=0.9):
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * decay ** np.arange(n)) @ Q.T + 1e-3 * np.eye(n)     # condition number ~ 1e3
    return A, rng.standard_normal((n, k))


@pytest.mark.parametrize("preconditioned", [False, True])
def test_block_pcg_solves_to_the_requested_tolerance(rng, preconditioned):
    A, B = spd_system(rng)
    apply_m = None
    if preconditioned:
        F = np.linalg.cholesky(A - 1e-3 * np.eye(len(A)) + 1e-9 * np.eye(len(A)))[:, :20]
        apply_m = NystromPreconditioner(F, 1e-3)
    res = block_pcg(lambda V: A @ V, B, apply_m=apply_m, tol=1e-10, max_iter=500)
    ref = sla.solve(A, B, assume_a="pos")
    assert res.converged.all()
    true_residual = np.linalg.norm(B - A @ res.X, axis=0) / np.linalg.norm(B, axis=0)
    assert np.all(true_residual <= 1e-9)
    assert rel_norm(res.X, ref) <= 1e-6          # cond(A) ~ 1e3 times the residual
    assert np.all(res.residuals[-1] <= 1e-10)
    assert len(res.residuals) == len(res.seconds) == res.n_iter.max() + 1


def test_a_good_preconditioner_needs_fewer_iterations(rng):
    A, B = spd_system(rng, n=200)
    w, V = np.linalg.eigh(A)
    F = V[:, -40:] * np.sqrt(w[-40:] - 1e-3)     # the top of A - 1e-3 I exactly
    plain = block_pcg(lambda X: A @ X, B, tol=1e-8, max_iter=1000)
    pre = block_pcg(lambda X: A @ X, B, apply_m=NystromPreconditioner(F, 1e-3), tol=1e-8,
                    max_iter=1000)
    assert pre.converged.all() and plain.converged.all()
    assert pre.n_iter.max() < plain.n_iter.max() / 3


def test_columns_stop_on_their_own(rng):
    A, _ = spd_system(rng, n=60)
    w, V = np.linalg.eigh(A)
    B = np.column_stack([np.zeros(60), V[:, 5], rng.standard_normal(60)])
    res = block_pcg(lambda X: A @ X, B, tol=1e-10, max_iter=200)
    assert res.n_iter[0] == 0 and np.array_equal(res.X[:, 0], np.zeros(60))
    assert res.n_iter[1] == 1                    # an eigenvector: one step
    assert res.n_iter[2] > 1
    np.testing.assert_allclose(res.X[:, 1], V[:, 5] / w[5], rtol=1e-10)


def test_unconverged_columns_are_reported(rng):
    A, B = spd_system(rng)
    res = block_pcg(lambda V: A @ V, B, tol=1e-14, max_iter=3)
    assert not res.converged.any() and np.all(res.n_iter == 3)
    assert len(res.residuals) == 4


def test_callback_sees_every_iteration(rng):
    A, B = spd_system(rng, n=40)
    seen = []
    res = block_pcg(lambda V: A @ V, B, tol=1e-8, max_iter=100,
                    callback=lambda it, X, r: seen.append((it, r.max())))
    assert [it for it, _ in seen] == list(range(res.n_iter.max() + 1))
    assert seen[-1][1] <= 1e-8


def test_indefinite_operator_raises(rng):
    A, B = spd_system(rng, n=30)
    A[0, 0] = -50.0
    with pytest.raises(LinAlgError, match="not positive definite"):
        block_pcg(lambda V: A @ V, B, max_iter=100)


@pytest.mark.parametrize("n,k", [(50, 5), (300, 40)])
def test_nystrom_preconditioner_is_the_dense_inverse(rng, n, k):
    F = rng.standard_normal((n, k)) * np.logspace(0, -4, k)
    lam = 1e-3
    M = F @ F.T + lam * np.eye(n)
    R = rng.standard_normal((n, 3))
    P = NystromPreconditioner(F, lam)
    assert rel_norm(P(R), np.linalg.solve(M, R)) <= 1e-10
    assert abs(P.logdet() - np.linalg.slogdet(M)[1]) <= 1e-9 * abs(np.linalg.slogdet(M)[1])
    P2 = NystromPreconditioner(F, lam, n_threads=2)
    assert np.array_equal(P(R), P2(R))


@pytest.mark.parametrize("method", ["block_rpcholesky", "rpcholesky", "uniform"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_extended_nystrom_preconditioner_is_the_nystrom_approximation_on_all_rows(
        rng, method, dtype):
    """A factor built on some rows, extended to all: F F^T is K(X, Z) K(Z, Z)^{-1} K(Z, X) of its
    pivots Z on every row (the definition), the built rows unchanged; and its M^{-1} at
    another lam is the dense inverse."""
    from hkern._model import prepare_fit
    from hkern.solvers.exact_pcg import NYSTROM_PRECONDITIONERS, extended_preconditioner
    X = rng.normal(size=(400, 3))
    rows = np.sort(rng.permutation(400)[:350])

    def inputs(rows_):
        X_ = X if rows_ is None else X[rows_]
        return prepare_fit(X_, np.ones(len(X_)), kernel="gaussian", sigma=1.5, lam=1e-2,
                           task="regression", max_memory=None, classes=None)
    built = NYSTROM_PRECONDITIONERS[method].build(inputs(rows), 50, seed=0, n_threads=2,
                                                  max_memory=None, dtype=dtype)
    full = inputs(None)
    M = extended_preconditioner(built, full.X, rows, full.kind, full.bandwidth, 1e-3, 2, None)
    Z = X[rows[built.pivots]]
    np.testing.assert_array_equal(M.pivots, rows[built.pivots])
    Kxz = hkern.kernel_matrix(X, Z, sigma=1.5)
    nystrom = Kxz @ np.linalg.solve(hkern.kernel_matrix(Z, Z, sigma=1.5), Kxz.T)
    F = M.F.astype(np.float64)
    assert M.F.dtype == dtype and np.array_equal(M.F[rows], built.F)
    assert np.abs(F @ F.T - nystrom).max() <= (1e-11 if dtype == np.float64 else 2e-5)
    R = rng.standard_normal((400, 2))
    # float32 F is applied in single precision: relative error ~ eps32 ||F||^2 / lam
    # (hkern.solvers.preconditioners).
    eps = np.finfo(dtype).eps * np.linalg.norm(F, 2) ** 2 / 1e-3
    assert rel_norm(M(R), np.linalg.solve(F @ F.T + 1e-3 * np.eye(400), R)) <= 10 * eps
    again = built.with_lam(1e-3)
    assert again.F is built.F and again.lam == 1e-3


def test_hck_preconditioner_is_the_dense_inverse(rng):
    """(K_hier + lam I)^{-1} R with K_hier built entry by entry from its definition on the
    same tree and landmarks (tests/hck_model.reconstruct replays fit_hierarchical's draws)."""
    n, r, sigma, lam = 260, 24, 0.5, 1e-2
    X = rng.uniform(-1, 1, size=(n, 3))
    _, kind = kernel_kind("gaussian")
    P = HCKPreconditioner(X, r, kind=kind, bandwidth=sigma, lam=lam, seed=5)
    X_tree, tree, landmarks = reconstruct(X, r, 5)
    A_tree = hck_system(X_tree, tree["depth"], landmarks, make_kern("gaussian", sigma), lam,
                        default_jitter(lam))
    A = matrix_to_original(A_tree, tree["perm"])
    R = rng.standard_normal((n, 2))
    assert P.rank == r
    assert rel_norm(P(R), np.linalg.solve(A, R)) <= 1e-10
    P2 = HCKPreconditioner(X, r, kind=kind, bandwidth=sigma, lam=lam, seed=5, n_threads=2)
    assert np.array_equal(P(R), P2(R))


@pytest.mark.parametrize("stored", [True, False])
def test_kernel_system_is_k_plus_lam_i(rng, stored):
    X = rng.standard_normal((90, 4))
    V = rng.standard_normal((90, 2))
    _, kind = kernel_kind("gaussian")
    A = hkern.kernel_matrix(X, sigma=1.3) + 0.05 * np.eye(90)
    op = KernelSystem(kind, 1.3, X, 0.05, stored=stored)
    assert op.stored is stored
    assert rel_norm(op(V), A @ V) <= 1e-13
    op2 = KernelSystem(kind, 1.3, X, 0.05, stored=stored, n_threads=2)
    assert np.array_equal(op(V), op2(V))


# --------------------------------------------------------------------------------------------
# fit_exact(solver="pcg")
# --------------------------------------------------------------------------------------------
def regression(rng, n=300, d=3, k=1):
    X = rng.uniform(-2, 2, size=(n, d))
    Y = np.column_stack([np.sin(2 * X[:, 0] + j) + 0.1 * rng.standard_normal(n)
                         for j in range(k)])
    # mean exactly 0: the fits solve for y itself, which the dense references below use
    Y = zero_mean(Y)
    return X, (Y[:, 0] if k == 1 else Y)


@pytest.mark.parametrize("preconditioner", ["block_rpcholesky", "rpcholesky", "oasis", "greedy",
                                            "uniform", "hck"])
def test_pcg_solution_is_the_cholesky_solution(rng, preconditioner):
    X, y = regression(rng)
    ref = hkern.fit_exact(X, y, sigma=0.8, lam=1e-3)
    model = hkern.fit_exact(X, y, sigma=0.8, lam=1e-3, solver="pcg",
                            preconditioner=preconditioner, r=40, tol=1e-11, seed=0)
    A = hkern.kernel_matrix(X, sigma=0.8) + 1e-3 * np.eye(len(X))
    alpha = sla.solve(A, y, assume_a="pos")
    assert np.linalg.norm(y - A @ model.dual_coef_[:, 0]) <= 1e-11 * np.linalg.norm(y) * 1.01
    assert rel_norm(model.dual_coef_[:, 0], alpha) <= 1e-7       # cond(A) ~ 1e4 x tol
    assert rel_norm(model.predict(X), ref.predict(X)) <= 1e-9
    assert model.n_iter_ == model.solver_trace_.residuals.shape[0] - 1
    assert model.solver_trace_.converged and model.solver_trace_.preconditioner == preconditioner
    assert ref.n_iter_ is None and ref.solver_trace_ is None


def test_pcg_multi_output_and_classification_in_one_block(rng):
    X, Y = regression(rng, k=3)
    ref = hkern.fit_exact(X, Y, sigma=1.0, lam=1e-2)
    model = hkern.fit_exact(X, Y, sigma=1.0, lam=1e-2, solver="pcg", r=30, tol=1e-10, seed=1)
    assert model.solver_trace_.residuals.shape[1] == 3
    assert rel_norm(model.predict(X), ref.predict(X)) <= 1e-8
    labels = np.digitize(X[:, 0], [-0.5, 0.7])
    clf = hkern.fit_exact(X, labels, sigma=1.0, lam=1e-2, task="classification", solver="pcg",
                          r=30, tol=1e-10, seed=1)
    ref = hkern.fit_exact(X, labels, sigma=1.0, lam=1e-2, task="classification")
    assert np.array_equal(clf.predict(X), ref.predict(X))
    assert rel_norm(clf.decision_function(X), ref.decision_function(X)) <= 1e-8


def test_pcg_recomputes_the_kernel_when_it_does_not_fit(rng):
    # K (128 MiB in float64, 64 MiB in float32) above the limit, one 64 MiB row block of it
    # below.
    n = 4096
    X, y = regression(rng, n=n, d=2)
    for precision, itemsize in (("double", 8), ("mixed", 4)):
        stored = hkern.fit_exact(X, y, sigma=0.7, lam=1e-2, solver="pcg", r=100, tol=1e-9,
                                 seed=0, precision=precision)
        limit = itemsize * n * n - 2**20
        recomputed = hkern.fit_exact(X, y, sigma=0.7, lam=1e-2, solver="pcg", r=100,
                                     tol=1e-9, seed=0, max_memory=limit, precision=precision)
        assert stored.solver_trace_.stored_kernel
        assert not recomputed.solver_trace_.stored_kernel
        assert rel_norm(recomputed.dual_coef_, stored.dual_coef_) <= 1e-6


@pytest.mark.parametrize("preconditioner", ["block_rpcholesky", "hck"])
def test_pcg_is_the_same_for_any_n_jobs(rng, preconditioner):
    X, y = regression(rng, n=250)
    a, b = (hkern.fit_exact(X, y, sigma=0.9, lam=1e-3, solver="pcg", r=25, seed=3, n_jobs=j,
                            preconditioner=preconditioner) for j in (1, 2))
    assert np.array_equal(a.dual_coef_, b.dual_coef_) and a.n_iter_ == b.n_iter_


def test_pcg_validation_trace_and_verbose(rng, capsys):
    X, y = regression(rng, n=300)
    Xv, yv = regression(np.random.default_rng(9), n=80)
    model = hkern.fit_exact(X, y, sigma=0.8, lam=1e-3, solver="pcg", r=20, seed=0,
                            validation=(Xv, yv), verbose=True)
    trace = model.solver_trace_
    assert trace.validation_error.shape == (model.n_iter_ + 1,)
    final = np.sqrt(np.mean((model.predict(Xv) - yv) ** 2))
    assert abs(trace.validation_error[-1] - final) <= 1e-12
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == model.n_iter_ + 2 and "validation" in lines[-1]


def test_pcg_warns_when_max_iter_stops_it(rng):
    X, y = regression(rng)
    with pytest.warns(hkern.ConvergenceWarning, match="max_iter=2"):
        model = hkern.fit_exact(X, y, sigma=0.8, lam=1e-4, solver="pcg", r=5, tol=1e-12,
                                max_iter=2, seed=0)
    assert model.n_iter_ == 2 and not model.solver_trace_.converged


@pytest.mark.parametrize("kwargs,match", [
    (dict(solver="lu"), "solver"),
    (dict(solver="pcg", tol=0.0), "tol"),
    (dict(solver="pcg", tol=-1.0), "tol"),
    (dict(solver="pcg", max_iter=0), "max_iter"),
    (dict(solver="pcg", preconditioner="jacobi"), "preconditioner"),
    (dict(solver="pcg", r=300), r"r must be None or an integer in \[1, n - 1 = 299\], got 300"),
    (dict(solver="pcg", preconditioner="hck", r=300),
     r"r must be None or an integer in \[1, n - 1 = 299\], got 300"),
    (dict(solver="pcg", r=0), "r"),
    (dict(solver="pcg", validation=(np.ones((4, 2)), np.ones(4))), "features"),
    (dict(solver="pcg", validation=np.ones(3)), "pair"),
])
def test_pcg_bad_arguments(rng, kwargs, match):
    X, y = regression(rng)
    with pytest.raises(ValueError, match=match):
        hkern.fit_exact(X, y, sigma=1.0, lam=1e-2, **kwargs)


def test_auto_solver_and_the_likelihood(rng):
    X, y = regression(rng, n=200)
    assert hkern.fit_exact(X, y, solver="auto").n_iter_ is None       # small n: Cholesky
    # tol far below the default: the PCG model's signal variance comes from its answer, so
    # the two likelihoods agree to 1e-9 only when the answer does (at tol 1e-3 they agreed to
    # 4e-8 on one processor and better on another, by the luck of rounding)
    model = hkern.fit_exact(X, y, sigma=1.0, lam=1e-2, solver="pcg", r=20, seed=0, tol=1e-10)
    with pytest.raises(ValueError, match="iterative solver"):
        model.log_marginal_likelihood()
    ref = hkern.fit_exact(X, y, sigma=1.0, lam=1e-2)
    assert abs(model.log_marginal_likelihood(y) - ref.log_marginal_likelihood()) <= 1e-9 * abs(
        ref.log_marginal_likelihood())
    # lam="auto" is served by the iterative selection (tests/test_selection_iterative.py).
    selected = hkern.fit_exact(X, y, solver="pcg", r=20, sigma=1.0, lam="auto", seed=0)
    assert selected.sigma_ == 1.0 and selected.lam_ == selected.selection_.lam > 0
    assert selected.n_iter_ is not None


def test_the_estimator_runs_pcg_as_the_function(rng):
    from hkern.sklearn import ExactRegressor
    X, y = regression(rng, n=200)
    est = ExactRegressor(sigma=0.8, lam=1e-3, solver="pcg", r=20, random_state=0).fit(X, y)
    model = hkern.fit_exact(X, y, sigma=0.8, lam=1e-3, solver="pcg", r=20, seed=0)
    assert est.n_iter_ == model.n_iter_ > 0
    assert np.array_equal(est.predict(X), model.predict(X))


def test_block_pcg_accepts_fortran_ordered_right_hand_sides(rng):
    A, B = spd_system(rng, n=50)
    res = block_pcg(lambda V: A @ V, np.asfortranarray(B), tol=1e-10, max_iter=200)
    assert rel_norm(res.X, np.linalg.solve(A, B)) <= 1e-7


# --------------------------------------------------------------------------------------------
# FALKON: fit_nystrom(solver="pcg")
# --------------------------------------------------------------------------------------------
def normal_equations(X, Z, Y, sigma, lam, jitter):
    """The Nystrom normal equations' solution (C^T C + lam (W + jitter I)) alpha = C^T Y, from
    the dense kernel oracle and SciPy."""
    from oracles import dense_kernel
    C = dense_kernel(X, Z, kernel="gaussian", sigma=sigma)
    W = dense_kernel(Z, Z, kernel="gaussian", sigma=sigma) + jitter * np.eye(len(Z))
    return sla.solve(C.T @ C + lam * W, C.T @ Y, assume_a="pos"), C, W


@pytest.mark.parametrize("sigma", [0.6, 1.2])
def test_falkon_system_is_the_dense_preconditioned_system(rng, sigma):
    """B^T H B U, B^T C^T Y and B U against SciPy on the dense matrices, B = T^{-1} A^{-1}.

    The operator uses T^{-T} (lam W) T^{-1} = lam I; the literal product through W loses about
    eps cond(W) of relative accuracy in the reference itself, so it is compared at sigma = 0.6
    (cond(W) ~ 1e5); at sigma = 1.2 (cond(W) ~ 3e9) the reference uses the identity too.
    """
    from oracles import dense_kernel

    from hkern.solvers import FalkonSystem
    X = rng.standard_normal((400, 3))
    Z = np.ascontiguousarray(X[rng.choice(400, 150, replace=False)])   # 2 tiles of 128
    lam = 1e-2
    system = FalkonSystem(0, sigma, X, Z, lam, n_threads=2)
    C = dense_kernel(X, Z, kernel="gaussian", sigma=sigma)
    W = dense_kernel(Z, Z, kernel="gaussian", sigma=sigma) + system.jitter * np.eye(150)
    T = sla.cholesky(W, lower=False)                         # T^T T = W
    A = sla.cholesky(400 / 150 * T @ T.T + lam * np.eye(150), lower=False)

    def B(V):                                                # T^{-1} A^{-1} V
        return sla.solve_triangular(T, sla.solve_triangular(A, V))

    def Bt(V):                                               # A^{-T} T^{-T} V
        return sla.solve_triangular(A, sla.solve_triangular(T, V, trans=1), trans=1)

    U = rng.standard_normal((150, 2))
    Y = rng.standard_normal((400, 2))
    if sigma < 1:
        assert rel_norm(system(U), Bt((C.T @ C + lam * W) @ B(U))) <= 1e-9
    AU = sla.solve_triangular(A, U)
    simplified = sla.solve_triangular(
        A, sla.solve_triangular(T, C.T @ (C @ sla.solve_triangular(T, AU)), trans=1) + lam * AU,
        trans=1)
    assert rel_norm(system(U), simplified) <= (1e-11 if sigma < 1 else 1e-8)
    assert rel_norm(system.rhs(Y), Bt(C.T @ Y)) <= (1e-11 if sigma < 1 else 1e-8)
    assert rel_norm(system.coef(U), B(U)) <= (1e-11 if sigma < 1 else 1e-7)
    assert system.rank == 150 and system.jitter == 150 * np.finfo(float).eps
    other = FalkonSystem(0, sigma, X, Z, lam, n_threads=1)
    assert np.array_equal(other(U), system(U))
    # The same factors on other rows (a selection's final fit): B^T H B of those rows with
    # this B, and the solution the dense Nystrom KRR normal equations' there.
    X2 = np.vstack([X, rng.standard_normal((100, 3))])
    moved = system.on_rows(X2)
    C2 = dense_kernel(X2, Z, kernel="gaussian", sigma=sigma)
    assert moved.X is X2 and system.X is X and moved.rank == 150
    AU = sla.solve_triangular(A, U)
    expected = sla.solve_triangular(
        A, sla.solve_triangular(T, C2.T @ (C2 @ sla.solve_triangular(T, AU)), trans=1)
        + lam * AU, trans=1)
    assert rel_norm(moved(U), expected) <= (1e-11 if sigma < 1 else 1e-8)
    assert rel_norm(moved.rhs(Y2 := rng.standard_normal((500, 1))), Bt(C2.T @ Y2)) <= \
        (1e-11 if sigma < 1 else 1e-8)


@pytest.mark.parametrize("landmarks", ["uniform", "rpcholesky", "block_rpcholesky"])
def test_nystrom_pcg_solves_the_normal_equations(rng, landmarks):
    X, y = regression(rng, n=500)
    model = hkern.fit_nystrom(X, y, r=60, sigma=0.8, lam=1e-3, seed=0, solver="pcg",
                              landmarks=landmarks, tol=1e-12, max_iter=2000)
    jitter = model.solver_trace_.jitter
    alpha, C, W = normal_equations(X, model.landmarks_, y, 0.8, 1e-3, jitter)
    H = C.T @ C + 1e-3 * W
    assert np.linalg.norm(H @ model.coef_[:, 0] - C.T @ y) <= 1e-8 * np.linalg.norm(C.T @ y)
    assert rel_norm(model.coef_[:, 0], alpha) <= 1e-6
    direct = hkern.fit_nystrom(X, y, r=60, sigma=0.8, lam=1e-3, seed=0, landmarks=landmarks)
    assert np.array_equal(direct.landmark_indices_, model.landmark_indices_)
    assert rel_norm(model.predict(X), direct.predict(X)) <= 1e-6
    trace = model.solver_trace_
    assert trace.converged and trace.preconditioner == landmarks and trace.rank == 60
    assert model.n_iter_ == trace.residuals.shape[0] - 1 and model.rank_ == 60
    assert direct.n_iter_ is None and direct.solver_trace_ is None


def test_nystrom_pcg_multi_output_and_classification(rng):
    X, Y = regression(rng, n=400, k=3)
    model = hkern.fit_nystrom(X, Y, r=50, sigma=0.8, lam=1e-2, seed=1, solver="pcg",
                              tol=1e-12, max_iter=2000)
    alpha, _, _ = normal_equations(X, model.landmarks_, Y, 0.8, 1e-2, model.solver_trace_.jitter)
    assert rel_norm(model.coef_, alpha) <= 1e-7
    labels = np.where(X[:, 0] > 0.3, "a", np.where(X[:, 1] > 0, "b", "c"))
    clf = hkern.fit_nystrom(X, labels, r=50, sigma=0.8, lam=1e-2, seed=1, solver="pcg",
                            task="classification", tol=1e-10, max_iter=2000)
    ref = hkern.fit_nystrom(X, labels, r=50, sigma=0.8, lam=1e-2, seed=1,
                            task="classification")
    assert np.array_equal(clf.predict(X), ref.predict(X))


def test_nystrom_pcg_duplicated_centres(rng):
    """Repeated centres (W singular): W + m eps I still factorises, and the fit solves that
    system."""
    X, y = regression(rng, n=300)
    X[1:30:2] = X[0:29:2]
    model = hkern.fit_nystrom(X, y, r=30, sigma=0.8, lam=1e-3, landmarks=np.arange(30),
                              solver="pcg", tol=1e-12, max_iter=3000)
    from oracles import dense_kernel
    C = dense_kernel(X, X[:30], kernel="gaussian", sigma=0.8)
    H = C.T @ C + 1e-3 * (C[:30] + model.solver_trace_.jitter * np.eye(30))   # singular
    assert np.linalg.norm(H @ model.coef_[:, 0] - C.T @ y) <= 1e-8 * np.linalg.norm(C.T @ y)
    assert np.all(np.isfinite(model.predict(X)))


def test_falkon_retries_with_a_larger_jitter(rng, monkeypatch):
    """When W + jitter I does not factorise, the lower triangle is restored from the upper one
    and the jitter grows tenfold; past the last step a ValueError says what to do."""
    from hkern import _linalg
    from hkern.solvers import FalkonSystem, falkon
    real = _linalg.cholesky_pair
    failures = []

    def failing_twice(P, scale, lam, n_threads):
        if len(failures) < 2:
            failures.append(P.diagonal()[0] - 1.0)
            P[np.tril_indices(P.shape[0])] = np.nan       # what a failed dpotrf leaves
            return None
        return real(P, scale, lam, n_threads)

    X = rng.standard_normal((200, 2))
    Z = np.ascontiguousarray(X[:40])
    monkeypatch.setattr(falkon._linalg, "cholesky_pair", failing_twice)
    system = FalkonSystem(0, 0.5, X, Z, 1e-2)
    eps40 = 40 * np.finfo(float).eps
    assert np.allclose(failures, [eps40, 10 * eps40], rtol=1e-3, atol=0)
    assert system.jitter == pytest.approx(100 * eps40)
    monkeypatch.setattr(falkon._linalg, "cholesky_pair", real)
    U = rng.standard_normal((40, 1))
    from oracles import dense_kernel
    W = dense_kernel(Z, Z, kernel="gaussian", sigma=0.5) + system.jitter * np.eye(40)
    T = sla.cholesky(W, lower=False)
    A = sla.cholesky(200 / 40 * T @ T.T + 1e-2 * np.eye(40), lower=False)
    assert rel_norm(system.coef(U), sla.solve_triangular(T, sla.solve_triangular(A, U))) \
        <= 1e-11
    monkeypatch.setattr(falkon._linalg, "cholesky_pair", lambda *args: None)
    with pytest.raises(ValueError, match="singular"):
        FalkonSystem(0, 1.0, X, Z, 1e-2)


def test_nystrom_pcg_is_the_same_for_any_n_jobs(rng):
    X, y = regression(rng, n=3000)       # several row slabs of the kernel engine
    a = hkern.fit_nystrom(X, y, r=300, sigma=0.9, lam=1e-3, seed=3, solver="pcg", n_jobs=1)
    b = hkern.fit_nystrom(X, y, r=300, sigma=0.9, lam=1e-3, seed=3, solver="pcg", n_jobs=2)
    assert np.array_equal(a.coef_, b.coef_) and a.n_iter_ == b.n_iter_


def test_nystrom_pcg_validation_verbose_and_warning(rng, capsys):
    X, y = regression(rng, n=400)
    Xv, yv = regression(np.random.default_rng(9), n=80)
    model = hkern.fit_nystrom(X, y, r=40, sigma=0.8, lam=1e-3, seed=0, solver="pcg",
                              validation=(Xv, yv), verbose=True)
    errors = model.solver_trace_.validation_error
    assert errors.shape == (model.n_iter_ + 1,)
    assert abs(errors[-1] - np.sqrt(np.mean((model.predict(Xv) - yv) ** 2))) <= 1e-12
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == model.n_iter_ + 2 and "validation" in lines[-1]
    with pytest.warns(hkern.ConvergenceWarning, match="max_iter=2"):
        short = hkern.fit_nystrom(X, y, r=40, sigma=0.8, lam=1e-3, seed=0, solver="pcg",
                                  tol=1e-12, max_iter=2)
    assert short.n_iter_ == 2 and not short.solver_trace_.converged


@pytest.mark.parametrize("kwargs,match", [
    (dict(solver="cg"), "solver"),
    (dict(solver="pcg", tol=0.0), "tol"),
    (dict(solver="pcg", tol=np.nan), "tol"),
    (dict(solver="pcg", max_iter=0), "max_iter"),
    (dict(solver="pcg", r=0), "r"),             # above n: reduced with a warning
    (dict(solver="pcg", landmarks="jacobi"), "landmarks"),
    (dict(solver="pcg", validation=(np.ones((4, 2)), np.ones(4))), "features"),
    (dict(solver="pcg", max_memory=10**4), "smaller r"),
])
def test_nystrom_pcg_bad_arguments(rng, kwargs, match):
    X, y = regression(rng)
    with pytest.raises(ValueError, match=match):
        hkern.fit_nystrom(X, y, **{"r": 30, "sigma": 1.0, "lam": 1e-2, **kwargs})


def test_nystrom_pcg_selects_sigma_auto(rng):
    # Served by the iterative selection (tests/test_selection_iterative.py): FALKON's model.
    X, y = regression(rng, n=200)
    model = hkern.fit_nystrom(X, y, r=20, sigma="auto", lam=1e-2, solver="pcg", seed=0)
    assert model.lam_ == 1e-2 and model.sigma_ == model.selection_.sigma
    assert model.solver_trace_ is not None


def test_default_rank_stops_when_the_preconditioner_is_good_enough():
    """Without r, the Nystrom factor stops growing once the residual K - F F^T has a mean
    diagonal of at most lam / 50 (ADAPTIVE_RESIDUAL): a smooth kernel on 2000 points needs 160
    columns of the default's 500 (and 2 iterations).  The residual at the rank used meets the
    rule, the solution is Cholesky's to the tolerance, and a given r is used as it is."""
    from hkern.solvers.exact_pcg import ADAPTIVE_RESIDUAL, adaptive_min_rank, default_rank
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 2))
    y = zero_mean(np.sin(X[:, 0]) + 0.05 * rng.normal(size=2000))
    lam, sigma = 1e-1, 0.5
    model = hkern.fit_exact(X, y, solver="pcg", sigma=sigma, lam=lam, tol=1e-8, seed=0)
    rank = model.solver_trace_.rank
    assert adaptive_min_rank(2000, 2) == 120 <= rank < default_rank(2000) == 500
    from hkern.oasis.api import nystrom_factor
    F = nystrom_factor(X / sigma, rank, method="block_rpcholesky", kernel="gaussian", sigma=1.0,
                       seed=0, n_jobs=1, max_memory=None)
    assert np.mean(1.0 - np.einsum("ij,ij->i", F, F)) <= ADAPTIVE_RESIDUAL * lam
    K = hkern.kernel_matrix(X, X, sigma=sigma) + lam * np.eye(2000)
    exact = np.linalg.solve(K, y)
    assert np.linalg.norm(model.dual_coef_[:, 0] - exact) <= 1e-5 * np.linalg.norm(exact)
    # (A float32 factor, precision="mixed", also stops where its residual reaches float32's
    # rounding: here after about 320 columns.)
    given = hkern.fit_exact(X, y, solver="pcg", sigma=sigma, lam=lam, r=400, seed=0,
                            precision="double")
    assert given.solver_trace_.rank == 400


def test_the_residual_rule_waits_for_the_floor():
    """The trace rule stops block RPCholesky only once it has ``trace_stop_after`` columns
    (adaptive_min_rank: about one kernel pass of work, so that a cheap residual bound does not
    leave CG many expensive passes): a bound every factor meets stops it at once without the
    floor, and after the floor's columns (whole blocks) with it; the columns are the same
    pivots either way."""
    from hkern.oasis.api import nystrom_factor
    X = np.random.default_rng(1).normal(size=(1500, 3))
    kw = dict(method="block_rpcholesky", kernel="gaussian", sigma=0.7, seed=3, n_jobs=1,
              max_memory=None, trace_stop=1e9, return_pivots=True)
    F0, _ = nystrom_factor(X, 400, **kw)
    F, pivots = nystrom_factor(X, 400, trace_stop_after=150, **kw)
    full, all_pivots = nystrom_factor(X, 400, **{**kw, "trace_stop": 0.0})
    assert F0.shape[1] == 0
    assert 150 <= F.shape[1] < 400
    np.testing.assert_array_equal(pivots, all_pivots[:F.shape[1]])
    np.testing.assert_allclose(F, full[:, :F.shape[1]], rtol=0, atol=1e-12)


def test_a_float32_factor_of_duplicated_rows_ends(monkeypatch):
    """200 distinct points, each 10 times (keggundirected's rows repeat): once the distinct
    ones are pivots, the residual of every duplicate is 0, but a float32 factor's updates
    leave about 1e-7 of it in the kept diagonal, so block RPCholesky drew blocks whose every
    candidate's recomputed residual was rounding, accepted none, and drew again without end
    while the floor (trace_stop_after) kept it from stopping (fit_exact on keggundirected at
    sigma 8.3, lam 0.1: stuck for minutes).  It now ends at the first such block, and a
    float32 factor accepts no pivot whose residual is rounding: the 200 distinct points, K -
    F F^T at float32's rounding."""
    from hkern.oasis import block_rpcholesky as module
    from hkern.oasis.api import nystrom_factor
    real, blocks = module._accept, []

    def counted(*args):
        blocks.append(1)
        assert len(blocks) < 100, "block RPCholesky does not end"
        return real(*args)
    monkeypatch.setattr(module, "_accept", counted)
    X = np.repeat(np.random.default_rng(0).normal(size=(200, 5)), 10, axis=0)
    K = hkern.kernel_matrix(X, X, sigma=1.0)
    # Every seed: before the float32 pivot floor, seeds 0-3 took 251 to 276 columns (pivots
    # whose residual was rounding) and left K - F F^T at up to 1.1e-3.
    for seed in range(4):
        blocks.clear()
        F = nystrom_factor(X, 600, method="block_rpcholesky", kernel="gaussian", sigma=1.0,
                           seed=seed, n_jobs=1, max_memory=None, trace_stop=1e9,
                           trace_stop_after=600, dtype=np.float32)
        assert F.shape[1] == 200
        F64 = F.astype(np.float64)
        assert np.abs(K - F64 @ F64.T).max() < 1e-5


def test_every_preconditioner_offers_the_declared_interface(rng):
    """Each preconditioner kind fit_exact names builds a Preconditioner (M^{-1} and its rank):
    the Nystrom kinds invert F F^T + lam I (checked against the dense matrix here; HCK's
    against the dense K_hier + lam I in test_hck_preconditioner_is_the_dense_inverse), and
    also offer what stochastic Lanczos quadrature needs (log det M), as the identity does."""
    from hkern._model import prepare_fit
    from hkern.solvers.preconditioners import (
        IdentityPreconditioner,
        LikelihoodPreconditioner,
        Preconditioner,
        registered_preconditioners,
    )
    PRECONDITIONERS = registered_preconditioners()
    X, y = rng.normal(size=(120, 3)), rng.normal(size=120)
    inputs = prepare_fit(X, y, kernel="gaussian", sigma=1.5, lam=0.1, task="regression")
    R = rng.normal(size=(120, 2))
    assert set(PRECONDITIONERS) == {"block_rpcholesky", "rpcholesky", "oasis", "greedy",
                                    "uniform", "hck"}
    for name, kind in PRECONDITIONERS.items():
        assert kind.name == name
        M = kind.build(inputs, 20, seed=0, n_threads=1, max_memory=None)
        assert isinstance(M, Preconditioner) and M.rank == 20
        assert kind.peak_bytes(120, 3, 2, 20, 1) > 0
        if name != "hck":
            assert isinstance(M, LikelihoodPreconditioner)
            dense = M.F @ M.F.T + 0.1 * np.eye(120)
            assert np.allclose(dense @ M(R), R, atol=1e-9)
            assert np.isclose(M.logdet(), np.linalg.slogdet(dense)[1], rtol=1e-10)
    assert isinstance(IdentityPreconditioner(5), LikelihoodPreconditioner)


def test_the_hck_preconditioner_is_found_by_name_in_a_fresh_interpreter():
    """fit_exact sits below the hierarchical package and imports nothing of it: it finds the
    HCK preconditioner by name in the registry, which the hierarchical package fills when it is
    imported.  Importing the fit alone imports hkern (its parent package), which imports the
    hierarchical package: the registry is full before the first call."""
    out = run_python("""
        import numpy as np
        from hkern.exact import fit_exact
        rng = np.random.default_rng(0)
        X = rng.normal(size=(300, 2)); y = np.sin(X[:, 0])
        model = fit_exact(X, y, sigma=1.0, lam=0.1, solver="pcg", preconditioner="hck", r=16,
                          seed=0)
        assert model.solver_trace_.preconditioner == "hck", model.solver_trace_.preconditioner
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_an_unknown_preconditioner_name_is_refused_clearly():
    from hkern.solvers.preconditioners import preconditioner_kind, registered_preconditioners
    assert {"block_rpcholesky", "hck"} <= set(registered_preconditioners())
    assert preconditioner_kind("hck").name == "hck"
    with pytest.raises(ValueError, match=r"^no preconditioner is named 'nope'; the registered "
                                         r"ones are 'oasis', .*'block_rpcholesky', .*'hck'"):
        preconditioner_kind("nope")
    X = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match=r"^preconditioner must be one of 'oasis', .*'hck'"):
        hkern.fit_exact(X, X[:, 0], sigma=1.0, lam=0.1, solver="pcg", preconditioner="nope")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_early_stopped_factor_is_used_in_place(dtype):
    """Block RPCholesky stores F transposed and returns its filled rows as a view: a factor
    that stops at its trace (the adaptive preconditioner) is neither copied nor widened, and
    the Nystrom preconditioner keeps that view.  M^{-1} still inverts F F^T + lam I."""
    from hkern.oasis.api import nystrom_factor
    X = np.random.default_rng(1).normal(size=(600, 3))
    F = nystrom_factor(X, 300, method="block_rpcholesky", kernel="gaussian", sigma=2.0, seed=0,
                       n_jobs=1, max_memory=None, trace_stop=1e-3, trace_stop_after=20,
                       dtype=dtype)
    assert 20 <= F.shape[1] < 300 and F.dtype == dtype
    assert not F.flags.owndata and F.flags.f_contiguous
    M = NystromPreconditioner(F, 0.1)
    assert M.F is F
    F64 = F.astype(np.float64)
    A = F64 @ F64.T + 0.1 * np.eye(600)
    R = np.random.default_rng(2).normal(size=(600, 2))
    # float32 products, their rounding amplified by up to ||F||^2 / lam = 6e3: about 4e-4.
    assert rel_norm(A @ M(R), R) < (1e-10 if dtype == np.float64 else 1e-3)

"""Hyperparameter selection for the iterative solvers (hkern/hyperparameters/iterative.py):
``sigma="auto"|"ard"``, ``lam="auto"`` with ``fit_exact(solver="pcg")`` and
``fit_nystrom(solver="pcg")``, the ``criterion`` argument of every selecting fit, and the
refusals that come before any work."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import hkern
from hkern.hyperparameters import exact_gp
from hkern.hyperparameters.iterative import HOLDOUT_FRACTION_ITERATIVE


def data(n=1200, d=3, seed=0, n_test=400):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n + n_test, d)) * np.array([1.0, 3.0, 10.0])[:d]
    f = np.sin(3 * X[:, 0]) + 0.1 * X[:, 1]
    y = f + 0.05 * rng.standard_normal(n + n_test)
    return X[:n], y[:n], X[n:], f[n:]


def rmse(model, X, f):
    return float(np.sqrt(np.mean((model.predict(X) - f) ** 2)))


@pytest.fixture(scope="module")
def problem():
    return data()


@pytest.fixture(scope="module")
def exact_pcg_ard(problem):
    X, y, _, _ = problem
    return hkern.fit_exact(X, y, solver="pcg", sigma="ard", lam="auto", r=200, seed=0,
                           tol=1e-8)


def test_exact_pcg_selects_ard_lengthscales_and_lam(problem, exact_pcg_ard):
    X, y, X_test, f_test = problem
    model = exact_pcg_ard
    record = model.selection_
    assert record.criterion.startswith("hold-out")
    assert record.sigma_mode == "ard" and record.lam_mode == "auto"
    assert np.shape(model.sigma_) == (3,) and model.lam_ == record.lam
    np.testing.assert_array_equal(model.sigma_, record.sigma)
    # The solver's answer at the chosen values is the dense solve (tol 1e-8).
    K = hkern.kernel_matrix(X / model.sigma_, X / model.sigma_, sigma=1.0)
    alpha = np.linalg.solve(K + model.lam_ * np.eye(len(X)), y - y.mean())     # y minus its mean
    np.testing.assert_allclose(model.dual_coef_[:, 0], alpha, rtol=1e-5, atol=1e-6)
    # As good as the Cholesky solver's own selection (likelihood), on noise-free test values.
    direct = hkern.fit_exact(X, y, sigma="ard", lam="auto", seed=0)
    assert rmse(model, X_test, f_test) <= 1.5 * rmse(direct, X_test, f_test) + 0.005
    # The irrelevant third input (scaled 10x) gets a long lengthscale, the first a short one.
    assert model.sigma_[0] < 2.0 and model.sigma_[2] > 5 * model.sigma_[0]


def test_holdout_candidates_see_nine_tenths_of_the_rows(problem, exact_pcg_ard, monkeypatch):
    record = exact_pcg_ard.selection_
    assert 2 <= record.n_evaluations <= 14
    assert record.best == int(np.argmax([c.value for c in record.candidates]))
    assert all(c.value < 0 for c in record.candidates)       # minus a mean squared error
    assert 0 < HOLDOUT_FRACTION_ITERATIVE < 0.5


def test_same_seed_same_selection_for_any_n_jobs(problem):
    X, y, _, _ = problem
    one = hkern.fit_exact(X, y, solver="pcg", sigma="auto", lam="auto", r=100, seed=3,
                          n_jobs=1)
    two = hkern.fit_exact(X, y, solver="pcg", sigma="auto", lam="auto", r=100, seed=3,
                          n_jobs=2)
    assert one.sigma_ == two.sigma_ and one.lam_ == two.lam_
    np.testing.assert_array_equal(one.dual_coef_, two.dual_coef_)


def test_the_search_at_full_n_moves_its_bracket_once(problem, monkeypatch):
    """From a start far from the optimum (the subsample's bandwidth times 8, nine steps of
    log 1.25 away), the search on all rows moves its bracket once: the start, one step
    towards the better side, one move three steps out, and no further (each further move
    costs more than any candidate before it); the best of those is chosen."""
    from hkern.hyperparameters import subsample
    X, y, _, _ = problem
    real = subsample._subsample_start

    def far(*args, **kw):
        sigma, lam, lml, size = real(*args, **kw)
        return sigma * 8.0, lam, lml, size
    monkeypatch.setattr(subsample, "_subsample_start", far)
    model = hkern.fit_exact(X, y, solver="pcg", sigma="ard", lam="auto", r=100, seed=0)
    record = model.selection_
    start = np.asarray(record.candidates[0].sigma)
    ard = record.candidates[:record.isotropic_from]     # (then the one-bandwidth search)
    steps = [np.log(np.asarray(c.sigma)[0] / start[0]) / np.log(1.25) for c in ard]
    np.testing.assert_allclose(steps, [0, -1, -3], atol=1e-9)
    assert record.best == 2


def _candidate_precisions(monkeypatch):
    """The precision of every hold-out candidate's solve (a spy on solve_pcg)."""
    from hkern.hyperparameters import exact_pcg_problem as exact
    seen, real = [], exact.solve_pcg

    def spy(inputs, **kw):
        if kw.get("error") is not None:         # a hold-out candidate (the final fit has none)
            seen.append(kw["precision"])
        return real(inputs, **kw)
    monkeypatch.setattr(exact, "solve_pcg", spy)
    return seen


def test_holdout_candidates_run_in_the_precision_auto_chooses(problem, monkeypatch):
    """precision="auto" runs each hold-out candidate as the final fit would run at its values
    (mixed where float32_reach is small): the same choice as in double, to the selection's
    accuracy."""
    X, y, _, _ = problem
    seen = _candidate_precisions(monkeypatch)
    mixed = hkern.fit_exact(X, y, solver="pcg", sigma="auto", lam=0.1, r=100, seed=0)
    assert seen and set(seen) == {"mixed"}
    seen.clear()
    double = hkern.fit_exact(X, y, solver="pcg", sigma="auto", lam=0.1, r=100, seed=0,
                             precision="double")
    assert set(seen) == {"double"}
    assert mixed.sigma_ == pytest.approx(double.sigma_, rel=0.02)
    assert [c.value for c in mixed.selection_.candidates] == pytest.approx(
        [c.value for c in double.selection_.candidates], rel=1e-3)


def test_the_final_fit_extends_the_chosen_candidates_factor(problem, monkeypatch):
    """The selection's final fit builds no Nystrom factor by column selection: it rebuilds
    the chosen hold-out candidate's on all rows from its pivots (one factor per bandwidth
    tried, none more), and reaches the same answer as a fit at the chosen values alone."""
    from hkern.solvers import exact_pcg
    X, y, _, _ = problem
    real, built = exact_pcg.nystrom_factor, []

    def counted(X_, *args, **kw):
        built.append(X_.shape[0])
        return real(X_, *args, **kw)
    monkeypatch.setattr(exact_pcg, "nystrom_factor", counted)
    model = hkern.fit_exact(X, y, solver="pcg", sigma="ard", lam="auto", r=100, seed=0,
                            tol=1e-8)
    bandwidths = {np.asarray(c.sigma).tobytes() for c in model.selection_.candidates}
    assert len(built) == len(bandwidths) and len(X) not in built
    alone = hkern.fit_exact(X, y, solver="pcg", sigma=model.sigma_, lam=model.lam_, r=100,
                            seed=0, tol=1e-8)
    np.testing.assert_allclose(model.dual_coef_, alone.dual_coef_, rtol=1e-5, atol=1e-6)


def test_candidates_of_a_bandwidth_search_keep_pivots_not_factors(problem, monkeypatch):
    """Where the search moves the bandwidth a candidate keeps its factor's pivots and T (k x
    k), not the n x k factor (two factors at once doubled the selection's peak memory), and
    F rebuilt from them on all rows is the extension of the candidate's factor: its rows
    equal to rounding, the new rows K(x, Z) T^{-T}."""
    from hkern.hyperparameters.exact_pcg_problem import ExactPCGProblem
    from hkern.solvers.exact_pcg import extended_preconditioner, preconditioner_from_pivots
    X, y, _, _ = problem
    seen, current = [], {}
    real_holdout, real_state = ExactPCGProblem._holdout, ExactPCGProblem._state

    def holdout(self, inputs, *args):
        current["inputs"] = inputs
        return real_holdout(self, inputs, *args)

    def state(self, alpha, apply_m, rows):
        kept = real_state(self, alpha, apply_m, rows)
        seen.append((kept, apply_m, rows, current["inputs"]))
        return kept
    monkeypatch.setattr(ExactPCGProblem, "_holdout", holdout)
    monkeypatch.setattr(ExactPCGProblem, "_state", state)
    hkern.fit_exact(X, y, solver="pcg", sigma="ard", lam="auto", r=100, seed=0)
    assert seen
    for kept, apply_m, rows, _ in seen:
        k = apply_m.F.shape[1]
        assert kept.preconditioner is None and kept.pivot_factor.shape == (k, k)
        np.testing.assert_array_equal(kept.pivots, rows[apply_m.pivots])
    kept, apply_m, rows, inputs = seen[-1]
    # All rows of the scaled X the candidate saw: X / sigma (its inputs hold X[rows] / sigma).
    scaled = X / (X[rows][0] / inputs.X[0])
    rebuilt = preconditioner_from_pivots(kept.pivots, kept.pivot_factor, scaled, inputs.kind,
                                         inputs.bandwidth, 1e-2, 1)
    extended = extended_preconditioner(apply_m, scaled, rows, inputs.kind, inputs.bandwidth,
                                       1e-2, 1, None)
    # The same Nystrom approximation K(X, Z) K(Z, Z)^{-1} K(Z, X) (whose diagonal is at most
    # 1) and the same M^{-1}; single entries of F differ by T's rounding amplified by its
    # smallest pivots (up to 1e-8 here).
    np.testing.assert_allclose(rebuilt.F @ rebuilt.F.T, extended.F @ extended.F.T, rtol=0,
                               atol=1e-10)
    R = np.random.default_rng(1).standard_normal((len(X), 2))
    np.testing.assert_allclose(rebuilt(R), extended(R), rtol=1e-8, atol=1e-8)
    # With the candidate's F^T F kept, only the new rows' share is computed.
    reused = preconditioner_from_pivots(kept.pivots, kept.pivot_factor, scaled, inputs.kind,
                                        inputs.bandwidth, 1e-2, 1, gram=kept.gram, rows=rows)
    np.testing.assert_array_equal(reused.F, rebuilt.F)
    np.testing.assert_allclose(reused.gram, extended.gram, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(reused(R), extended(R), rtol=1e-8, atol=1e-8)


def test_an_early_stopped_factor_is_built_again_for_the_final_fit(problem, monkeypatch):
    """Without r, where the residual rule stopped the candidates' factors early (cheap ones,
    and few iterations), the final fit builds its own on all rows and starts from zero: its
    first recorded residual is the zero start's, 1."""
    from hkern.solvers import exact_pcg
    X, y, _, _ = problem
    real, built = exact_pcg.nystrom_factor, []

    def counted(X_, r, *args, **kw):
        F = real(X_, r, *args, **kw)
        built.append((X_.shape[0], r, F[0].shape[1]))
        return F
    monkeypatch.setattr(exact_pcg, "nystrom_factor", counted)
    model = hkern.fit_exact(X, y, solver="pcg", sigma="ard", lam="auto", seed=0, tol=1e-8)
    # the final fit's factor, on all rows, stopped early (some candidates of the one-bandwidth
    # search that "ard" is compared with may reach their rank)
    assert all(columns < rank for rows, rank, columns in built if rows == len(X))
    assert [rows for rows, _, _ in built].count(len(X)) == 1
    assert model.solver_trace_.residuals[0, 0] == pytest.approx(1.0)
    alone = hkern.fit_exact(X, y, solver="pcg", sigma=model.sigma_, lam=model.lam_, seed=0,
                            tol=1e-8)
    np.testing.assert_allclose(model.dual_coef_, alone.dual_coef_, rtol=1e-5, atol=1e-6)


def test_falkons_final_fit_reuses_the_chosen_candidates_factors(problem, monkeypatch):
    """One FalkonSystem (its m x m factor pair) per candidate, none for the final fit, which
    solves the same system as a fit at the chosen values alone."""
    from hkern.solvers import falkon
    X, y, _, _ = problem
    built, real = [], falkon.FalkonSystem.__init__

    def counted(self, *args, **kw):
        real(self, *args, **kw)         # a float32 pair refused by precision="auto"'s pivot
        built.append(args[2].shape[0])  # test is not kept: counted are the pairs built
    monkeypatch.setattr(falkon.FalkonSystem, "__init__", counted)
    model = hkern.fit_nystrom(X, y, 150, solver="pcg", sigma="ard", lam="auto", seed=0,
                              tol=1e-10)
    assert len(built) == model.selection_.n_evaluations and len(X) not in built
    alone = hkern.fit_nystrom(X, y, 150, solver="pcg", sigma=model.sigma_, lam=model.lam_,
                              seed=0, tol=1e-10)
    np.testing.assert_allclose(model.predict(X), alone.predict(X), rtol=1e-6, atol=1e-6)


def test_a_geometrically_converging_loser_stops_early():
    """The early stop's extrapolation: a hold-out error falling 0.3 of the last window's
    fall each window heads for its limit; the candidate stops when that is above 1.5 times
    the best, and runs on when it is not, or when the falls do not shrink."""
    from hkern.hyperparameters.iterative_problem import (
        LOSING_FACTOR,
        LosingCandidate,
        SelectionProblem,
        geometric_limit,
    )
    assert geometric_limit(1.0, 0.5, 0.35) == pytest.approx(0.35 - 0.15 * 0.3 / 0.7)
    assert geometric_limit(1.0, 0.5, 0.1) == -np.inf          # the falls grew (q = 0.8)
    assert geometric_limit(None, 0.5, 0.4) == -np.inf
    assert geometric_limit(0.5, 0.5, 0.4) == -np.inf

    def run(limit, best):
        view = SelectionProblem.__new__(SelectionProblem)
        errors = iter(limit + 0.3 ** np.arange(200) / 5)     # one per check (5 iterations)
        view.held_out_mse = lambda *args: next(errors)
        stop = view.losing_stopper(None, None, None, best, 1)
        for it in range(200):
            try:
                stop(None)
            except LosingCandidate as losing:
                return it, losing.mse
        return None, None
    # Heads for twice the best: stopped at the first check with three errors (iterations 10,
    # 15, 20), where each still falls by far more than 5% of itself.
    it, mse = run(limit=0.02, best=0.01)
    assert it == 20 and mse > LOSING_FACTOR * 0.01
    assert run(limit=0.012, best=0.01) == (None, None)    # heads for below 1.5 times the best


def test_a_mixed_candidate_that_fails_runs_in_double(problem, monkeypatch):
    from hkern.hyperparameters import exact_pcg_problem as exact
    X, y, _, _ = problem
    real = exact.solve_pcg
    seen = []

    def mixed_fails(inputs, **kw):
        if kw.get("error") is not None:
            seen.append(kw["precision"])
            if kw["precision"] == "mixed":
                raise np.linalg.LinAlgError("K + lam I is not positive definite in float32")
        return real(inputs, **kw)
    monkeypatch.setattr(exact, "solve_pcg", mixed_fails)
    model = hkern.fit_exact(X, y, solver="pcg", sigma="auto", lam=0.1, r=100, seed=0)
    assert seen[:2] == ["mixed", "double"] and len(seen) % 2 == 0
    assert all(np.isfinite(c.value) for c in model.selection_.candidates)


def test_falkon_selects_sigma_and_lam(problem):
    X, y, X_test, f_test = problem
    model = hkern.fit_nystrom(X, y, 150, solver="pcg", sigma="auto", lam="auto", seed=0,
                              tol=1e-8)
    assert model.selection_ is not None and model.solver_trace_ is not None
    direct = hkern.fit_nystrom(X, y, 150, sigma="auto", lam="auto", seed=0)
    assert rmse(model, X_test, f_test) <= 1.5 * rmse(direct, X_test, f_test) + 0.005
    # The model is the fit at the chosen values (same centres), from its warm start.
    again = hkern.fit_nystrom(X, y, 150, solver="pcg", sigma=model.sigma_, lam=model.lam_,
                              seed=0, tol=1e-8)
    np.testing.assert_array_equal(again.landmark_indices_, model.landmark_indices_)
    # Two CG runs from different starts, both to a relative residual of 1e-8 in FALKON's
    # preconditioned system: their predictions agree to about 1e-6 (1.4e-6 seen).
    np.testing.assert_allclose(again.predict(X_test), model.predict(X_test), atol=1e-5)


def test_classification_with_selection_by_pcg(problem):
    X, y, X_test, f_test = problem
    labels = np.where(y > 0, "up", "down")
    model = hkern.fit_exact(X, labels, solver="pcg", sigma="auto", lam="auto", r=100, seed=0,
                            task="classification")
    assert np.mean(model.predict(X_test) == np.where(f_test > 0, "up", "down")) > 0.9


def test_holdout_criterion_on_a_direct_solver(problem):
    X, y, X_test, f_test = problem
    model = hkern.fit_exact(X, y, sigma="auto", lam="auto", seed=0, criterion="holdout")
    assert model.selection_.criterion.startswith("hold-out")
    assert model.selection_.refit_seconds > 0          # the chosen values fitted on all rows
    likelihood = hkern.fit_exact(X, y, sigma="auto", lam="auto", seed=0)
    assert likelihood.selection_.criterion.startswith("profiled")
    assert rmse(model, X_test, f_test) <= 1.5 * rmse(likelihood, X_test, f_test) + 0.005


SELECTING_FITS = [hkern.fit_exact, hkern.fit_nystrom, hkern.fit_rff, hkern.fit_hierarchical,
                  hkern.fit_independent, hkern.fit_meka, hkern.fit_slkl, hkern.fit_slkl_unif,
                  hkern.fit_slkl_krrm]


@pytest.mark.parametrize("fit", SELECTING_FITS, ids=lambda f: f.__name__)
def test_every_selecting_fit_takes_criterion_before_verbose(fit):
    names = list(inspect.signature(fit).parameters)
    assert names.index("criterion") == names.index("verbose") - 1
    assert inspect.signature(fit).parameters["criterion"].default == "auto"
    # documented, or documented by the fit whose parameters it shares
    assert "criterion : " in fit.__doc__ or "Parameters as for" in fit.__doc__ \
        or ", criterion, verbose\n" in fit.__doc__


def test_a_bad_criterion_is_refused(problem):
    X, y, _, _ = problem
    with pytest.raises(ValueError, match="criterion must be one of"):
        hkern.fit_exact(X, y, sigma="auto", criterion="aic")
    with pytest.raises(ValueError, match="criterion='holdout'"):
        hkern.fit_meka(X, y, 5, n_clusters=3, sigma="auto", criterion="likelihood")


@pytest.mark.parametrize("call, match", [
    (lambda X, y: hkern.fit_exact(X, y, solver="pcg", sigma="ard", r=len(y)), "r must be"),
    (lambda X, y: hkern.fit_exact(X, y, solver="pcg", lam="auto", tol=0), "tol"),
    (lambda X, y: hkern.fit_exact(X, y, solver="pcg", sigma="auto", max_iter=0), "max_iter"),
    (lambda X, y: hkern.fit_exact(X, y, solver="pcg", sigma="auto", preconditioner="hck"),
     "Nystrom preconditioners"),
    (lambda X, y: hkern.fit_exact(X, y, solver="pcg", sigma="auto",
                                  validation=(X[:5, :2], y[:5])), "validation X"),
    (lambda X, y: hkern.fit_nystrom(X, y, 0, solver="pcg", sigma="auto"),
     "r must be an integer >= 1"),
    (lambda X, y: hkern.fit_nystrom(X, y, 10, solver="pcg", lam="auto", tol=-1), "tol"),
    (lambda X, y: hkern.fit_nystrom(X, y, 10, solver="pcg", sigma="ard",
                                    validation=(X[:5], y[:4])), "4 rows"),
], ids=["exact-r", "exact-tol", "exact-max_iter", "exact-hck", "exact-validation",
        "nystrom-r", "nystrom-tol", "nystrom-validation"])
def test_unservable_combinations_are_refused_before_any_work(problem, call, match,
                                                             monkeypatch):
    X, y, _, _ = problem

    def no_work(*args, **kwargs):
        raise AssertionError("the selection started work before refusing")
    monkeypatch.setattr(exact_gp, "fit_exact_gp", no_work)
    from hkern.hyperparameters import subsample
    monkeypatch.setattr(subsample, "fit_exact_gp", no_work)
    with pytest.raises(ValueError, match=match):
        call(X, y)


# ---------------------------------------------------------------- the likelihood criterion

def _problem_arguments(X, y, **extra):
    return dict(X=X, y=y, kernel="gaussian", sigma="auto", lam="auto", task="regression",
                seed=0, n_jobs=None, tol=1e-4, max_iter=1000, validation=None, verbose=False,
                max_memory=None, **extra)


def test_exact_pcg_likelihood_is_the_dense_profiled_likelihood(problem):
    from hkern._gp import profiled_gaussian_lml
    from hkern._threads import in_budget
    from hkern.exact.api import _selection_problem
    X, y, _, _ = problem
    sigma, lam = np.array([0.4, 2.0, 8.0]), 1e-2
    with in_budget(None):
        view = _selection_problem(_problem_arguments(
            X, y, r=150, preconditioner="block_rpcholesky", solver="pcg", precision="auto"))
        value, stderr, state = view.likelihood(sigma, lam, None, 1e-8, 30, 0)
    # The candidates see y / rms(y) on a grid (so that c * y makes the same choice).
    value, alpha = view.to_user_units(value, "likelihood"), state.alpha * view.y_scale
    A = hkern.kernel_matrix(X / sigma, X / sigma, sigma=1.0) + lam * np.eye(len(X))
    yc = y - y.mean()       # the model's GP is of y minus its mean
    dense = float(profiled_gaussian_lml(np.array([yc @ np.linalg.solve(A, yc)]),
                                        np.linalg.slogdet(A)[1], len(X)))
    assert abs(value - dense) <= 3 * stderr and abs(value - dense) <= 0.01 * abs(dense)
    np.testing.assert_allclose(alpha[:, 0], np.linalg.solve(A, yc), rtol=1e-5, atol=1e-6)


def test_falkon_likelihood_is_the_nystrom_gp_likelihood(problem):
    from hkern._threads import in_budget
    from hkern.nystrom.api import _selection_problem
    X, y, _, _ = problem
    sigma, lam = 1.5, 1e-2
    with in_budget(None):
        view = _selection_problem(_problem_arguments(
            X, y, r=60, landmarks="uniform", rcond=1e-12, solver="pcg", precision="auto"))
        value, stderr, _ = view.likelihood(sigma, lam, None, 1e-10, 30, 0)
    value = view.to_user_units(value, "likelihood")         # of y, not of y / rms(y)
    # The direct solver's likelihood of the same centres, from its eigendecomposition of W.
    direct = hkern.fit_nystrom(X, y, 60, sigma=sigma, lam=lam, landmarks=view._indices)
    dense = direct._evidence.profiled_lml()
    assert abs(value - dense) <= 3 * stderr + 1e-6 * abs(dense)
    assert abs(value - dense) <= 0.01 * abs(dense)


@pytest.mark.parametrize("fit, size", [(hkern.fit_exact, {"r": 100}),
                                       (hkern.fit_nystrom, {"r": 100})],
                         ids=["exact", "falkon"])
def test_the_likelihood_criterion_selects(problem, fit, size):
    X, y, X_test, f_test = problem
    model = fit(X, y, solver="pcg", sigma="auto", lam="auto", seed=0, criterion="likelihood",
                **size)
    assert model.selection_.criterion.startswith("profiled log marginal likelihood")
    assert all(np.isfinite(c.value) for c in model.selection_.candidates)
    assert rmse(model, X_test, f_test) < 0.1

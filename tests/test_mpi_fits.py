"""Fits on data sharded over MPI ranks (issue 20): each rank passes its own rows and gets the
serial fit of the concatenated shards, bit for bit; an error on any rank ends every rank
promptly with the message.  Launched with mpiexec (tests/mpi_fits_run.py); needs the optional
extra hkern[mpi], which CI installs.
"""
import hashlib
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from mpi_records import ENV, MPIEXEC, assert_raised_everywhere, records

import hkern
from hkern._mpi import block_layout

pytest.importorskip("mpi4py", reason="fits on MPI need the optional extra hkern[mpi]")
if MPIEXEC is None:
    pytest.skip("mpiexec not found (install hkern[mpi])", allow_module_level=True)

from mpi_fits_run import FIT, HCK, hck_problem, layout, problem  # noqa: E402  (imports mpi4py)

SCRIPT = os.path.join(os.path.dirname(__file__), "mpi_fits_run.py")
TIMEOUT = 300
# An error must end every rank within 10 s (issue 20).  A launch of 3 ranks spends 1.5-3 s
# starting Python and importing hkern on this machine's two cores before the error.
PROMPT = 10


def launch(ranks, *cases, uncaught=False):
    start = time.monotonic()
    out = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, SCRIPT,
                          *(["--uncaught"] if uncaught else []), *cases],
                         capture_output=True, text=True, timeout=TIMEOUT, env=ENV)
    return out, time.monotonic() - start


def by_case(stdout):
    cases = {}
    for rec in records(stdout):
        cases.setdefault(rec["case"], {})[rec["rank"]] = rec
    return cases


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def serial(task="regression", r=300, **changes):
    """The serial fit of the concatenated data: the digest of coef_, a function of the rank
    count giving the digests of each rank's test predictions, and the model."""
    X, y, Xt = problem(task=task)
    model = hkern.fit_nystrom(X, y, r, **dict(FIT, task=task, **changes))

    def predictions(ranks):
        # Each rank's own test points, predicted together as the rank predicts them: BLAS
        # kernels for small matrices sum in another order, so a point's prediction may differ
        # in the last bit with the batch it is predicted in -- serially too.
        off = block_layout(len(Xt), ranks)
        return {p: digest(model.predict(Xt[off[p]:off[p + 1]])) for p in range(ranks)}
    return digest(model.coef_), predictions, model


def assert_serial(recs, ranks, coef, predictions):
    """Every rank holds the serial coefficients and predicts its test points as the serial
    model does, bit for bit."""
    assert sorted(recs) == list(range(ranks))
    assert all(rec["outcome"] == "ok" for rec in recs.values()), recs
    assert {rec["coef"] for rec in recs.values()} == {coef}
    assert {p: rec["pred"] for p, rec in recs.items()} == predictions(ranks)


OK_CASES = ["even", "last", "ragged", "many_centres", "classification", "validation",
            "seed_none", "given_landmarks", "oasis_landmarks", "tiny_shard_on_rank1",
            "hck_even", "hck_last", "hck_ragged", "hck_classification", "hck_criteria",
            "hck_select", "nystrom_select", "hck_zero_targets", "nystrom_zero_targets"]
ERROR_CASES = {
    # case: (exception type, text of the message, the rank named in it or None)
    "lam_bad_on_rank1": ("ValueError", "lam must be a real number > 0", 1),
    "tol_differs": ("ValueError", "differ between ranks: tol", None),
    "nan_on_rank1": ("ValueError", "X contains NaN", 1),
    "d_differs_on_last": ("ValueError", "X has 4 features on rank 0 but 5 on rank", None),
    "all_empty": ("ValueError", "every rank's shard is empty", None),
    "direct_refused": ("ValueError", "pass solver='pcg'", None),
    "n_jobs_bad_on_rank1": ("ValueError", "n_jobs must be None or a non-zero integer", 1),
    "memory_on_rank1": ("MemoryLimitError", "fit_nystrom on rank 1 of", 1),
    # (r above n is reduced with a warning on every rank, as serially: not an error)
    "oasis_r_zero": ("ValueError", "r must be an integer", None),
    "hck_r_zero": ("ValueError", "r must be an integer >= 1", None),
    "hck_nan_y_on_rank1": ("ValueError", "y contains NaN", 1),
    "hck_solve_bad_rows_on_rank1": ("ValueError", "B must have shape", 1),
    "hck_select_holdout_refused": ("ValueError", "by their likelihood: pass criterion='auto' "
                                   "or 'likelihood'", None),
    "nystrom_select_likelihood_refused": ("ValueError", "on held-out rows: pass "
                                          "criterion='auto' or 'holdout'", None),
    "nystrom_select_oasis_refused": ("ValueError", "pass landmarks='uniform' or row indices",
                                     None),
    "select_sigma_differs": ("ValueError", "differ between ranks: sigma", None),
    "hck_memory_on_rank1": ("MemoryLimitError", "fit_hierarchical on rank 1 of", 1),
    "hck_std_of_classifier": ("ValueError", "predict(X, return_std=True) is defined for "
                              "regression", None),
}


@pytest.fixture(scope="module", params=[1, 2, 4])
def runs(request):
    """Every case in one launch per rank count (4 ranks oversubscribe the two cores)."""
    out, _ = launch(request.param, *OK_CASES, *ERROR_CASES)
    assert out.returncode == 0, out.stderr[-3000:]
    return request.param, by_case(out.stdout)


@pytest.mark.parametrize("case", ["even", "last", "ragged"])
def test_nystrom_pcg_equals_the_serial_fit_bitwise(runs, case):
    """Even shards, every row on the last rank (the others empty), and ragged cuts: the
    coefficients on every rank and the gathered predictions are the serial fit's, bit for
    bit, for 1, 2 and 4 ranks."""
    ranks, got = runs
    coef, predictions, _ = serial()
    assert_serial(got[case], ranks, coef, predictions)


def test_ragged_cuts_continue_slabs_across_ranks():
    """The ragged layout puts shard boundaries inside slabs of the kernel engine's row blocks,
    so that the sharded products continue a slab another rank began (the path the bitwise
    test above needs to cover)."""
    from hkern.kernels._kernels import normal_times_layout
    X, _, _ = problem()
    rows, blocks, slabs = normal_times_layout(len(X), 300)
    slab_starts = {s * blocks // slabs for s in range(slabs)}
    for ranks in (2, 3, 4):
        first_blocks = -(-layout("ragged", len(X), ranks)[1:-1] // rows)
        assert all(b not in slab_starts for b in first_blocks), (ranks, first_blocks)


@pytest.mark.parametrize("case,r,changes", [
    ("many_centres", 1200, {}),
    ("classification", 300, {"task": "classification"}),
    ("given_landmarks", 300, {"landmarks": np.arange(0, 3001, 7)}),
    ("oasis_landmarks", 200, {"landmarks": "oasis"}),
])
def test_other_settings_equal_the_serial_fit(runs, case, r, changes):
    """More centres (slabs of several blocks), class labels (encoded against the union of
    every rank's labels), given global landmark indices, and centres selected by oASIS on the
    shards (oASIS-P: the serial selection)."""
    ranks, got = runs
    coef, predictions, _ = serial(r=r, **changes)
    assert_serial(got[case], ranks, coef, predictions)


def test_bandwidth_is_checked_against_every_rank_s_data(runs):
    """One rank's rows all below 1e-152 in magnitude: the bandwidth check (squared norms
    underflow there) looks at the largest magnitude of all the data, as serially, and passes;
    the fit is the serial fit of that data."""
    ranks, got = runs
    X, y, Xt = problem()
    off = block_layout(len(X), ranks)
    if ranks > 1:
        X = X.copy()
        X[off[1]:off[2]] *= 1e-160
    model = hkern.fit_nystrom(X, y, 300, **FIT)
    assert {rec["coef"] for rec in got["tiny_shard_on_rank1"].values()} == {digest(model.coef_)}


def test_seed_none_gives_one_model_on_every_rank(runs):
    """seed=None: rank 0 draws the entropy and every rank uses it."""
    ranks, got = runs
    recs = got["seed_none"]
    assert all(rec["outcome"] == "ok" for rec in recs.values())
    assert len({rec["coef"] for rec in recs.values()}) == 1


def test_validation_error_over_every_rank(runs):
    """Each rank passes its validation rows; the recorded validation RMSE is over all of them
    (it equals the serial fit's to rounding: a sum over ranks, not one mean)."""
    ranks, got = runs
    X, _, Xt = problem()
    yv = np.sin(Xt @ np.linspace(1.0, 2.0, X.shape[1]))
    *_, model = serial(validation=(Xt, yv))
    recs = got["validation"]
    values = [[float.fromhex(v) for v in rec["validation_error"]] for rec in recs.values()]
    assert all(v == values[0] for v in values)
    np.testing.assert_allclose(values[0], model.solver_trace_.validation_error, rtol=1e-12)


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_an_error_on_any_rank_is_raised_on_every_rank(runs, case):
    """Bad or differing arguments and data on one rank, empty data everywhere, a memory limit
    on one rank: every rank raises the same exception (naming the rank where it happened) and
    the ranks go on in step to the next case."""
    ranks, got = runs
    kind, text, where = ERROR_CASES[case]
    if case in ("d_differs_on_last", "tol_differs", "select_sigma_differs") and ranks == 1:
        assert got[case][0]["outcome"] == "ok"       # one rank: nothing differs
        return
    if where is not None and where >= ranks:
        assert got[case][0]["outcome"] == "ok"       # the faulty rank does not exist
        return
    assert_raised_everywhere(got[case], ranks, kind, text, where)


def test_failure_inside_the_iterations_ends_every_rank():
    """A failure inside one rank's kernel products, at the fifth call: every rank raises it at
    the end of that product, and the launch (uncaught: every rank exits non-zero) is over
    within seconds."""
    out, seconds = launch(3, "fault_in_iteration_rank1", uncaught=True)
    assert out.returncode != 0
    recs = records(out.stdout)
    assert sorted(rec["rank"] for rec in recs) == [0, 1, 2], out.stdout
    for rec in recs:
        assert rec["outcome"] == "error" and rec["type"] == "RuntimeError"
        assert "injected failure in the kernel products [raised on rank 1 of 3" in rec["message"]
    assert seconds < PROMPT, f"{seconds:.1f} s"


def test_interrupt_on_one_rank_aborts_every_rank():
    """An exception that cannot be agreed on (a KeyboardInterrupt in one rank's products) ends
    every rank through comm.Abort, with the message on stderr."""
    out, seconds = launch(3, "interrupt_rank1")
    assert out.returncode != 0
    assert "rank 1 of 3 failed with KeyboardInterrupt" in out.stderr
    assert "aborting every rank" in out.stderr
    assert seconds < PROMPT, f"{seconds:.1f} s"


# ------------------------------------------------------------------ HCK


def serial_hck(task="regression"):
    X, y, Xt, B = hck_problem()
    if task == "classification":
        y = np.where(y > np.median(y), "hi", "lo")
    return hkern.fit_hierarchical(X, y, **dict(HCK, task=task)), X, Xt, B


@pytest.mark.parametrize("case", ["hck_even", "hck_last", "hck_ragged", "hck_classification"])
def test_hck_equals_the_serial_fit_bitwise(runs, case):
    """fit_hierarchical on shards (even; every row on the last rank; ragged) for 1, 2 and 4
    ranks: the tree (each rank's tree positions), the landmarks of the nodes it holds, the
    weights in each rank's training rows, the predictions of each rank's test points and their
    posterior standard deviations, solve and matvec of each rank's rows of B and log det A are
    the serial fit's, bit for bit; the likelihood's quadratic form is a sum over ranks (1e-14
    relative)."""
    ranks, got = runs
    model, X, Xt, B = serial_hck("classification" if "classification" in case else "regression")
    state = model._op.__reduce__()[1][0]
    lm_off, lm = state["lm_off"], state["lm"]
    off = layout(case.split("_")[1] if case != "hck_classification" else "ragged", len(X), ranks)
    toff = block_layout(len(Xt), ranks)
    pred = model.predict(Xt)
    std = None if case == "hck_classification" else model.predict(Xt, return_std=True)[1]
    recs = got[case]
    assert sorted(recs) == list(range(ranks))
    for p, rec in recs.items():
        assert rec["outcome"] == "ok", rec
        assert rec["levels"] == (0 if ranks == 1 else int(np.ceil(np.log2(ranks))))
        lo, hi, a, b = off[p], off[p + 1], rec["row0"], rec["row0"] + rec["rows"]
        assert rec["perm"] == digest(model.perm_[a:b])
        held = rec["held"]
        assert rec["landmarks"] == digest(np.concatenate(
            [[i, lm_off[i + 1] - lm_off[i]] for i in held] + [lm[lm_off[i]:lm_off[i + 1]]
                                                              for i in held]))
        assert rec["dual"] == digest(model.dual_coef_[lo:hi])
        assert rec["pred"] == digest(pred[toff[p]:toff[p + 1]])
        if case != "hck_classification":
            assert rec["std"] == digest(std[toff[p]:toff[p + 1]])
        assert rec["solve"] == digest(model.solve(B)[lo:hi])
        assert rec["matvec"] == digest(model.matvec(B)[lo:hi])
        assert float.fromhex(rec["logdet"]) == model.logdet()
        if case != "hck_classification":
            assert float.fromhex(rec["lml"]) == pytest.approx(
                model.log_marginal_likelihood(), rel=1e-14)
    # Every node is held by some rank, the top ones by all.
    held_by = [set(rec["held"]) for rec in recs.values()]
    assert set().union(*held_by) == set(range(len(lm_off) - 1))


def test_hck_selection_criteria_on_shards(runs):
    """The hyperparameter selection's likelihood criterion (the profiled log likelihood of the
    training targets) and the likelihood of other targets, each rank passing its rows of them:
    the serial values to 1e-14 (the quadratic forms are sums over ranks), the same on every
    rank."""
    ranks, got = runs
    model, X, _, B = serial_hck()
    recs = got["hck_criteria"]
    assert all(rec["outcome"] == "ok" for rec in recs.values()), recs
    for key, expected in (("profiled", model._evidence.profiled_lml()),
                          ("lml_of_B", model.log_marginal_likelihood(B))):
        values = {rec[key] for rec in recs.values()}
        assert len(values) == 1
        assert float.fromhex(values.pop()) == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize("case", ["hck_select", "nystrom_select"])
def test_selection_on_shards_makes_the_serial_choice(runs, case):
    """sigma="ard", lam="auto" on ragged shards (issue 30): the robust feature statistics and
    the exact GP's subsample are the serial rows, gathered from the global index range, and
    each candidate is the sharded fit (HCK: by its likelihood; FALKON: by its error on a
    held-out tenth drawn from the global range, the rest of every shard fitted).  Every rank
    makes the serial choice, for 1, 2 and 4 ranks: the same candidates in the same order, their
    criteria, sigma, lam and the model to rounding (the quadratic forms and hold-out errors are
    sums over ranks)."""
    ranks, got = runs
    if case == "hck_select":
        X, y, Xt, _ = hck_problem()
        model = hkern.fit_hierarchical(X, y, **dict(HCK, sigma="ard", lam="auto"))
        coef = model.predict(Xt[:20])
    else:
        X, y, _ = problem()
        model = hkern.fit_nystrom(X, y, 300, **dict(FIT, sigma="ard", lam="auto", tol=1e-6))
        coef = model.coef_
    values = [c.value for c in model.selection_.candidates]
    points = [[*np.atleast_1d(c.sigma), c.lam] for c in model.selection_.candidates]
    assert len(values) >= 3            # the search moved: the comparison means something
    recs = got[case]
    assert sorted(recs) == list(range(ranks))
    for rec in recs.values():
        assert rec["outcome"] == "ok", rec
        # A parabola's vertex moves with its criteria's rounding: equal to 1e-9, not bitwise.
        np.testing.assert_allclose(rec["sigma"], np.atleast_1d(model.sigma_), rtol=1e-9)
        assert rec["lam"] == pytest.approx(model.lam_, rel=1e-9)
        # The same candidates in the same order, to the rounding of the parabolas' vertices
        # (per-feature lengthscales, then one bandwidth: the isotropic search "ard" is
        # compared with).
        assert [len(p) for p in rec["points"]] == [len(p) for p in points]
        for got_point, point in zip(rec["points"], points):
            np.testing.assert_allclose(got_point, point, rtol=1e-9)
        if case == "hck_select":
            np.testing.assert_allclose(rec["values"], values, rtol=1e-10)
        else:
            # FALKON's candidates stop at the first iteration below tol 1e-2, which fixes their
            # hold-out error to about that tolerance.  At the same (sigma, lam) as the serial
            # run the iteration is the same and the errors agree to 1e-3 (4e-5 seen); at a
            # vertex moved by rounding it can move by one iteration (1.4e-3 of the error seen
            # with 2 ranks on an EPYC machine), which the solver's tol bounds.
            for got_point, point, got_value, value in zip(rec["points"], points, rec["values"],
                                                          values):
                same_point = got_point == point
                assert got_value == pytest.approx(value, rel=1e-3 if same_point else 1e-2)
        np.testing.assert_allclose(rec["coef"], np.ravel(coef), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("case", ["hck_zero_targets", "nystrom_zero_targets"])
def test_targets_of_zeros_on_shards_fit_at_the_serial_fallback(runs, case):
    """sigma="ard", lam="auto" with zeros on every rank: no selection, the fit at sigma = 1,
    lam = 1e-2 on every rank, predicting 0, as the serial fit does
    (tests/test_default_calls.py)."""
    ranks, got = runs
    recs = got[case]
    assert sorted(recs) == list(range(ranks))
    for rec in recs.values():
        assert rec["outcome"] == "ok", rec
        assert (rec["sigma"], rec["lam"], rec["zeros"], rec["selection"]) == (1.0, 1e-2, True,
                                                                              False)


def test_hck_pca_partition_needs_one_rank(runs):
    """partition='pca' would need the top levels' scatter matrices summed in the serial order:
    refused on every rank with several ranks; one rank is the serial fit."""
    ranks, _ = runs
    out, _ = launch(ranks, "hck_pca")
    assert out.returncode == 0, out.stderr[-3000:]
    recs = by_case(out.stdout)["hck_pca"]
    if ranks == 1:
        assert recs[0]["outcome"] == "ok"
    else:
        assert all(rec["outcome"] == "error" and "use partition='random'" in rec["message"]
                   for rec in recs.values())


def test_hck_failure_inside_the_factorisation_aborts_every_rank():
    """An unexpected failure inside one rank's factorisation (the other ranks wait in the
    exchange of the Theta blocks) ends every rank through comm.Abort within seconds."""
    out, seconds = launch(3, "hck_fault_in_factorisation_rank1", uncaught=True)
    assert out.returncode != 0
    assert "rank 1 of 3 failed with RuntimeError: injected failure in the factorisation" \
        in out.stderr
    assert seconds < PROMPT, f"{seconds:.1f} s"


def test_shards_in_one_process_are_the_serial_fit():
    """comm with one rank (COMM_SELF) in this process: the serial fit, bit for bit."""
    from mpi4py import MPI
    X, y, Xt = problem()
    coef, predictions, _ = serial()
    model = hkern.fit_nystrom(X, y, 300, comm=MPI.COMM_SELF, **FIT)
    assert digest(model.coef_) == coef and digest(model.predict(Xt)) == predictions(1)[0]

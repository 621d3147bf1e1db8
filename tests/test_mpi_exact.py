"""fit_exact(solver="pcg", comm=...) on data sharded over MPI ranks (issue 54): each rank passes
its own rows and gets the serial PCG fit of the concatenated shards, bit for bit, for 1, 2 and
4 ranks, even, ragged and empty shards, stored and recomputed K, double, mixed and auto
precision; bad arguments on one rank raise on every rank.  Launched with mpiexec
(tests/mpi_exact_run.py); needs the optional extra hkern[mpi], which CI installs.
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

pytest.importorskip("mpi4py", reason="fits on MPI need the optional extra hkern[mpi]")
if MPIEXEC is None:
    pytest.skip("mpiexec not found (install hkern[mpi])", allow_module_level=True)

from mpi_exact_run import (  # noqa: E402  (imports mpi4py)
    ARGS,
    fit_arguments,
    problem,
    selection_record,
)

SCRIPT = os.path.join(os.path.dirname(__file__), "mpi_exact_run.py")
TIMEOUT = 300
PROMPT = 10          # seconds for an error on one rank to end every rank (tests/test_mpi_fits)

ERROR_CASES = {
    # case: (exception type, text of the message, the rank named in it or None)
    "select_classification": ("ValueError", "selects sigma and lam for regression", None),
    "select_likelihood": ("ValueError", "pass criterion='auto' or 'holdout'", None),
    "direct_refused": ("ValueError", "pass solver='pcg'", None),
    "hck_refused": ("ValueError", "pass preconditioner='block_rpcholesky'", None),
    "validation_refused": ("ValueError", "takes no validation set", None),
    "lam_bad_on_rank1": ("ValueError", "lam must be a real number > 0", 1),
    "tol_differs": ("ValueError", "differ between ranks: tol", None),
    "nan_on_rank1": ("ValueError", "X contains NaN", 1),
    "r_too_large": ("ValueError", "r must be", None),
    "all_empty": ("ValueError", "every rank's shard is empty", None),
}


def launch(ranks, *cases):
    start = time.monotonic()
    out = subprocess.run([MPIEXEC, "-n", str(ranks), sys.executable, SCRIPT, *cases],
                         capture_output=True, text=True, timeout=TIMEOUT, env=ENV)
    return out, time.monotonic() - start


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


@pytest.fixture(scope="module", params=[1, 2, 4])
def runs(request):
    """Every case in one launch per rank count (4 ranks oversubscribe the two cores)."""
    out, _ = launch(request.param, *ARGS, *ERROR_CASES)
    assert out.returncode == 0, out.stderr[-3000:]
    cases = {}
    for rec in records(out.stdout):
        cases.setdefault(rec["case"], {})[rec["rank"]] = rec
    return request.param, cases


def serial_fit(case):
    """The serial PCG fit of the case's whole data set, with its test predictions and (for
    regression) their predictive std."""
    _, far, task, args = fit_arguments(case)
    X, y, Xt = problem(far, task)
    model = hkern.fit_exact(X, y, **args)
    std = None if task == "classification" else \
        digest(model.predict(Xt, return_std=True, include_noise=True)[1])
    return model, model.predict(Xt), std


@pytest.mark.parametrize("case", list(ARGS))
def test_sharded_pcg_equals_the_serial_fit_bitwise(runs, case):
    """Even shards; every row on the last rank (the others empty); ragged cuts inside the
    128-row segments, with a rank of one row; K recomputed by the fused engine instead of
    stored; mixed and auto precision; the adaptive rank (r=None); data far from the origin;
    three classes; per-feature lengthscales; the hyperparameter selection: on every rank the
    coefficients, predictions and predictive std are the serial fit's, bit for bit, and so
    are its iterations, precision and storage, and every candidate of the selection and its
    choice."""
    ranks, got = runs
    model, pred, std = serial_fit(case)
    recs = got[case]
    assert sorted(recs) == list(range(ranks))
    for rec in recs.values():
        assert rec["outcome"] == "ok", rec
        assert rec["selection"] == selection_record(model)
        assert rec["coef"] == digest(model.dual_coef_)
        assert rec["pred"] == digest(pred)
        assert rec["std"] == std
        assert rec["n_iter"] == model.n_iter_
        assert rec["precision"] == model.solver_trace_.precision
        assert rec["stored"] == model.solver_trace_.stored_kernel


def test_the_cases_cover_both_products_and_precisions(runs):
    """The cases above run K stored and recomputed, and mixed precision (else the bitwise test
    would not cover those paths)."""
    _, got = runs
    assert got["even"][0]["stored"] and not got["engine"][0]["stored"]
    assert got["mixed"][0]["precision"].startswith("mixed")
    assert got["auto"][0]["precision"].startswith("mixed")
    assert got["select_ard"][0]["selection"] is not None


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_an_error_on_any_rank_is_raised_on_every_rank(runs, case):
    """A selection for classes or by the likelihood, other solvers and preconditioners, a
    validation set, bad or differing arguments and data on one rank, an r beyond n, empty
    data everywhere: every rank raises the same exception, naming the rank where it
    happened."""
    ranks, got = runs
    kind, text, where = ERROR_CASES[case]
    if case == "tol_differs" and ranks == 1:
        assert got[case][0]["outcome"] == "ok"       # one rank: nothing differs
        return
    if where is not None and where >= ranks:
        assert got[case][0]["outcome"] == "ok"       # the faulty rank does not exist
        return
    assert_raised_everywhere(got[case], ranks, kind, text, where)


def test_a_failure_inside_the_solve_ends_every_rank():
    """A failure in one rank's kernel products, inside CG: every rank ends promptly (comm.Abort)
    with the message on stderr."""
    out, seconds = launch(3, "fault_in_products")
    assert out.returncode != 0
    assert "rank 2 of 3 failed with RuntimeError: injected failure in the kernel products" \
        in out.stderr
    assert "aborting every rank" in out.stderr
    assert seconds < PROMPT, f"{seconds:.1f} s"


def test_a_failure_on_one_rank_inside_the_selection_ends_every_rank():
    """An error raised on one rank alone inside a candidate of the selection (the others wait
    in a collective; the selection would skip an error every rank raised): every rank ends
    promptly (comm.Abort), with the message."""
    out, seconds = launch(3, "fault_in_selection")
    assert out.returncode != 0
    assert "rank 1 of 3 failed with RuntimeError" in out.stderr
    assert "injected failure in a candidate" in out.stderr
    assert seconds < PROMPT, f"{seconds:.1f} s"

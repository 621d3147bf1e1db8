"""Run by tests/test_oasis_mpi.py under mpiexec: oASIS-P in edge and fault cases.

    mpiexec -n P python mpi_oasis_faults.py CASE [CASE ...]          one JSON line per case and rank
    mpiexec -n P python mpi_oasis_faults.py --uncaught CASE           an error ends the script

Every rank passes oasis_mpi only its shard of the data: its block of rows (block_layout) unless
the case says otherwise.  Each JSON line: {"case", "rank", "size", "time", "outcome": "ok" |
"error" | "injected", "type", "message"} and, for "ok" on rank 0, the selection ("indices",
"scores", "W_inv", "C", "F" as float hex strings).  "time" is time.time() when the line was
written; an "injected" line marks the moment a fault fired.  Faults are injected on one rank
by replacing hkern.oasis.sharded.OasisCore with a subclass that raises at a chosen point;
nothing in hkern itself is a test hook.
"""
import json
import sys
import time

import numpy as np
from hkern.oasis._oasis import OasisCore
from mpi4py import MPI
from mpi_oasis_run import shard
from oracles import KERNELS

from hkern.oasis import sharded as par

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
CURRENT = {"case": None}           # the case running, for the "injected" lines
# ARD lengthscales of the 3 features, and others (on one rank) for the "differs" case
LENGTHSCALES = np.array([0.5, 1.5, 0.8])


def data(n, d=3, scale=1.0):
    return np.random.default_rng(7).normal(size=(n, d)) * scale


def faulty_core(where, exc, at_k=2):
    """An OasisCore that raises ``exc`` at ``where`` ("init", "step", "row", "finish")."""
    def fire():
        report(CURRENT["case"], outcome="injected")
        raise exc

    class Faulty(OasisCore):
        def __init__(self, *args, **kwargs):
            if where == "init":
                fire()
            super().__init__(*args, **kwargs)

        def step(self, *args, **kwargs):
            if where == "step" and self.k == at_k:
                fire()
            return super().step(*args, **kwargs)

        def row(self, j):
            if where == "row" and self.k == at_k:
                fire()
            return super().row(j)

        @property
        def F_array(self):
            if where == "finish":
                fire()
            return OasisCore.F_array.__get__(self)
    return Faulty


def on_rank(rank, where, exc, at_k=2):
    """Inject the fault on one rank only (the others run the real core)."""
    par.OasisCore = faulty_core(where, exc, at_k) if RANK == rank else OasisCore


def make_cases():
    X = data(400)
    X_local = shard(X, "block")
    cases = {}
    # n < ranks (and n == ranks, n = ranks + 1): ranks with no rows.
    for n in (1, 2, 3, 4):
        for init in (0, 1):
            cases[f"small_n{n}_init{init}"] = lambda n=n, init=init: par.oasis_mpi(
                shard(data(n), "block"), n, sigma=0.7, init=init, seed=3)
    cases["small_n2_nogather"] = lambda: par.oasis_mpi(shard(data(2), "block"), 2, sigma=0.7,
                                                       seed=3, gather=False)
    # uneven shards: rank 1 without rows, every row on one rank (the last: rank 0, the root of
    # the gather, then has none; or rank 0)
    for layout in ("empty1", "last", "first"):
        cases[f"shards_{layout}"] = lambda layout=layout: par.oasis_mpi(
            shard(X, layout), 20, sigma=0.5, seed=2)
    cases["shards_last_nogather"] = lambda: par.oasis_mpi(shard(X, "last"), 20, sigma=0.5,
                                                          seed=2, gather=False)
    # ARD lengthscales (the ranks compare them), and a kernel alias on one rank (the same
    # kernel: accepted)
    cases["lengthscales"] = lambda: par.oasis_mpi(X_local, 20, sigma=LENGTHSCALES, seed=2)
    cases["kernel_alias_on_rank1"] = lambda: par.oasis_mpi(
        X_local, 20, kernel="rbf" if RANK == 1 else "gaussian", sigma=0.5, seed=2)
    # The bandwidth is checked against the largest magnitude of all of X, as serially: rank 0's
    # rows alone (below 1e-152, with sigma 1e-150) would be refused.
    Xtiny = data(40)
    Xtiny[:14] *= 1e-155
    cases["bandwidth_checked_globally"] = lambda: par.oasis_mpi(
        shard(Xtiny, "block"), 10, sigma=1e-150, seed=1)
    # degenerate kernels from extreme (accepted) magnitudes, every kernel
    for kern in KERNELS:
        for tag, scale, sigma in (("tiny_sigma", 1.0, 1e-300), ("huge_sigma", 1.0, 1e300),
                                  ("big_both", 1e149, 1e149), ("small_both", 1e-150, 1e-150)):
            cases[f"extreme_{tag}_{kern}"] = lambda kern=kern, scale=scale, sigma=sigma: \
                par.oasis_mpi(shard(data(40, scale=scale), "block"), 10, kernel=kern,
                              sigma=sigma, seed=1)
    # n_jobs: the rules of the serial functions
    cases["n_jobs_minus1"] = lambda: par.oasis_mpi(X_local, 20, sigma=0.5, seed=2, n_jobs=-1)
    cases["n_jobs_none"] = lambda: par.oasis_mpi(X_local, 20, sigma=0.5, seed=2, n_jobs=None)
    for bad in (0, 1.5, "x", True):
        cases[f"n_jobs_bad_{bad}"] = lambda bad=bad: par.oasis_mpi(X_local, 20, sigma=0.5,
                                                                   n_jobs=bad)
    cases["n_jobs_bad_on_rank1"] = lambda: par.oasis_mpi(X_local, 20, sigma=0.5,
                                                         n_jobs=0 if RANK == 1 else 1)
    # bad or mismatched shards and arguments on one rank
    Xnan = X_local.copy()
    Xnan[5, 1] = np.nan
    cases["nan_on_rank1"] = lambda: par.oasis_mpi(Xnan if RANK == 1 else X_local, 20,
                                                  sigma=0.5)
    wider = np.hstack([X_local, np.ones((len(X_local), 1))])
    cases["d_differs_on_last"] = lambda: par.oasis_mpi(
        wider if RANK == SIZE - 1 else X_local, 20, sigma=0.5)
    cases["d_differs_on_empty_rank1"] = lambda: par.oasis_mpi(
        np.empty((0, 2)) if RANK == 1 else shard(X, "empty1"), 20, sigma=0.5)
    cases["no_rows_anywhere"] = lambda: par.oasis_mpi(np.empty((0, 3)), 1, sigma=0.5)
    cases["r_above_global_n"] = lambda: par.oasis_mpi(X_local, 401, sigma=0.5)
    cases["bandwidth_tiny_everywhere"] = lambda: par.oasis_mpi(
        shard(data(40) * 1e-155, "block"), 10, sigma=1e-150)
    cases["n_columns_differs"] = lambda: par.oasis_mpi(X_local, 20 + (RANK == 1), sigma=0.5)
    cases["n_columns_bad_on_rank1"] = lambda: par.oasis_mpi(X_local, 0 if RANK == 1 else 20,
                                                            sigma=0.5)
    cases["sigma_differs_on_rank1"] = lambda: par.oasis_mpi(
        X_local, 20, sigma=LENGTHSCALES * (2.0 if RANK == 1 else 1.0))
    cases["seed_differs"] = lambda: par.oasis_mpi(X_local, 20, sigma=0.5,
                                                  seed=np.random.default_rng(RANK))
    cases["gather_not_bool"] = lambda: par.oasis_mpi(X_local, 20, sigma=0.5, gather="no")
    # memory limits: every rank, and rank 0 only (the gathered C and F)
    cases["memory_everywhere"] = lambda: par.oasis_mpi(X_local, 20, sigma=0.5, max_memory=1000)
    own = par.mpi_peak_bytes(400, 400 // SIZE + 1, 20, False, n_features=3)
    cases["memory_rank0_gather"] = lambda: par.oasis_mpi(X_local, 20, sigma=0.5,
                                                         max_memory=own)
    # failures inside one rank's local work
    for where in ("init", "step", "row", "finish"):
        def run(where=where):
            on_rank(1, where, RuntimeError(f"injected failure in {where}"))
            try:
                return par.oasis_mpi(X_local, 20, sigma=0.5, init=0)
            finally:
                par.OasisCore = OasisCore
        cases[f"fault_{where}_rank1"] = run

    def fault_on_empty_rank():
        on_rank(1, "step", RuntimeError("injected failure in step"))
        try:
            return par.oasis_mpi(shard(X, "empty1"), 20, sigma=0.5, init=0)
        finally:
            par.OasisCore = OasisCore
    cases["fault_step_empty_rank1"] = fault_on_empty_rank

    def memory_error_in_init():
        on_rank(SIZE - 1, "init", MemoryError("injected allocation failure"))
        try:
            return par.oasis_mpi(X_local, 20, sigma=0.5)
        finally:
            par.OasisCore = OasisCore
    cases["memory_error_last_rank"] = memory_error_in_init

    def interrupt():
        on_rank(1, "step", KeyboardInterrupt("injected interrupt"))
        return par.oasis_mpi(X_local, 20, sigma=0.5, init=0)
    cases["interrupt_rank1"] = interrupt
    return cases


def hexes(a):
    return [float(v).hex() for v in np.asarray(a).ravel()]


def report(case, sel=None, exc=None, outcome=None):
    line = {"case": case, "rank": RANK, "size": SIZE, "time": time.time()}
    if outcome is not None:
        line["outcome"] = outcome
    elif exc is None:
        line["outcome"] = "ok"
        line.update(C_shape=list(sel.C_.shape), row_offset=sel.row_offset_)
        if RANK == 0:
            line.update(indices=sel.indices_.tolist(), W_inv=hexes(sel.W_inv_), C=hexes(sel.C_),
                        F=hexes(sel.F_),
                        scores=[None if np.isnan(s) else float(s).hex() for s in sel.scores_])
    else:
        line.update(outcome="error", type=type(exc).__name__, message=str(exc))
    # One write per record: mpiexec forwards each rank's writes whole, so records of different
    # ranks never mix (they may share a line; the test reads them with a JSON decoder).
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def main(argv):
    cases = make_cases()
    if argv[0] == "--uncaught":
        CURRENT["case"] = argv[1]
        try:
            sel = cases[argv[1]]()
        except Exception as exc:
            report(argv[1], exc=exc)
            raise                  # the script ends with the traceback and a non-zero status
        report(argv[1], sel)
        return 0
    for case in argv:
        CURRENT["case"] = case
        try:
            sel = cases[case]()
        except Exception as exc:   # agreed errors: every rank gets one, the ranks go on
            report(case, exc=exc)
        else:
            report(case, sel)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

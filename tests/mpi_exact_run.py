"""Run by tests/test_mpi_exact.py under mpiexec: fit_exact(solver="pcg") on sharded data, one
JSON record per case and rank.

    mpiexec -n P python mpi_exact_run.py CASE [CASE ...]

Each record: {"case", "rank", "size", "outcome": "ok" | "error", "type", "message"} and, for
"ok", digests of the model's coefficients and of its predictions of the test points, its CG
iterations, the precision that ran and whether K was stored.  The data and the shard layouts
are those of tests/test_mpi_exact.py (``problem``, ``layout``, ``ARGS``).
"""
import hashlib
import json
import sys

import numpy as np
from mpi4py import MPI

import hkern
from hkern._mpi import block_layout

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()

# 1001 rows: eight 128-row segments and a last one of 105.
N = 1001


def problem(far=False, task="regression"):
    rng = np.random.default_rng(11)
    X = rng.uniform(-1, 1, size=(N, 3))
    f = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2]
    y = f + 0.05 * rng.normal(size=N) + 7.0
    if far:
        X = X + 300.0              # far from the origin: the kernels shift the data
    if task == "classification":
        y = np.where(f > 0.2, "hi", np.where(f < -0.3, "lo", "mid"))
    return X, y, rng.uniform(-1, 1, size=(60, 3)) + (300.0 if far else 0.0)


def layout(name, size):
    """Global row offsets (size + 1,) of the named shard layout."""
    if name == "even":
        return block_layout(N, size)
    if name == "last":              # every row on the last rank, the others empty
        return np.array([0] * size + [N])
    if name == "ragged":            # cuts inside segments, one rank with fewer rows than one
        return np.array([0, 300, 301, 700][:size] + [N])
    raise ValueError(name)


# 6.5 MB of max_memory: too little to store K (8 N^2 = 8 MB), so the fused engine runs.
ARGS = {
    "even": dict(),
    "last": dict(shards="last"),
    "ragged": dict(shards="ragged"),
    "engine": dict(shards="ragged", max_memory=6_500_000),
    "mixed": dict(shards="ragged", precision="mixed", max_memory=6_500_000),
    "auto": dict(shards="ragged", precision="auto", tol=1e-4),
    "adaptive_rank": dict(shards="ragged", r=None),
    "far": dict(shards="ragged", far=True, max_memory=6_500_000),
    "classification": dict(shards="ragged", task="classification"),
    "lengthscales": dict(shards="ragged", sigma=[0.6, 0.9, 1.4]),
    # The hyperparameter selection (hold-out criterion): over lengthscales (the final fit's
    # factor rebuilt from the chosen candidate's pivots), over lam alone (the candidate's
    # factor extended to the held-out rows; float32 with mixed), the default call.
    "select_ard": dict(shards="ragged", sigma="ard", lam="auto"),
    "select_lam_mixed": dict(shards="last", lam="auto", precision="mixed"),
    "select_default": dict(shards="ragged", sigma="ard", lam="auto", r=None, tol=1e-3,
                           precision="auto"),
}
FIT = dict(sigma=0.7, lam=1e-3, seed=3, solver="pcg", r=150, tol=1e-8, n_jobs=1,
           precision="double")


def fit_arguments(case):
    """(shards, far, task, the fit's keyword arguments) of an ok case."""
    args = dict(FIT, **ARGS[case])
    return args.pop("shards", "even"), args.pop("far", False), args.get("task", "regression"), \
        args


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def ok_case(case):
    def run():
        shards, far, task, args = fit_arguments(case)
        X, y, Xt = problem(far, task)
        off = layout(shards, SIZE)
        lo, hi = off[RANK], off[RANK + 1]
        model = hkern.fit_exact(X[lo:hi], y[lo:hi], comm=COMM, **args)
        std = None if task == "classification" else \
            digest(model.predict(Xt, return_std=True, include_noise=True)[1])
        return {"coef": digest(model.dual_coef_), "pred": digest(model.predict(Xt)),
                "std": std, "n_iter": int(model.n_iter_),
                "precision": model.solver_trace_.precision,
                "stored": bool(model.solver_trace_.stored_kernel),
                "selection": selection_record(model)}
    return run


def selection_record(model):
    """The selection's candidates (sigma, lam and value of each, as hex) and its choice, or
    None without a selection."""
    record = model.selection_
    if record is None:
        return None
    return {"candidates": [[float(v).hex() for v in np.atleast_1d(c.sigma)]
                           + [float(c.lam).hex(), float(c.value).hex()]
                           for c in record.candidates], "best": record.best}


def error_case(**changes):
    def run():
        X, y, _ = problem()
        off = block_layout(N, SIZE)
        lo, hi = off[RANK], off[RANK + 1]
        args = dict(FIT, comm=COMM)
        args.update(changes)
        for name, fn in list(args.items()):
            if callable(fn) and name not in ("comm", "X_local", "y_local"):
                args[name] = fn(RANK)                 # a per-rank value
        Xl = args.pop("X_local", lambda rank, X: X)(RANK, X[lo:hi])
        yl = args.pop("y_local", lambda rank, y: y)(RANK, y[lo:hi])
        hkern.fit_exact(Xl, yl, **args)
        return {}
    return run


def fault_in_products():
    """A failure in rank 2's kernel products from their third call (with 3 ranks of the ragged
    layout, rank 1 holds no whole segment and computes no rows)."""
    import hkern.solvers.operators as operators
    original, calls = operators._kernel_matvec_raw, [0]

    def faulty(*args, **kwargs):
        calls[0] += 1
        if RANK == 2 and calls[0] >= 3:
            raise RuntimeError("injected failure in the kernel products")
        return original(*args, **kwargs)
    operators._kernel_matvec_raw = faulty
    return ok_case("engine")()


def fault_in_selection():
    """A ValueError on rank 1 alone inside the selection's second candidate (its shard's rows
    of the candidate set up), while the other ranks go on to their collectives."""
    import hkern.hyperparameters.sharded_exact_problem as problem_module
    original, calls = problem_module.shard_rows, [0]

    def faulty(*args, **kwargs):
        calls[0] += 1
        if RANK == 1 and calls[0] == 2:
            raise ValueError("injected failure in a candidate")
        return original(*args, **kwargs)
    problem_module.shard_rows = faulty
    return ok_case("select_ard")()


CASES = {case: ok_case(case) for case in ARGS}
CASES.update({
    "select_classification": error_case(sigma="ard", task="classification",
                                        y_local=lambda rank, y: np.where(y > 7, "a", "b")),
    "select_likelihood": error_case(sigma="ard", criterion="likelihood"),
    "direct_refused": error_case(solver="direct"),
    "hck_refused": error_case(preconditioner="hck"),
    "validation_refused": error_case(validation=(np.zeros((3, 3)), np.zeros(3))),
    "lam_bad_on_rank1": error_case(lam=lambda rank: -1.0 if rank == 1 else 1e-3),
    "tol_differs": error_case(tol=lambda rank: 1e-8 if rank == 0 else 1e-6),
    "nan_on_rank1": error_case(X_local=lambda rank, X: np.where(rank == 1, np.nan, X)),
    "r_too_large": error_case(r=5000),
    "all_empty": error_case(X_local=lambda rank, X: X[:0], y_local=lambda rank, y: y[:0]),
    "fault_in_products": fault_in_products,
    "fault_in_selection": fault_in_selection,
})


def main(argv):
    for case in argv:
        record = {"case": case, "rank": RANK, "size": SIZE}
        try:
            record.update(outcome="ok", **CASES[case]())
        except Exception as exc:
            record.update(outcome="error", type=type(exc).__name__, message=str(exc))
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Run by tests/test_mpi_fits.py under mpiexec: fits on sharded data, one JSON record per case
and rank.

    mpiexec -n P python mpi_fits_run.py CASE [CASE ...]
    mpiexec -n P python mpi_fits_run.py --uncaught CASE       the error ends the script

Each record: {"case", "rank", "size", "outcome": "ok" | "error", "type", "message"} and, for
"ok", digests of the model's coefficients and of the rank's test predictions ("coef",
"pred"), its CG iterations and, with a validation set, the validation errors.
The data and the shard layouts are those of tests/test_mpi_fits.py (``problem``, ``layout``);
faults are injected on one rank by replacing a function of hkern's modules, never by a hook
in hkern.
"""
import hashlib
import json
import sys

import numpy as np
from mpi4py import MPI

import hkern
import hkern.kernels.sharded as sharded
from hkern._mpi import block_layout

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()


def problem(n=3001, d=4, m=500, task="regression"):
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(n, d))
    f = np.sin(X @ np.linspace(1.0, 2.0, d))
    y = f + 0.1 * rng.normal(size=n) if task == "regression" else np.where(f > 0, "b", "a")
    return X, y, rng.uniform(-1, 1, size=(m, d))


RAGGED_CUTS = (200, 1000, 1700, 2100)


def layout(name, n, size):
    """Global row offsets (size + 1,) of the named shard layout."""
    if name == "even":
        return block_layout(n, size)
    if name == "last":             # every row on the last rank, the others empty
        return np.array([0] * size + [n])
    if name == "ragged":
        # Uneven cuts that begin ranks inside a slab of the kernel engine (n = 3001, m = 300:
        # 128-row blocks, 16 slabs of 24 blocks; the cuts give ranks 1-4 first blocks 2, 8,
        # 14, 17, none of them a slab's first), so slabs are continued across ranks.
        return np.array([0, *RAGGED_CUTS[:size - 1], n])
    raise ValueError(name)


def digest(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


FIT = dict(sigma=0.8, lam=1e-3, seed=3, solver="pcg", tol=1e-8, n_jobs=1)


def chosen(model, coef):
    """What a hyperparameter selection chose, and the coefficients it fitted."""
    return {"sigma": np.atleast_1d(model.sigma_).tolist(), "lam": float(model.lam_),
            "values": [c.value for c in model.selection_.candidates],
            "points": [[*np.atleast_1d(c.sigma).tolist(), c.lam]
                       for c in model.selection_.candidates],
            "coef": np.ravel(coef).tolist()}


def nystrom_case(shards="even", task="regression", r=300, validation=False, chosen=False,
                 **changes):
    def run():
        X, y, Xt = problem(task=task)
        off, toff = layout(shards, len(X), SIZE), block_layout(len(Xt), SIZE)
        lo, hi = off[RANK], off[RANK + 1]
        Xl, yl, Xtl = X[lo:hi], y[lo:hi], Xt[toff[RANK]:toff[RANK + 1]]
        args = dict(FIT, task=task, comm=COMM)
        if validation:
            args["validation"] = (Xtl, np.sin(Xtl @ np.linspace(1.0, 2.0, X.shape[1])))
        args.update(changes)
        Xl = args.pop("X_local", lambda rank, X: X)(RANK, Xl)
        for name, fn in list(args.items()):
            if callable(fn) and name != "comm":
                args[name] = fn(RANK)                 # a per-rank value
        model = hkern.fit_nystrom(Xl, yl, r, **args)
        if chosen:
            return globals()["chosen"](model, model.coef_)
        pred = model.predict(Xtl)
        out = {"coef": digest(model.coef_), "pred": digest(pred), "n_iter": model.n_iter_}
        if validation:
            out["validation_error"] = [float(v).hex()
                                       for v in model.solver_trace_.validation_error]
        return out
    return run


HCK = dict(r=32, sigma=0.5, lam=1e-2, seed=3, n_jobs=1)


def hck_problem(n=1500, d=3, m=400):
    rng = np.random.default_rng(9)
    X = rng.uniform(-1, 1, size=(n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.normal(size=n)
    return X, y, rng.uniform(-1, 1, size=(m, d)), rng.normal(size=(n, 2))


def hck_case(shards="even", task="regression", method=None, **changes):
    """fit_hierarchical on shards: digests of the rank's tree positions, landmarks, weights,
    predictions, solve and matvec of a fixed B (its shard rows), log det and the likelihood."""
    def run():
        X, y, Xt, B = hck_problem()
        if task == "classification":
            y = np.where(y > np.median(y), "hi", "lo")
        off, toff = layout(shards, len(X), SIZE), block_layout(len(Xt), SIZE)
        lo, hi = off[RANK], off[RANK + 1]
        args = dict(HCK, task=task, comm=COMM)
        args.update(changes)
        for name, fn in list(args.items()):
            if callable(fn) and name not in ("comm", "y_local"):
                args[name] = fn(RANK)                 # a per-rank value
        y_local = args.pop("y_local", lambda rank, y: y)(RANK, y[lo:hi])
        model = hkern.fit_hierarchical(X[lo:hi], y_local, **args)
        if method is not None:
            return method(model, B[lo:hi])
        tree = model._tree
        held = sorted(tree.landmarks)
        return {"perm": digest(model.perm_), "row0": tree.row0, "rows": tree.rows,
                "levels": model.levels_,
                "landmarks": digest(np.concatenate([[i, len(tree.landmarks[i])]
                                                    for i in held] + [tree.landmarks[i]
                                                                      for i in held])),
                "held": [int(i) for i in held],
                "dual": digest(model.dual_coef_),
                "pred": digest(model.predict(Xt[toff[RANK]:toff[RANK + 1]])),
                "solve": digest(model.solve(B[lo:hi])),
                "matvec": digest(model.matvec(B[lo:hi])),
                "std": digest(model.predict(Xt[toff[RANK]:toff[RANK + 1]], return_std=True)[1])
                if task == "regression" else None,
                "logdet": float(model.logdet()).hex(),
                "lml": float(model.log_marginal_likelihood()).hex()
                if task == "regression" else None}
    return run


def inject(module, name, at_call, exc, rank=1):
    """Make module.name raise ``exc`` on ``rank`` from its ``at_call``-th call on."""
    original = getattr(module, name)
    calls = [0]

    def faulty(*args, **kwargs):
        calls[0] += 1
        if RANK == rank and calls[0] >= at_call:
            raise exc
        return original(*args, **kwargs)
    setattr(module, name, faulty)


CASES = {
    "even": nystrom_case("even"),
    "last": nystrom_case("last"),
    "ragged": nystrom_case("ragged"),
    "many_centres": nystrom_case("ragged", r=1200),
    "classification": nystrom_case("ragged", task="classification"),
    "validation": nystrom_case("even", validation=True),
    "seed_none": nystrom_case("ragged", seed=None),
    "given_landmarks": nystrom_case("ragged", landmarks=np.arange(0, 3001, 7)),
    "oasis_landmarks": nystrom_case("ragged", landmarks="oasis", r=200),
    "oasis_r_zero": nystrom_case(landmarks="oasis", r=0),
    "lam_bad_on_rank1": nystrom_case(lam=lambda rank: -1.0 if rank == 1 else 1e-3),
    "tol_differs": nystrom_case(tol=lambda rank: 1e-8 if rank == 0 else 1e-6),
    "nan_on_rank1": nystrom_case(X_local=lambda rank, X: X if rank != 1 else
                                 np.where(np.arange(len(X))[:, None] == 0, np.nan, X)),
    "d_differs_on_last": nystrom_case(X_local=lambda rank, X: X if rank != SIZE - 1 or SIZE == 1
                                      else np.hstack([X, X[:, :1]])),
    "all_empty": nystrom_case(X_local=lambda rank, X: X[:0]),
    # Rank 1's rows below 1e-152 in magnitude, the others not: serially the bandwidth check
    # looks at the largest magnitude of all the data and accepts it, so every rank must.
    "tiny_shard_on_rank1": nystrom_case(X_local=lambda rank, X: X * 1e-160 if rank == 1 else X),
    "direct_refused": nystrom_case(solver="direct"),
    "n_jobs_bad_on_rank1": nystrom_case(n_jobs=lambda rank: 0 if rank == 1 else 1),
    "memory_on_rank1": nystrom_case(max_memory=lambda rank: 1000 if rank == 1 else None),
    "nystrom_select": nystrom_case("ragged", sigma="ard", lam="auto", tol=1e-6, chosen=True),
    "nystrom_select_likelihood_refused": nystrom_case(sigma="auto", criterion="likelihood"),
    "nystrom_select_oasis_refused": nystrom_case(sigma="auto", landmarks="oasis", r=200),
}


CASES.update({
    "hck_even": hck_case("even"),
    "hck_last": hck_case("last"),
    "hck_ragged": hck_case("ragged"),
    "hck_classification": hck_case("ragged", task="classification"),
    "hck_r_zero": hck_case(r=0),
    "hck_nan_y_on_rank1": hck_case(y_local=lambda rank, y: y if rank != 1 or not len(y)
                                   else np.where(np.arange(len(y)) == 0, np.nan, y)),
    "hck_pca": hck_case(partition="pca"),
    "hck_solve_bad_rows_on_rank1": hck_case(method=lambda model, B: {"solve": digest(
        model.solve(B if RANK != 1 else B[:-1]))}),
    "hck_select": hck_case("ragged", sigma="ard", lam="auto", method=lambda model, B: chosen(
        model, model.predict(hck_problem()[2][:20]))),
    "hck_select_holdout_refused": hck_case(sigma="ard", criterion="holdout"),
    "select_sigma_differs": hck_case(sigma=lambda rank: "ard" if rank == 0 else 0.5),
    "hck_std_of_classifier": hck_case("even", task="classification", method=lambda model, B: {
        "std": digest(model.predict(np.zeros((0, 3)), return_std=True)[1])}),
    "hck_memory_on_rank1": hck_case(max_memory=lambda rank: 10_000 if rank == 1 else None),
    "hck_criteria": hck_case(method=lambda model, B: {
        "profiled": float(model._evidence.profiled_lml()).hex(),
        "lml_of_B": float(model.log_marginal_likelihood(B)).hex()}),
    "hck_zero_targets": hck_case("ragged", sigma="ard", lam="auto",
                                 y_local=lambda rank, y: np.zeros_like(y),
                                 method=lambda model, B: zero_targets_record(model)),
})


def zero_targets_record(model):
    """A selecting fit of zeros on every rank: the fallback values, predictions of 0, and the
    warning (as the serial fit)."""
    return {"sigma": float(model.sigma), "lam": float(model.lam),
            "zeros": bool(np.all(model.predict(np.zeros((5, model.n_features_in_))) == 0)),
            "selection": model.selection_ is not None}


def nystrom_zero_targets():
    X, _, _ = problem()
    off = layout("ragged", len(X), SIZE)
    lo, hi = off[RANK], off[RANK + 1]
    model = hkern.fit_nystrom(X[lo:hi], np.zeros(hi - lo), 300,
                              **dict(FIT, sigma="ard", lam="auto", comm=COMM))
    return zero_targets_record(model)


CASES["nystrom_zero_targets"] = nystrom_zero_targets


def fault_case(name):
    def run():
        if name == "hck_fault_in_factorisation_rank1":
            import hkern.hierarchical.sharded as hs
            inject(hs, "_operator", 1, RuntimeError("injected failure in the factorisation"))
            return hck_case("even")()
        if name == "fault_in_iteration_rank1":
            inject(sharded, "kernel_normal_times_blocks", 5,
                   RuntimeError("injected failure in the kernel products"))
        elif name == "interrupt_rank1":
            inject(sharded, "kernel_normal_times_blocks", 5, KeyboardInterrupt("injected"))
        return nystrom_case("ragged")()
    return run


for _name in ("fault_in_iteration_rank1", "interrupt_rank1", "hck_fault_in_factorisation_rank1"):
    CASES[_name] = fault_case(_name)


def main(argv):
    uncaught = argv[:1] == ["--uncaught"]
    for case in argv[1:] if uncaught else argv:
        record = {"case": case, "rank": RANK, "size": SIZE}
        try:
            record.update(outcome="ok", **CASES[case]())
        except Exception as exc:
            record.update(outcome="error", type=type(exc).__name__, message=str(exc))
            print(json.dumps(record), flush=True)
            if uncaught:
                raise
            continue
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])

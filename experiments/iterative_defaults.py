"""Exact PCG's selection and defaults on one shared UCI set (issue 30; doc/solvers.md, "The
defaults on the shared sets", and doc/hyperparameters.md).

    python experiments/iterative_defaults.py pol [sel,trace,grid]

* ``sel``: ``fit_exact(X, y, solver="pcg", sigma="ard", lam="auto", seed=0)``: seconds, peak
  memory, test RMSE, the chosen values and the selection's record;
* ``one``: one fit at the chosen values with the defaults (the selection's cost is quoted
  against it);
* ``trace``: fits at the chosen values against tol (1e-6 .. 1e-2) and the preconditioner's
  rank (1000, the default, 6000);
* ``grid``: the isotropic test-set oracle: 8 bandwidths (the median pairwise distance times
  2^-3 .. 2^0.5, largest first) x 4 lam (1e-4 .. 1e-1), max_iter 300 each;
* ``falkon``: ``fit_nystrom(X, y, 8192, solver="pcg", sigma="ard", lam="auto", seed=0)`` and
  one FALKON fit at its chosen values;
* ``exactgrid``: the same oracle with the Cholesky solver, the solution PCG converges to
  (free of PCG's iteration cap; n^2 doubles of memory, so for the sets up to ~20 000 rows).

Split 0, inputs and targets standardised with training statistics; records in
``results/iterative_defaults/<set>.json`` (each part rewrites its own key).  Sets other than
kin40k are read from $HKERN_DATA.  Takes minutes (pol, elevators) to hours (the grids).
"""
import json
import os
import sys
import time

import numpy as np

import hkern
from hkern._memory import peak_memory
from hkern.datasets import load_uci, standardize

name = sys.argv[1]
RECORD = os.path.join(os.path.dirname(__file__), "..", "results", "iterative_defaults",
                      f"{name}.json")
parts = sys.argv[2].split(",") if len(sys.argv) > 2 else ["sel", "trace", "grid"]
Xtr, ytr, Xte, yte, _ = standardize(*load_uci(name, split=0))
n, d = Xtr.shape
print(f"== {name}: n={n} d={d}", flush=True)
def rmse(m):
    return float(np.sqrt(np.mean((m.predict(Xte) - yte) ** 2)))
def run(**kw):
    t = time.time()
    with peak_memory() as mem:
        m = hkern.fit_exact(Xtr, ytr, solver="pcg", seed=0, **kw)
    return m, time.time() - t, mem.bytes / 2**30
# Each part rewrites its own key of the set's record and keeps the others.
out = json.load(open(RECORD)) if os.path.exists(RECORD) else {}
out.update(name=name, n=n, d=d)
if "sel" in parts:
    m, s, gib = run(sigma="ard", lam="auto")
    out["sel"] = dict(seconds=s, gib=gib, rmse=rmse(m), sigma=np.atleast_1d(m.sigma_).tolist(),
                      lam=float(m.lam_))
    print(f"SELECTION: {s:.1f} s, {gib:.2f} GiB, RMSE {out['sel']['rmse']:.4f}, lam {m.lam_:.3g}, "
          f"ls {np.round(np.atleast_1d(m.sigma_), 2).tolist()}", flush=True)
    print(m.selection_.summary(), flush=True)
    json.dump(out, open(RECORD, "w"), indent=1)
if "falkon" in parts:
    def falkon(**kw):
        t = time.time()
        with peak_memory() as mem:
            m = hkern.fit_nystrom(Xtr, ytr, 8192, solver="pcg", seed=0, **kw)
        return m, time.time() - t, mem.bytes / 2**30
    m, s, gib = falkon(sigma="ard", lam="auto")
    print(m.selection_.summary(), flush=True)
    one, s1, gib1 = falkon(sigma=m.sigma_, lam=m.lam_)
    out["falkon"] = dict(seconds=s, gib=gib, rmse=rmse(m), sigma=np.atleast_1d(m.sigma_).tolist(),
                         lam=float(m.lam_), one_seconds=s1, one_gib=gib1, one_rmse=rmse(one))
    print(f"FALKON 8192 SELECTION: {s:.1f} s, {gib:.2f} GiB, RMSE {rmse(m):.4f}; one fit at the "
          f"chosen values {s1:.1f} s, {gib1:.2f} GiB, RMSE {rmse(one):.4f}; selection / one fit "
          f"= {s / s1:.2f}", flush=True)
    json.dump(out, open(RECORD, "w"), indent=1)
sig, lam = np.array(out["sel"]["sigma"]), out["sel"]["lam"]
sig = sig if sig.size > 1 else float(sig[0])
if "one" in parts:
    m, s, gib = run(sigma=sig, lam=lam)
    out["one"] = dict(seconds=s, gib=gib, rmse=rmse(m), iters=int(m.n_iter_))
    print(f"ONE FIT at the chosen values: {s:.1f} s, {gib:.2f} GiB, RMSE {out['one']['rmse']:.4f}; "
          f"selection / one fit = {out['sel']['seconds'] / s:.2f}", flush=True)
    json.dump(out, open(RECORD, "w"), indent=1)
if "trace" in parts:
    rows = []
    for r_, tol in [(None, 1e-3), (None, 1e-6), (None, 1e-2), (None, 3e-3), (None, 1e-4),
                    (1000, 1e-3), (6000, 1e-3)]:
        kw = {} if r_ is None else {"r": r_}
        m, s, gib = run(sigma=sig, lam=lam, tol=tol, max_iter=2000, **kw)
        rows.append(dict(r=r_, tol=tol, seconds=s, gib=gib, rmse=rmse(m),
                         iters=int(getattr(m, "n_iter_", -1))))
        print("TRACE", rows[-1], flush=True)
    out["trace"] = rows
    json.dump(out, open(RECORD, "w"), indent=1)
if "grid" in parts or "exactgrid" in parts:
    exact = "exactgrid" in parts
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, n, 4000), rng.integers(0, n, 4000)
    med = float(np.median(np.linalg.norm(Xtr[i] - Xtr[j], axis=1)))
    sigmas = med * 2.0 ** np.linspace(-3, 0.5, 8)
    lams = [1e-4, 1e-3, 1e-2, 1e-1]
    grid = []
    for sg in sigmas[::-1]:
        for lm in lams:
            if exact:
                t = time.time()
                m = hkern.fit_exact(Xtr, ytr, solver="direct", sigma=float(sg), lam=lm)
                grid.append(dict(sigma=float(sg), lam=lm, seconds=time.time() - t, rmse=rmse(m),
                                 solver="cholesky"))
            else:
                m, s, gib = run(sigma=float(sg), lam=lm, max_iter=300)
                grid.append(dict(sigma=float(sg), lam=lm, seconds=s, rmse=rmse(m),
                                 iters=int(m.n_iter_), converged=bool(m.solver_trace_.converged)))
            print("GRID", grid[-1], flush=True)
    out["grid"] = grid
    out["grid_note"] = ("complete, Cholesky (the converged solution)" if exact
                        else "complete, PCG with max_iter 300")
    best = min(grid, key=lambda g: g["rmse"])
    ratio = out["sel"]["rmse"] / best["rmse"]
    print(f"ORACLE best {best}; selection {out['sel']['rmse']:.4f} = {ratio:.3f}x", flush=True)
    json.dump(out, open(RECORD, "w"), indent=1)

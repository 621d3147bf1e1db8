"""One CG tolerance for every fit whose ``tol`` is CG's relative residual (issue 33, item 2):
FALKON (``fit_nystrom(solver="pcg")``) and MEKA's CG (``fit_meka(solver="pcg")``) against
``tol``, on the shared sets, at the values exact PCG's selection chose there.

    HKERN_DATA=../shared/data/uci python experiments/cg_tol_defaults.py [parts] [sets]

parts: any of falkon, meka, falkon4096 (comma-separated; default falkon,meka); sets: default
kin40k,pol,elevators,protein.

Split 0, standardised with training statistics, 2 threads, seed 0.  For each set and tol:
test RMSE, iterations and fit seconds; the direct solver's RMSE is the reference
("converged").  ``falkon4096``: FALKON with 4096 centres at tol 1e-6, 1e-4 and 1e-3.
The values are exact PCG's selection on the set (``results/iterative_defaults/<set>.json``;
kin40k's are HCK's selection quoted in issue 30).  Records in
``results/cg_tol_defaults.json``.  Takes about ten minutes.
"""
import json
import os
import sys
import time

import numpy as np

import hkern
from hkern.datasets import load_uci, standardize

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "..", "results", "cg_tol_defaults.json")
TOLS = [1e-6, 1e-4, 1e-3, 3e-3, 1e-2]
KIN40K = (np.array([2.50, 2.32, 1.40, 1.61, 1.42, 1.31, 1.23, 1.79]), 0.0021)


def selected_values(name):
    if name == "kin40k":
        return KIN40K
    sel = json.load(open(os.path.join(HERE, "..", "results", "iterative_defaults",
                                      f"{name}.json")))["sel"]
    sigma = np.array(sel["sigma"])
    return (sigma if sigma.size > 1 else float(sigma[0])), float(sel["lam"])


def rmse(model, X, y):
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def timed(fit, *args, **kw):
    t0 = time.perf_counter()
    model = fit(*args, **kw)
    return model, time.perf_counter() - t0


def sweep(label, fit, tols, test, **kw):
    """{tol: test RMSE, iterations (the largest over outputs) and seconds} of ``fit`` at each
    tol, printed as it goes."""
    X_test, y_test = test
    rows = {}
    for tol in tols:
        m, s = timed(fit, tol=tol, **kw)
        n_iter = int(np.max(m.n_iter_))
        rows[f"{tol:g}"] = dict(rmse=rmse(m, X_test, y_test), n_iter=n_iter, seconds=s)
        print(f"{label} tol {tol:g}: RMSE {rows[f'{tol:g}']['rmse']:.5f}, {n_iter} it, "
              f"{s:.1f} s", flush=True)
    return rows


def direct(label, fit, test, **kw):
    """The direct solver's fit: the converged reference."""
    m, s = timed(fit, solver="direct", **kw)
    value = rmse(m, *test)
    print(f"{label} direct: RMSE {value:.5f} ({s:.1f} s)", flush=True)
    return dict(rmse=value, seconds=s)


def main():
    parts = sys.argv[1].split(",") if len(sys.argv) > 1 else ["falkon", "meka"]
    sets = sys.argv[2].split(",") if len(sys.argv) > 2 else ["kin40k", "pol", "elevators",
                                                                "protein"]
    out = json.load(open(RECORD)) if os.path.exists(RECORD) else {}
    for name in sets:
        Xtr, ytr, Xte, yte, _ = standardize(*load_uci(name, split=0))
        sigma, lam = selected_values(name)
        rows = out.setdefault(name, {})
        test = (Xte, yte)
        common = dict(X=Xtr, y=ytr, sigma=sigma, lam=lam, seed=0, n_jobs=2)
        if "falkon" in parts:
            nystrom = dict(common, r=1024)
            rows["falkon"] = {"direct": direct(f"{name} nystrom r=1024", hkern.fit_nystrom,
                                               test, **nystrom)}
            rows["falkon"].update(sweep(f"{name} falkon r=1024", hkern.fit_nystrom, TOLS, test,
                                        solver="pcg", max_iter=1000, **nystrom))
        if "falkon4096" in parts:
            rows["falkon4096"] = sweep(f"{name} falkon r=4096", hkern.fit_nystrom, TOLS[:3],
                                       test, solver="pcg", max_iter=1000, r=4096, **common)
        if "meka" in parts:
            meka = dict(common, r=128, n_clusters=8)
            rows["meka"] = {"direct": direct(f"{name} meka r=128", hkern.fit_meka, test, **meka)}
            rows["meka"].update(sweep(f"{name} meka cg", hkern.fit_meka, [1e-10] + TOLS, test,
                                      solver="pcg", max_iter=5000, **meka))
        json.dump(out, open(RECORD, "w"), indent=1)


if __name__ == "__main__":
    main()

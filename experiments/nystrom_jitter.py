"""The default relative jitter of fit_nystrom's landmark factor (``rcond``): test RMSE and the
predictions' sensitivity to rounding, on the shared sets.

    HKERN_DATA=../shared/data/uci python experiments/nystrom_jitter.py [sets]

sets: default kin40k,pol,elevators,protein,keggundirected.  Split 0, standardised with training
statistics, 2 threads, seed 0.  For each set and rcond: the default call
``fit_nystrom(X, y, 1024, rcond=rcond)`` (sigma and lam selected), its test RMSE, lam_ and
seconds; then the same model (its sigma_ and lam_ fixed) fitted on X and on X * 1e-3 with
sigma_ * 1e-3, the same model in exact arithmetic: the largest difference of their test
predictions ("rounding", in units of the standardised y) is what the rounding of the kernel
entries moves the predictions by, about eps / jitter for an ill-conditioned W.  Records in
``results/nystrom_jitter.json``.  Takes about twenty minutes.
"""
import json
import os
import sys
import time

import numpy as np

import hkern
from hkern.datasets import load_uci, standardize

HERE = os.path.dirname(os.path.abspath(__file__))
RECORD = os.path.join(HERE, "..", "results", "nystrom_jitter.json")
RCONDS = [1e-14, 1e-13, 1e-12, 1e-11, 1e-10]
SETS = ["kin40k", "pol", "elevators", "protein", "keggundirected"]
SCALE = 1e-3


def one(Xtr, ytr, Xte, yte, r, rcond):
    start = time.perf_counter()
    model = hkern.fit_nystrom(Xtr, ytr, r, rcond=rcond, seed=0, n_jobs=2)
    seconds = time.perf_counter() - start
    fixed = dict(sigma=model.sigma_, lam=model.lam_, rcond=rcond, seed=0, n_jobs=2)
    same = hkern.fit_nystrom(Xtr, ytr, r, **fixed)
    scaled = hkern.fit_nystrom(Xtr * SCALE, ytr, r, **dict(fixed, sigma=model.sigma_ * SCALE))
    return {"r": r, "rcond": rcond, "fit_s": seconds, "lam": float(model.lam_),
            "jitter": float(model.jitter_),
            "test_rmse": float(np.sqrt(np.mean((model.predict(Xte) - yte) ** 2))),
            "rounding": float(np.abs(scaled.predict(Xte * SCALE) - same.predict(Xte)).max())}


def main():
    sets = sys.argv[1].split(",") if len(sys.argv) > 1 else SETS
    records = []
    for name in sets:
        Xtr, ytr, Xte, yte, _ = standardize(*load_uci(name, split=0))
        for rcond in RCONDS:
            rec = dict(set=name, **one(Xtr, ytr, Xte, yte, 1024, rcond))
            print(json.dumps(rec), flush=True)
            records.append(rec)
    with open(RECORD, "w") as f:
        json.dump({"command": "python experiments/nystrom_jitter.py " + " ".join(sys.argv[1:]),
                   "records": records}, f, indent=1)


if __name__ == "__main__":
    main()

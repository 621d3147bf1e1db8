"""How much ``fit_exact(X, y)``'s default selection depends on its seed on the small shared sets,
where ``sigma="ard"`` starts from the exact GP of every row (hkern/hyperparameters/subsample.py).

    HKERN_DATA=../shared/data/uci python experiments/selection_seeds.py [--seeds 6]
        [--splits 1,2,3,4] [SETS]

Per set and split (X and y in the units the set gives them),
``hkern.fit_exact(X, y, seed=s)`` for s = 0 to seeds-1: the selected model's log marginal
likelihood (summed over outputs), its test RMSE and the fit's seconds; and their spread.
Records in ``results/selection_seeds.json`` (merged by set and split), each with its command
and code version.
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from common import RESULTS, code_version, load_split, rmse

import hkern

RECORD = RESULTS / "selection_seeds.json"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", default=["concrete", "energy"])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--splits", default="1,2,3,4")
    args = parser.parse_args()
    command = ("HKERN_DATA=../shared/data/uci python experiments/selection_seeds.py "
               f"--seeds {args.seeds} --splits {args.splits} " + " ".join(args.sets))
    old = json.loads(RECORD.read_text())["records"] if RECORD.exists() else []
    records = {(r["set"], r["split"]): r for r in old}
    for name in args.sets:
        for split in map(int, args.splits.split(",")):
            X, y, X_test, y_test = load_split(name, split)
            lml, errors, seconds = [], [], []
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = hkern.fit_exact(X, y, seed=seed)
                seconds.append(time.perf_counter() - t0)
                lml.append(float(np.sum(model.log_marginal_likelihood())))
                errors.append(rmse(model.predict(X_test), y_test))
            rec = {"set": name, "split": split, "n": int(X.shape[0]), "d": int(X.shape[1]),
                   "lml": lml, "rmse": errors, "seconds": seconds,
                   "lml_spread": max(lml) - min(lml), "median_seconds": float(np.median(seconds)),
                   "command": command, "code": code_version()}
            print(json.dumps(rec), flush=True)
            records[(name, split)] = rec
            RECORD.write_text(json.dumps({"records": list(records.values())}, indent=1))


if __name__ == "__main__":
    main()

"""sigma="ard" against one selected bandwidth (issue 52, item 4): the default call of each fit
(sigma="ard", lam="auto", which since then also searches one bandwidth and keeps the better by
its own criterion) and the same call with sigma="auto", on the first rows of each shared set.

    HKERN_DATA=../shared/data/uci python experiments/ard_against_isotropic.py [--n 3000] [SETS]

Split 0, X and y standardised with training statistics, test RMSE on the whole test split,
seed 0.  Per set and fit: both test RMSEs, their ratio, which search the "ard" selection kept
(per-feature or one bandwidth) and the seconds of both calls.  Records in
``results/ard_against_isotropic.json``, merged by (set, fit) with the records already there.
"""
from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from common import RESULTS, load_standardized, markdown_table, rmse

import hkern

SETS = ("kin40k", "protein", "pol", "elevators", "keggundirected", "concrete", "energy")
FITS = {"fit_exact": hkern.fit_exact, "fit_hierarchical": hkern.fit_hierarchical,
        "fit_nystrom": hkern.fit_nystrom}


def timed(fit, X, y, X_test, y_test, sigma):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = fit(X, y, sigma=sigma, seed=0)
    return model, rmse(model.predict(X_test), y_test), time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", default=list(SETS))
    parser.add_argument("--n", type=int, default=3000, help="training rows used (the first n)")
    args = parser.parse_args()
    records = []
    for name in args.sets:
        X, y, X_test, y_test, _ = load_standardized(name)
        X, y = X[:args.n], y[:args.n]
        for label, fit in FITS.items():
            ard, ard_rmse, ard_s = timed(fit, X, y, X_test, y_test, "ard")
            _, iso_rmse, iso_s = timed(fit, X, y, X_test, y_test, "auto")
            records.append(dict(set=name, fit=label, n=len(y), d=X.shape[1],
                                ard_rmse=ard_rmse, isotropic_rmse=iso_rmse,
                                ratio=ard_rmse / iso_rmse,
                                kept="one bandwidth" if np.ndim(ard.sigma_) == 0
                                else "per feature", ard_seconds=ard_s, isotropic_seconds=iso_s))
            print(json.dumps(records[-1]), flush=True)
    # merged with the record's other (set, fit) pairs, which a run of fewer sets keeps
    path = RESULTS / "ard_against_isotropic.json"
    kept = json.loads(path.read_text())["records"] if path.exists() else []
    done = {(r["set"], r["fit"]) for r in records}
    records = [r for r in kept if (r["set"], r["fit"]) not in done] + records
    path.write_text(json.dumps(
        {"command": "python experiments/ard_against_isotropic.py " + " ".join(
            f"--n {args.n}".split() + args.sets), "hkern": hkern.__version__,
         "records": records}, indent=1))
    print(markdown_table(["set", "fit", '"ard"', '"auto"', "ratio", "kept", "seconds"],
                         [[r["set"], r["fit"], f"{r['ard_rmse']:.4f}",
                           f"{r['isotropic_rmse']:.4f}", f"{r['ratio']:.3f}", r["kept"],
                           f"{r['ard_seconds']:.1f} / {r['isotropic_seconds']:.1f}"]
                          for r in records]))


if __name__ == "__main__":
    main()

"""sigma="ard" against one selected bandwidth (issue 52, item 4): the default call of each fit
(sigma="ard", lam="auto", which since then also searches one bandwidth and keeps the better by
its own criterion) and the same call with sigma="auto", on the first rows of each shared set.

    HKERN_DATA=../shared/data/uci python experiments/ard_against_isotropic.py [--n 3000]
        [--splits K] [SETS]

Split 0, X and y standardised with training statistics, test RMSE on the whole test split,
seed 0.  With ``--splits K`` (for the small sets, whose test splits of 76 to 103 rows make one
split's ratio noisy): splits 0 to K-1, the RMSE over all their test rows pooled (each error in
its split's standardised units), and each split's ratio.  Per set and fit: both test RMSEs,
their ratio, which search the "ard" selection kept (per-feature or one bandwidth) and the
seconds of both calls.  Records in ``results/ard_against_isotropic.json``, each with its
command, merged by (set, fit) with the records already there.
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
    parser.add_argument("--splits", type=int, default=1,
                        help="splits 0 to K-1, their test rows pooled (default 1: split 0)")
    args = parser.parse_args()
    records = []
    for name in args.sets:
        command = ("HKERN_DATA=../shared/data/uci python experiments/ard_against_isotropic.py "
                   f"--n {args.n} --splits {args.splits} {name}")
        for label, fit in FITS.items():
            errors = {"ard": [], "auto": []}
            seconds = {"ard": 0.0, "auto": 0.0}
            ratios, kept = [], []
            for split in range(args.splits):
                X, y, X_test, y_test, _ = load_standardized(name, split)
                X, y = X[:args.n], y[:args.n]
                split_rmse = {}
                for sigma in ("ard", "auto"):
                    model, split_rmse[sigma], s = timed(fit, X, y, X_test, y_test, sigma)
                    errors[sigma].append(model.predict(X_test).reshape(-1) - y_test)
                    seconds[sigma] += s
                    if sigma == "ard":
                        kept.append("one bandwidth" if np.ndim(model.sigma_) == 0
                                    else "per feature")
                ratios.append(split_rmse["ard"] / split_rmse["auto"])
            pooled = {k: float(np.sqrt(np.mean(np.square(np.concatenate(v)))))
                      for k, v in errors.items()}
            record = dict(set=name, fit=label, n=len(y), d=X.shape[1],
                          ard_rmse=pooled["ard"], isotropic_rmse=pooled["auto"],
                          ratio=pooled["ard"] / pooled["auto"],
                          kept=kept[0] if len(set(kept)) == 1 else "/".join(kept),
                          ard_seconds=seconds["ard"], isotropic_seconds=seconds["auto"])
            if args.splits > 1:
                record.update(splits=args.splits, split_ratios=ratios)
            record.update(command=command, hkern=hkern.__version__)
            records.append(record)
            print(json.dumps(records[-1]), flush=True)
    # merged with the record's other (set, fit) pairs, which a run of fewer sets keeps
    path = RESULTS / "ard_against_isotropic.json"
    earlier = json.loads(path.read_text()) if path.exists() else {"records": []}
    # (records written before each carried its command and version carry the file's)
    kept = [{"command": earlier.get("command"), "hkern": earlier.get("hkern"), **r}
            for r in earlier["records"]]
    done = {(r["set"], r["fit"]) for r in records}
    records = [r for r in kept if (r["set"], r["fit"]) not in done] + records
    path.write_text(json.dumps({"records": records}, indent=1))
    print(markdown_table(["set", "fit", '"ard"', '"auto"', "ratio", "kept", "seconds"],
                         [[r["set"], r["fit"], f"{r['ard_rmse']:.4f}",
                           f"{r['isotropic_rmse']:.4f}", f"{r['ratio']:.3f}", r["kept"],
                           f"{r['ard_seconds']:.1f} / {r['isotropic_seconds']:.1f}"]
                          for r in records]))


if __name__ == "__main__":
    main()

"""How well calibrated the predictive distributions are (issue 52): for each fit with its
default call, on the shared sets in the units their targets come in, the coverage of central
intervals at several nominal levels, the test NLL and RMSE, beside scikit-learn's
``GaussianProcessRegressor`` on a 2 000-row subset.

    HKERN_DATA=../shared/data/uci python experiments/uncertainty.py [sets] [fits] [--no-units]
                                                                   [--splits K]
    python experiments/uncertainty.py --page      # the page and plot from the record

sets: default kin40k,pol,elevators,protein,keggundirected,concrete,energy (the five of the
selection pages and two small ones).  fits: default exact,falkon,hck,sklearn:

* ``exact``: ``hkern.fit_exact(X, y, seed=0)`` (Cholesky up to 10 000 rows, PCG above);
* ``falkon``: ``hkern.fit_nystrom(X, y, solver="pcg", seed=0)`` (1 024 centres);
* ``hck``: ``hkern.fit_hierarchical(X, y, seed=0)``;
* ``sklearn``: ``GaussianProcessRegressor(ConstantKernel * RBF(ARD) + WhiteKernel,
  normalize_y=True)`` on the first 2 000 training rows (its O(n^3) fit with d + 3
  hyperparameters; about ten minutes at d = 26).

Split 0; X standardised with training statistics, y as the set gives it.  With ``--splits K``
(for the small sets, whose 76 to 103 test rows put one target at 1 to 1.3% of coverage): splits
0 to K-1, each fitted on its own, their test rows pooled.  Each record: the
fit's and the standard deviation's seconds, test RMSE, mean NLL of the Gaussian predictive
density of a new target (``include_noise=True``), and the coverage of the central intervals
at ``LEVELS``.  With ``exact`` the fit is repeated on 1000 y, and the largest difference of
the z-scores (y - mean) / std of the two is recorded (the units law; ``--no-units`` skips
it).  Records are merged into ``results/uncertainty.json`` by (set, fit); ``--page`` renders
``doc/results/uncertainty.md`` and ``doc/results/figures/uncertainty_calibration.png`` from it.
"""
import json
import sys
import time
import warnings

import numpy as np
from common import FIGURES, PAGES, RESULTS, load_split, machine_note, markdown_table, pyplot
from scipy.stats import norm

import hkern
from hkern.plotting import plot_calibration

SETS = ["kin40k", "pol", "elevators", "protein", "keggundirected", "concrete", "energy"]
FITS = ["exact", "falkon", "hck", "sklearn"]
LEVELS = [0.5, 0.8, 0.9, 0.95, 0.99]
SKLEARN_ROWS = 2000
RECORD = RESULTS / "uncertainty.json"
UNITS = True            # fit_exact again on 1000 y (--no-units: not, for the largest sets)


def scores(mean, std, y):
    """Coverage at each level, NLL and RMSE of predictions (mean, std) of targets y."""
    z = np.abs(y - mean) / std
    return {"coverage": {str(level): float(np.mean(z <= norm.ppf(0.5 + level / 2)))
                         for level in LEVELS},
            "nll": float(np.mean(-norm.logpdf(y, mean, std))),
            "rmse": float(np.sqrt(np.mean((y - mean) ** 2)))}


def fit_hkern(name, X, y):
    if name == "exact":
        return hkern.fit_exact(X, y, seed=0)
    if name == "falkon":
        return hkern.fit_nystrom(X, y, solver="pcg", seed=0)
    return hkern.fit_hierarchical(X, y, seed=0)


def sklearn_gp(X, y, Xt):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    kernel = ConstantKernel() * RBF(length_scale=np.ones(X.shape[1])) + WhiteKernel()
    gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, y)
    return gp.predict(Xt, return_std=True)


def measure(set_name, fit_name, splits=1):
    """The record of one fit on one set: split 0, or splits 0 to splits-1, their test rows
    pooled (the medians of the fit's and std's seconds, each split's lam and 95% coverage)."""
    measured = [measure_split(set_name, fit_name, split) for split in range(splits)]
    parts = [record for record, _ in measured]
    if splits == 1:
        return parts[0]
    record = dict(parts[0])
    mean, std, yt = (np.concatenate(arrays) for arrays in zip(*(p for _, p in measured)))
    record.update(splits=splits, n_test=len(yt),
                  split_coverage_95=[p["coverage"]["0.95"] for p in parts],
                  fit_seconds=float(np.median([p["fit_seconds"] for p in parts])),
                  std_seconds=float(np.median([p["std_seconds"] for p in parts])),
                  warnings=sorted({w for p in parts for w in p["warnings"]}))
    if "lam" in record:
        record["lam"] = [p["lam"] for p in parts]
        record["signal_variance"] = [p["signal_variance"] for p in parts]
    if "z_difference_1000y" in record:
        record["z_difference_1000y"] = max(p["z_difference_1000y"] for p in parts)
    record.update(scores(mean, std, yt))
    return record


def measure_split(set_name, fit_name, split):
    X, y, Xt, yt = load_split(set_name, split)
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd[sd == 0] = 1.0
    X, Xt = (X - mu) / sd, (Xt - mu) / sd
    record = dict(set=set_name, fit=fit_name, n=len(y), d=X.shape[1], n_test=len(yt))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if fit_name == "sklearn":
            t0 = time.perf_counter()
            mean, std = sklearn_gp(X[:SKLEARN_ROWS], y[:SKLEARN_ROWS], Xt)
            record.update(rows=min(SKLEARN_ROWS, len(y)), fit_seconds=time.perf_counter() - t0,
                          std_seconds=0.0)
        else:
            t0 = time.perf_counter()
            model = fit_hkern(fit_name, X, y)
            t1 = time.perf_counter()
            mean, std = model.predict(Xt, return_std=True, include_noise=True)
            record.update(rows=len(y), fit_seconds=t1 - t0,
                          std_seconds=time.perf_counter() - t1, lam=float(model.lam_),
                          signal_variance=float(model.signal_variance_[0]),
                          solver=("pcg" if getattr(model, "solver_trace_", None) is not None
                                  else "direct"))
            if fit_name == "exact" and UNITS:
                scaled = fit_hkern(fit_name, X, 1000.0 * y)
                mean_c, std_c = scaled.predict(Xt, return_std=True, include_noise=True)
                record["z_difference_1000y"] = float(np.max(np.abs(
                    (yt - mean) / std - (1000.0 * yt - mean_c) / std_c)))
    record.update(scores(mean, std, yt))
    record["warnings"] = sorted({str(w.message)[:200] for w in caught})
    return record, (mean, std, yt)


def test_rows(record):
    """The test rows a record scored: "n_test", or "n_test (K splits)" when pooled."""
    splits = record.get("splits", 1)
    return str(record["n_test"]) + (f" ({splits} splits)" if splits > 1 else "")


def merged(records):
    old = json.loads(RECORD.read_text())["records"] if RECORD.exists() else []
    keys = {(r["set"], r["fit"]) for r in records}
    return [r for r in old if (r["set"], r["fit"]) not in keys] + records


def page():
    data = json.loads(RECORD.read_text())
    records = data["records"]
    order = {s: i for i, s in enumerate(SETS)}
    records.sort(key=lambda r: (order.get(r["set"], 99), FITS.index(r["fit"])))
    rows = [[r["set"], r["fit"], r["rows"], test_rows(r), f"{r['coverage']['0.95']:.3f}",
             f"{r['coverage']['0.5']:.3f}", f"{r['nll']:.4g}", f"{r['rmse']:.4g}",
             f"{r['fit_seconds']:.1f}", f"{r['std_seconds']:.2f}"] for r in records]
    table = markdown_table(["set", "fit", "training rows", "test rows", "95% coverage",
                            "50% coverage",
                            "test NLL", "test RMSE", "fit s", "std s"], rows)
    units = [[r["set"], f"{r['z_difference_1000y']:.1e}"] for r in records
             if "z_difference_1000y" in r]
    # Each record names the run that made it; those written before records carried their
    # command (the scikit-learn rows) came from runs of the same script with the fit "sklearn".
    commands = sorted({r.get("command", "python experiments/uncertainty.py <sets> sklearn "
                                        "(an earlier run)") for r in records})
    text = (f"# Calibration of the predictive distributions\n\n{machine_note('; '.join(commands))}"
            "\n\nEvery fit's default call on split 0 of each set (on the small sets, where a "
            "test row says \"K splits\", on splits 0 to K-1, each fitted on its own and their "
            "test rows pooled: one of 76 test targets is 1.3% of coverage; the seconds are the "
            "median split's), X standardised, y "
            "in its own units; the standard deviation of a new target (`include_noise=True`); "
            "scikit-learn's `GaussianProcessRegressor` (ARD RBF + WhiteKernel, `normalize_y`) "
            f"on the first {SKLEARN_ROWS} training rows.  A calibrated 95% interval covers "
            "0.95 of the test targets; the test NLL is the mean negative log density of the "
            "Gaussian predictive distribution (lower is better).\n\n" + table
            + "\n\n![Coverage against nominal level](figures/uncertainty_calibration.png)\n\n"
            "The z-scores (y - mean) / std of `fit_exact` fitted to y and to 1000 y, largest "
            "difference over the test points:\n\n"
            + (markdown_table(["set", "largest difference"], units) if units else
               "(no `fit_exact` record yet: `python experiments/uncertainty.py SETS exact`)")
            + "\n")
    (PAGES / "uncertainty.md").write_text(text)
    plt = pyplot()
    if plt is None:
        return
    sets = [s for s in SETS if any(r["set"] == s for r in records)]
    fig, axes = plt.subplots(1, len(sets), figsize=(2.6 * len(sets), 2.9), sharey=True)
    colors = {f: f"C{i}" for i, f in enumerate(FITS)}      # one colour per fit on every panel
    for k, (ax, s) in enumerate(zip(np.atleast_1d(axes), sets)):
        coverage = {r["fit"]: [r["coverage"][str(v)] for v in LEVELS]
                    for f in FITS for r in records if r["set"] == s and r["fit"] == f}
        plot_calibration(LEVELS, coverage, ax=ax, title=s, colors=colors,
                         legend=k == len(sets) - 1)
        ax.set_xlim(0.45, 1.0)
        ax.set_ylim(0.45, 1.0)
        if k:
            ax.set_ylabel("")
    fig.tight_layout()
    fig.savefig(FIGURES / "uncertainty_calibration.png", dpi=110)


def main():
    global UNITS
    if sys.argv[1:] == ["--page"]:
        page()
        return
    UNITS = "--no-units" not in sys.argv
    args = [a for a in sys.argv[1:] if a != "--no-units"]
    splits = 1              # --splits K: splits 0 to K-1, their test rows pooled
    if "--splits" in args:
        at = args.index("--splits")
        splits = int(args[at + 1])
        del args[at:at + 2]
    sets = args[0].split(",") if len(args) > 0 else SETS
    fits = args[1].split(",") if len(args) > 1 else FITS
    records = []
    for set_name in sets:
        for fit_name in fits:
            rec = measure(set_name, fit_name, splits)
            rec["command"] = "python experiments/uncertainty.py " + " ".join(sys.argv[1:])
            print(json.dumps(rec), flush=True)
            records.append(rec)
            RECORD.write_text(json.dumps({"command": "python experiments/uncertainty.py "
                                          + " ".join(sys.argv[1:]), "hkern": hkern.__version__,
                                          "records": merged(records)}, indent=1))


if __name__ == "__main__":
    main()

"""The PCG fit's posterior std without an n x n matrix (issue 52, item 2; hkern.exact.variance).

    HKERN_DATA=../shared/data/uci python experiments/pcg_std.py accuracy [sets]
    HKERN_DATA=../shared/data/uci python experiments/pcg_std.py speed [set]

``accuracy`` (default kin40k): split 0 standardised, the first 10 000 training rows, every test
row; ``fit_exact(X, y, solver="pcg", seed=0)`` selects sigma and lam; at those values the
Cholesky model's variance (exact) against the conditional one of hkern.exact.variance (which
the PCG model uses above the crossover), latent and with noise: median and largest relative
error of the std, seconds of each.
``speed`` (default kin40k): every training row; the default call ``fit_exact(X, y, seed=0)``
(its selection and PCG fit), then ``predict(X_test, return_std=True)`` at every test point:
seconds and the peak of memory traced by tracemalloc (NumPy's and hkern's arrays) in each.
2 threads.  Records merged into results/pcg_std.json by (mode, set).
"""
import json
import sys
import time
import tracemalloc
import warnings

import numpy as np
from common import RESULTS, command_line, load_standardized, machine_note

import hkern
from hkern.exact import variance

ROWS = 10_000
THREADS = 2
OUT = RESULTS / "pcg_std.json"


def errors(var, exact, noise):
    """Median and max relative error of the std, latent and with the noise variance added."""
    out = {}
    for name, shift in (("latent", 0.0), ("noisy", noise)):
        got, want = np.sqrt(var + shift), np.sqrt(exact + shift)
        rel = np.abs(got - want) / want
        out[name] = {"median": float(np.median(rel)), "max": float(rel.max())}
    return out


def accuracy(name):
    X, y, Xt, _, _ = load_standardized(name)
    X, y = X[:ROWS], y[:ROWS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hkern.fit_exact(X, y, solver="pcg", seed=0, n_jobs=THREADS)
    direct = hkern.fit_exact(X, y, sigma=model.sigma, lam=model.lam, solver="direct",
                             n_jobs=THREADS)
    Xs = direct._check_X(Xt)
    t0 = time.perf_counter()
    exact = direct._latent_variance(Xs, THREADS, None)
    cholesky_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    conditional = variance.conditional_variance(direct.kernel, direct._bandwidth, direct.X_fit_,
                                                direct.lam, Xs, np.ones(len(Xs)),
                                                n_threads=THREADS, max_memory=None)
    conditional_seconds = time.perf_counter() - t0
    return {"set": name, "n": ROWS, "m": len(Xt), "sigma": np.atleast_1d(model.sigma).tolist(),
            "lam": model.lam, "neighbours": variance.NEIGHBOURS,
            "summaries": variance.SUMMARIES, "group": variance.GROUP,
            "cholesky_seconds": cholesky_seconds, "conditional_seconds": conditional_seconds,
            "never_below_exact": bool(np.all(conditional >= exact * (1 - 1e-9))),
            "errors": errors(conditional, exact, direct.lam)}


def traced(call):
    tracemalloc.start()
    t0 = time.perf_counter()
    out = call()
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, seconds, peak


def speed(name):
    X, y, Xt, _, _ = load_standardized(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, fit_seconds, fit_peak = traced(
            lambda: hkern.fit_exact(X, y, seed=0, n_jobs=THREADS))
    n, m = X.shape[0], Xt.shape[0]
    conditions = model._conditions(n, m, None)
    (_, std), std_seconds, std_peak = traced(lambda: model.predict(Xt, return_std=True))
    return {"set": name, "n": n, "m": m, "pcg": model.n_iter_ is not None,
            "conditional": bool(conditions), "fit_seconds": fit_seconds,
            "fit_peak_bytes": fit_peak, "std_seconds": std_seconds, "std_peak_bytes": std_peak,
            "n_by_n_bytes": 8 * n * n, "std_over_fit": std_seconds / fit_seconds,
            "mean_std": float(np.mean(std))}


def main(argv):
    mode = argv[0] if argv else "accuracy"
    sets = (argv[1] if len(argv) > 1 else "kin40k").split(",")
    record = json.loads(OUT.read_text()) if OUT.exists() else {}
    for name in sets:
        row = accuracy(name) if mode == "accuracy" else speed(name)
        row["command"] = command_line()
        row["machine"] = machine_note(row["command"])
        record[f"{mode}/{name}"] = row
        print(json.dumps(row, indent=1), flush=True)
        OUT.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])

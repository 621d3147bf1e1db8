"""The call most users make, measured: each fit with only X and y against the same fit at the
old fixed defaults (sigma = 1, lam = 1e-2), on the first rows of each shared set.

    HKERN_DATA=../shared/data/uci python experiments/default_calls.py [--n 3000] [SETS ...]

Every fit with a sigma and a lam selects both by default (sigma="ard", lam="auto"); this
prints the test RMSE and seconds of both calls, per set and fit, and the markdown table of
doc/hyperparameters.md ("The default, measured").
"""
from __future__ import annotations

import argparse
import time

from common import load_standardized, markdown_table, rmse

import hkern

SETS = ("kin40k", "protein", "pol", "elevators", "keggundirected")
FITS = {
    "fit_exact": (hkern.fit_exact, {}),
    "fit_hierarchical": (hkern.fit_hierarchical, {}),
    "fit_nystrom": (hkern.fit_nystrom, {}),
}


def timed(fit, X, y, X_test, y_test, **kw):
    t0 = time.perf_counter()
    model = fit(X, y, seed=0, **kw)
    return rmse(model.predict(X_test), y_test), time.perf_counter() - t0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sets", nargs="*", default=list(SETS))
    parser.add_argument("--n", type=int, default=3000, help="training rows used (the first n)")
    args = parser.parse_args()
    rows = []
    for name in args.sets:
        X, y, X_test, y_test, _ = load_standardized(name)
        X, y = X[:args.n], y[:args.n]
        for label, (fit, kw) in FITS.items():
            old = timed(fit, X, y, X_test, y_test, sigma=1.0, lam=1e-2, **kw)
            new = timed(fit, X, y, X_test, y_test, **kw)
            rows.append([name, f"`{label}(X, y)`", f"{old[0]:.4f} ({old[1]:.1f} s)",
                         f"{new[0]:.4f} ({new[1]:.1f} s)"])
            print(*rows[-1], sep="  |  ", flush=True)
    print()
    print(markdown_table(["set", "call", "sigma=1, lam=1e-2 (the old default)",
                          "only X and y (sigma=\"ard\", lam=\"auto\")"], rows))


if __name__ == "__main__":
    main()

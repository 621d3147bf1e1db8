"""What a float32 X costs a fit, against its float64 widening (issue 32, item 3;
doc/conventions.md, "Precision (the fits) and float32 inputs").

    python experiments/float32_inputs.py [--n 20000] [--d 256] [--out results/float32_inputs.json]

Synthetic data (a wide X, where the inputs' copies are a large part of a fit's memory): each
call runs on float32 X and on X.astype(float64), one after the other, and reports the peak of
the allocations tracemalloc traces (NumPy's arrays) during the call, its seconds, and whether
the two models predict the same bits.  The script uses only the public API, so it runs on
older commits too (the closing notes quote it before and after a change).
"""
import argparse
import json
import time
import tracemalloc
import warnings

import numpy as np

import hkern


def calls(y, d):
    return {
        "fit_nystrom(X, y, 256, seed=0)": lambda X: hkern.fit_nystrom(X, y, 256, seed=0),
        "fit_nystrom(X, y, 256, solver='pcg', sigma=16, lam=1e-3, seed=0)":
            lambda X: hkern.fit_nystrom(X, y, 256, solver="pcg", sigma=16.0, lam=1e-3, seed=0),
        "fit_nystrom(X, y, 256, solver='pcg', sigma=[16] * d, lam=1e-3, seed=0)":
            lambda X: hkern.fit_nystrom(X, y, 256, solver="pcg", sigma=np.full(d, 16.0),
                                        lam=1e-3, seed=0),
        "fit_nystrom(X, y, 256, solver='pcg', precision='mixed', sigma=16, lam=1e-3, seed=0)":
            lambda X: hkern.fit_nystrom(X, y, 256, solver="pcg", precision="mixed", sigma=16.0,
                                        lam=1e-3, seed=0),
        "fit_rff(X, y, 512, seed=0)": lambda X: hkern.fit_rff(X, y, 512, seed=0),
    }


def traced(call, X):
    tracemalloc.start()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = call(X)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return model, peak / 2**20, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--d", type=int, default=256)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.n, args.d)).astype(np.float32)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=args.n)
    X_new = X[:200]
    print(f"n={args.n}, d={args.d}: X is {X.nbytes / 2**20:.1f} MiB in float32, "
          f"{2 * X.nbytes / 2**20:.1f} MiB in float64")
    records = []
    for name, call in calls(y, args.d).items():
        single, peak32, sec32 = traced(call, X)
        double, peak64, sec64 = traced(call, X.astype(np.float64))
        same = bool(np.array_equal(single.predict(X_new), double.predict(X_new)))
        records.append(dict(call=name, peak_mib_float32=peak32, peak_mib_float64=peak64,
                            seconds_float32=sec32, seconds_float64=sec64, same_bits=same))
        print(f"{name}\n  peak {peak32:.1f} MiB float32 X, {peak64:.1f} MiB float64 X; "
              f"{sec32:.2f} s, {sec64:.2f} s; same predictions: {same}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(n=args.n, d=args.d, records=records), f, indent=1)


if __name__ == "__main__":
    main()

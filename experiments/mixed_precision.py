"""Mixed against double precision, side by side in one process (issue 32, doc/solvers.md
"Mixed precision").

    python experiments/mixed_precision.py exact [--rounds 2]
    python experiments/mixed_precision.py sweep SET [...] [--n 12000]
    python experiments/mixed_precision.py reach SET [...]
    python experiments/mixed_precision.py falkon [--rounds 2]
    python experiments/mixed_precision.py falkon-sweep SET [...] [--n 20000] [--centres 2048]

* ``exact``: kin40k split 0, ``fit_exact(solver="pcg", sigma=1.41, lam=1e-2, seed=0)`` with K
  recomputed (n = 36 000: 10 GB would not be stored);
* ``sweep``: exact PCG in both precisions, with its defaults otherwise, over a grid of sigma
  (the median pairwise distance times 1/4, 1/2, 1) and lam (1e-1 .. 1e-4) on ``--n`` training
  rows of each shared set (where the mixed solve keeps the answer, and at what cost);
* ``reach``: adds to each swept point the estimate precision="auto" decides by
  (:func:`hkern.solvers.exact_pcg.float32_reach`) and prints the points by it;
* ``falkon``: kin40k split 0, ``fit_nystrom(X, y, 8192, solver="pcg", sigma=2, lam=1e-3,
  seed=0)`` in double, auto and mixed precision;
* ``falkon-defaults``: the default call ``fit_nystrom(X, y, solver="pcg", seed=0)`` on each
  set's split 0 in double and auto precision (``falkon_defaults.json``);
* ``falkon-screen``: the cost of precision="auto"'s pivot screen where it fails, against the
  double factors and fit (``falkon_screen.json``);
* ``falkon-sweep``: FALKON in double, mixed and auto precision over the same sigma grid and
  lam 1e-1 .. 1e-4 on ``--n`` rows with ``--centres`` centres, with the pivot test of
  precision="auto" (``results/mixed_precision/falkon_sweep_<set>.json``).

The two precisions alternate, ``--rounds`` times each, so that a load on the machine hits
both; medians of seconds, peak memory (RSS above the start of the call) and test RMSE are
printed and written to ``results/mixed_precision/<part>.json``.  Inputs and targets are
standardised with training statistics.  $HKERN_DATA points at the shared sets.
"""
import argparse
import json
import os
import time
import warnings

import numpy as np

import hkern
from hkern._memory import peak_memory
from hkern.datasets import load_uci, standardize

OUT = os.path.join(os.path.dirname(__file__), "..", "results", "mixed_precision")


def rmse(model, X, y):
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def timed(fit, precision):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        with peak_memory() as mem:
            model = fit(precision)
        seconds = time.perf_counter() - t
    return model, seconds, mem.bytes / 2**30, [str(w.message)[:160] for w in caught]


def side_by_side(name, fit, Xte, yte, rounds, precisions=("double", "mixed")):
    rows = {p: [] for p in precisions}
    for _ in range(rounds):
        for precision in precisions:
            model, seconds, gib, warned = timed(fit, precision)
            trace = model.solver_trace_
            row = dict(seconds=seconds, gib=gib, rmse=rmse(model, Xte, yte),
                       preconditioner_seconds=float(trace.preconditioner_seconds),
                       rank=int(trace.rank), ran=trace.precision, lam=float(model.lam_),
                       float64_model_residual=trace.float64_model_residual,
                       iters=int(model.n_iter_), true_residual=float(trace.true_residual.max()),
                       converged=bool(trace.converged), warnings=warned)
            rows[precision].append(row)
            print(name, precision, {k: (round(v, 5) if isinstance(v, float) else v)
                                    for k, v in row.items()}, flush=True)
            del model
    med = {p: {k: float(np.median([r[k] for r in rs])) for k in ("seconds", "gib", "rmse")}
           for p, rs in rows.items()}
    ratios = {p: {k: med[p][k] / med["double"][k] for k in ("seconds", "gib")}
              for p in precisions if p != "double"}
    for p, ratio in ratios.items():
        print(f"{name}: {p} / double: time {ratio['seconds']:.3f}, memory {ratio['gib']:.3f}, "
              f"RMSE difference {med[p]['rmse'] - med['double']['rmse']:+.5f}", flush=True)
    return dict(rows=rows, medians=med, ratios=ratios)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("part", choices=("exact", "sweep", "reach", "falkon", "falkon-sweep",
                                         "falkon-defaults", "falkon-screen"))
    parser.add_argument("sets", nargs="*", default=["kin40k"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, default=12000)
    parser.add_argument("--centres", type=int, default=2048)
    args = parser.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if args.part == "exact":
        Xtr, ytr, Xte, yte, _ = standardize(*load_uci("kin40k", split=0))

        def fit(precision):
            return hkern.fit_exact(Xtr, ytr, solver="pcg", sigma=1.41, lam=1e-2, seed=0,
                                   precision=precision)
        record = side_by_side(args.part, fit, Xte, yte, args.rounds)
        json.dump(record, open(os.path.join(OUT, f"{args.part}.json"), "w"), indent=1)
        return
    if args.part == "falkon":
        Xtr, ytr, Xte, yte, _ = standardize(*load_uci("kin40k", split=0))

        def fit(precision):
            return hkern.fit_nystrom(Xtr, ytr, 8192, solver="pcg", sigma=2.0, lam=1e-3, seed=0,
                                     precision=precision)
        record = side_by_side(args.part, fit, Xte, yte, args.rounds,
                              ("double", "auto", "mixed"))
        record["command"] = f"python experiments/mixed_precision.py falkon --rounds {args.rounds}"
        json.dump(record, open(os.path.join(OUT, f"{args.part}.json"), "w"), indent=1)
        return
    if args.part == "reach":
        reach_table(args.sets)
        return
    if args.part == "falkon-screen":
        falkon_screen(args.sets or ["kin40k", "pol", "keggundirected"], args.n, args.rounds)
        return
    if args.part == "falkon-defaults":
        falkon_defaults(args.sets, args.rounds)
        return
    if args.part == "falkon-sweep":
        for name in args.sets:
            falkon_sweep(name, args.n, args.centres)
        return
    for name in args.sets:
        Xtr, ytr, Xte, yte, median = sweep_data(name, args.n)
        n = Xtr.shape[0]
        out = []
        for factor in (0.25, 0.5, 1.0):
            for lam in (1e-1, 1e-2, 1e-3, 1e-4):
                sigma = factor * median
                row = {"sigma": sigma, "lam": lam}
                for precision in ("double", "mixed"):
                    model, seconds, gib, warned = timed(
                        lambda p: hkern.fit_exact(Xtr, ytr, solver="pcg", sigma=sigma,
                                                  lam=lam, seed=0, precision=p), precision)
                    row[precision] = dict(seconds=seconds, gib=gib,
                                          rmse=rmse(model, Xte, yte),
                                          iters=int(model.n_iter_),
                                          stored=bool(model.solver_trace_.stored_kernel),
                                          converged=bool(model.solver_trace_.converged),
                                          warnings=warned)
                loss = row["mixed"]["rmse"] / row["double"]["rmse"] - 1
                print(f"{name} sigma {sigma:.3g} lam {lam:g}: RMSE double "
                      f"{row['double']['rmse']:.5f} mixed {row['mixed']['rmse']:.5f} "
                      f"({100 * loss:+.3f}%), time mixed/double "
                      f"{row['mixed']['seconds'] / row['double']['seconds']:.2f}, iterations "
                      f"{row['double']['iters']} / {row['mixed']['iters']}, converged "
                      f"{row['double']['converged']} / {row['mixed']['converged']}", flush=True)
                out.append(row)
        json.dump(dict(n=n, rows=out), open(os.path.join(OUT, f"sweep_{name}.json"), "w"),
                  indent=1)


def sweep_data(name, n):
    """(X_train, y_train, X_test, y_test, median pairwise distance) of a sweep: split 0 of a
    shared set, standardised, a fixed subsample of ``n`` training rows."""
    Xtr, ytr, Xte, yte, _ = standardize(*load_uci(name, split=0))
    rows = np.random.default_rng(1).permutation(Xtr.shape[0])[:n]
    Xtr, ytr = Xtr[rows], ytr[rows]
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, Xtr.shape[0], 4000), rng.integers(0, Xtr.shape[0], 4000)
    median = float(np.median(np.linalg.norm(Xtr[i] - Xtr[j], axis=1)))
    return Xtr, ytr, Xte, yte, median


def falkon_sweep(name, n, centres):
    """FALKON in double, mixed and auto precision over sigma x lam on ``n`` training rows of a
    shared set with ``centres`` uniform centres, with the quantity precision="auto" screens
    by (:func:`pivot_quantile`) and what it ran."""
    Xtr, ytr, Xte, yte, median = sweep_data(name, n)
    n = Xtr.shape[0]
    out = []
    for factor in (0.25, 0.5, 1.0):
        sigma = factor * median
        pivots = None
        for lam in (1e-1, 1e-2, 1e-3, 3e-4, 1e-4):
            row = {"sigma": sigma, "lam": lam}
            for precision in ("double", "mixed", "auto"):
                try:
                    model, seconds, gib, warned = timed(
                        lambda p: hkern.fit_nystrom(Xtr, ytr, centres, solver="pcg",
                                                    sigma=sigma, lam=lam, seed=0, precision=p),
                        precision)
                except np.linalg.LinAlgError as error:
                    row[precision] = dict(failed=str(error)[:200])
                    continue
                trace = model.solver_trace_
                row[precision] = dict(seconds=seconds, gib=gib, rmse=rmse(model, Xte, yte),
                                      iters=int(model.n_iter_), jitter=float(trace.jitter),
                                      converged=bool(trace.converged),
                                      true_residual=float(trace.true_residual.max()),
                                      ran=trace.precision,
                                      float64_model_residual=trace.float64_model_residual,
                                      warnings=warned)
                if pivots is None:
                    pivots = pivot_quantile(Xtr, ytr, sigma, model.landmark_indices_)
            row["pivot_quantile"] = pivots
            out.append(row)
            d, m = row["double"], row["mixed"]
            if "failed" in m or "failed" in d:
                print(f"{name} sigma {sigma:.3g} lam {lam:g}: failed {m.get('failed', '')} "
                      f"{d.get('failed', '')}", flush=True)
                continue
            a = row["auto"]
            print(f"{name} sigma {sigma:.3g} lam {lam:g} pivots {pivots:.3g}: "
                  f"RMSE double {d['rmse']:.5f} mixed {m['rmse']:.5f} "
                  f"({100 * (m['rmse'] / d['rmse'] - 1):+.3f}%) auto {a['ran']} "
                  f"({100 * (a['rmse'] / d['rmse'] - 1):+.3f}%), time mixed/double "
                  f"{m['seconds'] / d['seconds']:.2f} auto/double "
                  f"{a['seconds'] / d['seconds']:.2f}, iterations {d['iters']} / {m['iters']}, "
                  f"converged {d['converged']} / {m['converged']}", flush=True)
    json.dump(dict(n=n, centres=centres, rows=out),
              open(os.path.join(OUT, f"falkon_sweep_{name}.json"), "w"), indent=1)


def falkon_screen(sets, n, rounds):
    """What precision="auto"'s pivot screen costs where it sends FALKON to double: the float32
    kernel matrix of the centres and its Cholesky factor, against the double factor pair and
    the whole double fit, at a wide sigma (``results/mixed_precision/falkon_screen.json``)."""
    from hkern._model import prepare_fit
    from hkern.solvers.falkon import FalkonSystem, Float32TooCoarse
    factors = {"kin40k": 1.0, "pol": 0.5, "keggundirected": 0.25}
    rows = []
    for name in sets:
        Xtr, ytr, _, _, median = sweep_data(name, n)
        sigma = factors.get(name, 1.0) * median
        inputs = prepare_fit(Xtr, ytr, kernel="gaussian", sigma=sigma, lam=1e-3,
                             task="regression")
        for m in (1024, 2048, 4096):
            centres = np.sort(np.random.default_rng(0).choice(Xtr.shape[0], m, replace=False))
            Z = np.ascontiguousarray(inputs.X[centres])
            screen, pair = [], []
            for _ in range(rounds):
                t = time.perf_counter()
                try:
                    FalkonSystem(inputs.kind, inputs.bandwidth, inputs.X, Z, 1e-3, 2,
                                 precision="mixed", screen=True)
                    passes = True
                except Float32TooCoarse:
                    passes = False
                screen.append(time.perf_counter() - t)
                t = time.perf_counter()
                FalkonSystem(inputs.kind, inputs.bandwidth, inputs.X, Z, 1e-3, 2)
                pair.append(time.perf_counter() - t)
            t = time.perf_counter()
            hkern.fit_nystrom(Xtr, ytr, m, solver="pcg", sigma=sigma, lam=1e-3, seed=0,
                              precision="double")
            fit = time.perf_counter() - t
            row = dict(set=name, sigma=sigma, centres=m, passes=passes,
                       screen_seconds=float(np.median(screen)),
                       double_factors_seconds=float(np.median(pair)), double_fit_seconds=fit)
            print(row, flush=True)
            rows.append(row)
    json.dump(dict(command=f"python experiments/mixed_precision.py falkon-screen --n {n} "
                   f"--rounds {rounds}", n=n, lam=1e-3, rows=rows),
              open(os.path.join(OUT, "falkon_screen.json"), "w"), indent=1)


def falkon_defaults(sets, rounds):
    """The default call ``fit_nystrom(X, y, solver="pcg", seed=0)`` (its centres, sigma and
    lam selection) in double and auto precision, alternating, on each set's split 0
    (``results/mixed_precision/falkon_defaults.json``)."""
    path = os.path.join(OUT, "falkon_defaults.json")
    record = json.load(open(path)) if os.path.exists(path) else {"sets": {}}
    for name in sets:
        Xtr, ytr, Xte, yte, _ = standardize(*load_uci(name, split=0))

        def fit(precision):
            return hkern.fit_nystrom(Xtr, ytr, solver="pcg", seed=0, precision=precision)
        record["sets"][name] = side_by_side(f"{name} defaults", fit, Xte, yte, rounds,
                                            ("double", "auto"))
        record["command"] = (f"python experiments/mixed_precision.py falkon-defaults SET "
                             f"--rounds {rounds}")
        json.dump(record, open(path, "w"), indent=1)


def pivot_quantile(Xtr, ytr, sigma, indices):
    """The test of FALKON's precision="auto": the 1% quantile of the float32 factor's pivots
    of W (with its jitter) over that jitter."""
    from hkern._model import prepare_fit
    from hkern.solvers.falkon import FalkonSystem
    inputs = prepare_fit(Xtr, ytr, kernel="gaussian", sigma=sigma, lam=1.0, task="regression")
    Z = np.ascontiguousarray(inputs.X[indices])
    system = FalkonSystem(inputs.kind, inputs.bandwidth, inputs.X, Z, 1.0, 2, precision="mixed")
    return float(np.quantile(system._t_diag ** 2, 0.01) / system.jitter)


def reach_table(sets):
    """The sweep's points with float32_reach, sorted by it."""
    from hkern._model import prepare_fit
    from hkern.solvers.exact_pcg import float32_reach
    points = []
    for name in sets:
        path = os.path.join(OUT, f"sweep_{name}.json")
        record = json.load(open(path))
        Xtr, ytr, _, _, _ = standardize(*load_uci(name, split=0))
        rows = np.random.default_rng(1).permutation(Xtr.shape[0])[:record["n"]]
        for row in record["rows"]:
            inputs = prepare_fit(Xtr[rows], ytr[rows], kernel="gaussian", sigma=row["sigma"],
                                 lam=row["lam"], task="regression")
            row["reach"] = float32_reach(inputs, 2)
            points.append((name, row))
        json.dump(record, open(path, "w"), indent=1)
    for name, row in sorted(points, key=lambda p: p[1]["reach"]):
        d, m = row["double"], row["mixed"]
        print(f"reach {row['reach']:9.3g}  {name:15s} sigma {row['sigma']:6.3g} lam "
              f"{row['lam']:7g}  RMSE {100 * (m['rmse'] / d['rmse'] - 1):+7.3f}%  time "
              f"{m['seconds'] / d['seconds']:5.2f}  iterations {d['iters']:4d} / {m['iters']:4d}"
              f"  converged {d['converged']} / {m['converged']}")


if __name__ == "__main__":
    main()

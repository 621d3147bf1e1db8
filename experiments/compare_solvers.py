"""Exact kernel ridge regression by Cholesky against preconditioned CG (issue 19), side by side.

kin40k split 0, standardised with training statistics, sigma 1.41, lam 1e-2 (the exact KRR
setting of the issue), one process on this machine:

1. ``fit_exact(solver="cholesky")``: the n x n kernel matrix factorised in place.
2. ``fit_exact(solver="pcg")`` with the kernel recomputed at every iteration by the fused
   engine (``max_memory`` 2 GB, so that K is not stored) and with K stored, for each
   preconditioner rank r in ``--ranks`` (block RPCholesky columns) and relative residual
   ``--tol``.

Each row: seconds (preconditioner, iterations), test RMSE, peak resident memory above the
start.  Prints a markdown table; ``--write`` also records results/solvers.json.

    python experiments/compare_solvers.py --ranks 1000 2000 --tol 1e-3
    python experiments/compare_solvers.py --no-cholesky --ranks 2000
"""
from __future__ import annotations

import argparse
import json

from common import RESULTS, banner, load_standardized, markdown_table, rmse, timed_fit

import hkern

SIGMA, LAM, SEED = 1.41, 1e-2, 0
RECOMPUTE_MEMORY = 2 * 10**9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="kin40k")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--no-cholesky", action="store_true")
    parser.add_argument("--no-stored", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    print(banner(), flush=True)
    X, y, Xt, yt, _ = load_standardized(args.dataset)
    rows, records = [], []

    def record(name, seconds, peak, model):
        err = rmse(model.predict(Xt), yt)
        trace = getattr(model, "solver_trace_", None)
        detail = "" if trace is None else (f"{trace.preconditioner_seconds:.1f} s + "
                                           f"{model.n_iter_} iterations")
        rows.append([name, f"{seconds:.1f}", detail, f"{err:.4f}", f"{peak / 2**30:.2f}"])
        records.append(dict(name=name, seconds=seconds, rmse=err, peak_bytes=peak,
                            n_iter=getattr(model, "n_iter_", None)))
        print(" | ".join(rows[-1]), flush=True)

    if not args.no_cholesky:
        seconds, peak, model = timed_fit(lambda: hkern.fit_exact(X, y, sigma=SIGMA, lam=LAM))
        record("cholesky", seconds, peak, model)
        del model
    for r in args.ranks:
        for stored in ((False,) if args.no_stored else (False, True)):
            seconds, peak, model = timed_fit(lambda: hkern.fit_exact(
                X, y, sigma=SIGMA, lam=LAM, solver="pcg", r=r, tol=args.tol, seed=SEED,
                max_memory=None if stored else RECOMPUTE_MEMORY))
            record(f"pcg r={r} {'stored K' if stored else 'recomputed K'}", seconds, peak,
                   model)
            del model
    print()
    print(markdown_table(["solver", "seconds", "of which", "test RMSE", "peak GiB"], rows))
    if args.write:
        (RESULTS / "solvers.json").write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""The main job: ``python -m hkern`` fits every available method on one data set, side by side."""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from . import __version__
from ._memory import peak_memory
from ._model import format_sigma
from ._progress import live_status
from ._threads import resolve_n_jobs
from ._validation import check_int, check_positive
from .datasets import BUNDLED, load_uci, standardize
from .exact import fit_exact
from .features import fit_rff
from .hierarchical import fit_hierarchical, fit_independent
from .kernels import kernel_kind
from .nystrom import fit_nystrom

METHODS = ("hck", "pcg", "falkon", "independent", "exact", "nystrom", "rff")
# What each method is, for the table's legend.
DESCRIPTIONS = {
    "hck": "hierarchically compositional kernel (fit_hierarchical)",
    "pcg": "exact KRR on every training row by preconditioned CG (fit_exact solver='pcg')",
    "falkon": "Nystrom KRR by FALKON's preconditioned CG (fit_nystrom solver='pcg')",
    "independent": "independent (block-diagonal) kernel (fit_independent)",
    "exact": "exact KRR by Cholesky on a subsample of --exact-n rows (fit_exact)",
    "nystrom": "Nystrom KRR, direct solver (fit_nystrom)",
    "rff": "random Fourier features (fit_rff)",
}


def _checked(convert, check):
    """An argparse type: convert the text, then hkern's own check (its ValueError becomes
    argparse's usage error, exit status 2, instead of a traceback later)."""
    def parse(text):
        try:
            return check(convert(text))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    parse.__name__ = convert.__name__
    return parse


def _whole(name, low, high=None):
    """An argparse type: an integer in [low, high] (no upper bound when high is None)."""
    return _checked(int, lambda v: check_int(v, name, low=low, high=high))


def _choice_or_positive(name, choices):
    """An argparse type: one of the strings ``choices`` (hyperparameters the fit selects), or
    a number > 0."""
    def parse(text):
        if text in choices:
            return text
        try:
            return check_positive(float(text), name)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"{name} must be {' or '.join(repr(c) for c in choices)} or a number > 0; "
                f"got {text!r} ({exc})") from None
    parse.__name__ = name
    return parse


def _n_jobs(text):
    return None if text.lower() == "none" else int(text)


def _program_name():
    """``hkern`` when run as the installed command, else ``python -m hkern`` (argparse's own
    default would say ``__main__.py``)."""
    return "hkern" if os.path.basename(sys.argv[0] or "") == "hkern" else "python -m hkern"


def _parser():
    p = argparse.ArgumentParser(
        prog=_program_name(),
        description="Fit hkern's kernel ridge methods on one data set and print test RMSE, fit and "
                    "predict time and peak memory side by side.  Inputs and targets are "
                    "standardised with training statistics; RMSE is in standardised units.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--plot", metavar="FILE", default=None,
                   help="also write the error-against-time frontier to FILE (.png, .pdf, .svg; "
                        "needs matplotlib: pip install 'hkern[plot]')")
    p.add_argument("--data", default=BUNDLED,
                   help=f"UCI data set name (default {BUNDLED}, bundled); others need --data-dir "
                        "or $HKERN_DATA")
    p.add_argument("--data-dir", default=None, help="folder with <name>/data.csv.gz")
    p.add_argument("--split", type=_whole("--split", 0, 9),
                   default=0, help="fixed train/test split 0..9 (default 0)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help=f"comma-separated subset of {','.join(METHODS)} (default all)")
    p.add_argument("--r", type=_whole("--r", 1), default=1024,
                   help="landmarks / features of nystrom and rff (default 1024)")
    p.add_argument("--falkon-r", type=_whole("--falkon-r", 1),
                   default=8192, help="centres of falkon (default 8192)")
    p.add_argument("--hck-r", type=_whole("--hck-r", 1),
                   default=256,
                   help="landmarks per node of hck, and the leaf size of hck and independent "
                        "(default 256; hck holds about 5 n r numbers)")
    p.add_argument("--kernel", type=_checked(str, lambda v: kernel_kind(v)[0]),
                   default="gaussian", help="kernel name (default gaussian)")
    p.add_argument("--sigma", type=_choice_or_positive("--sigma", ("auto", "ard")),
                   default="ard",
                   help="kernel bandwidth: a number, 'auto' (one, selected by each method) or "
                        "'ard' (one lengthscale per feature, selected; default)")
    p.add_argument("--lam", type=_choice_or_positive("--lam", ("auto",)), default="auto",
                   help="ridge regularisation: a number or 'auto' (selected; default)")
    p.add_argument("--seed", type=_whole("--seed", 0),
                   default=0, help="random seed (default 0)")
    # The Cholesky row is the baseline beside exact KRR by PCG on every row; at 10 000 rows
    # its selection took 24.5 s of the job's 188 s (kin40k, 2026-11-27), over the 3 minutes.
    p.add_argument("--exact-n", type=_whole("--exact-n", 0),
                   default=5000,
                   help="training subsample for exact KRR by Cholesky, which needs 8 n^2 bytes "
                        "(default 5000; 0 = all)")
    p.add_argument("--n-jobs", type=_checked(_n_jobs, lambda v: resolve_n_jobs(v) and v),
                   default=None, help="threads: a positive number, -1 for every CPU, or None "
                                      "(default: the CPUs available, within OMP_NUM_THREADS)")
    return p


def _progress(t0, message):
    print(f"[{time.perf_counter() - t0:7.1f}s] {message}", flush=True)


def main(argv=None):
    """Entry point of ``python -m hkern``; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.plot:       # before the fits: a missing matplotlib or folder fails in a second
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("error: --plot needs matplotlib: pip install 'hkern[plot]'", file=sys.stderr)
            return 2
        if not os.path.isdir(os.path.dirname(os.path.abspath(args.plot))):
            print(f"error: --plot {args.plot}: its folder does not exist", file=sys.stderr)
            return 2
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown:
        print(f"error: unknown method(s) {unknown}; choose from {list(METHODS)}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        data = load_uci(args.data, split=args.split, data_dir=args.data_dir)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    X_train, y_train, X_test, y_test, _ = standardize(*data)
    n, d = X_train.shape
    print(f"hkern {__version__}: {args.data} split {args.split}: {n} train, {len(y_test)} test, "
          f"d={d} (standardised with training statistics)")
    print(f"kernel={args.kernel} sigma={args.sigma} lam={args.lam} seed={args.seed} "
          f"threads={resolve_n_jobs(args.n_jobs)}; r: hck {args.hck_r}, falkon {args.falkon_r}, "
          f"nystrom and rff {args.r}", flush=True)

    common = dict(kernel=args.kernel, sigma=args.sigma, lam=args.lam, n_jobs=args.n_jobs)
    rows, skipped = [], []
    for method in methods:
        Xf, yf, r = X_train, y_train, args.r
        if method in ("hck", "independent"):
            r = args.hck_r
            fit_tree = fit_hierarchical if method == "hck" else fit_independent
            fit = lambda: fit_tree(Xf, yf, r=r, seed=args.seed, **common)  # noqa: E731
        elif method == "pcg":
            r = None
            fit = lambda: fit_exact(Xf, yf, solver="pcg", seed=args.seed,  # noqa: E731
                                    **common)
        elif method == "falkon":
            r = min(args.falkon_r, n)
            fit = lambda: fit_nystrom(Xf, yf, r=r, solver="pcg", seed=args.seed,  # noqa: E731
                                      **common)
        elif method == "exact":
            m = n if args.exact_n <= 0 else min(n, args.exact_n)
            pick = np.random.default_rng(args.seed).choice(n, size=m, replace=False)
            Xf, yf, r = X_train[np.sort(pick)], y_train[np.sort(pick)], None
            fit = lambda: fit_exact(Xf, yf, seed=args.seed, **common)  # noqa: E731
        elif method == "nystrom":
            fit = lambda: fit_nystrom(Xf, yf, r=r, seed=args.seed, **common)  # noqa: E731
        else:
            fit = lambda: fit_rff(Xf, yf, r=r, seed=args.seed, **common)  # noqa: E731
        _progress(t0, f"{method}: fitting on {len(yf)} points ...")
        try:
            # The fit's own progress (selection candidates, CG iterations with the time left)
            # on one live line of standard error while it runs.
            with live_status() as status, peak_memory() as mem:
                start = time.perf_counter()
                model = fit()
                fit_s = time.perf_counter() - start
                start = time.perf_counter()
                pred = model.predict(X_test)
                predict_s = time.perf_counter() - start
                status.clear()
        except (ValueError, MemoryError, np.linalg.LinAlgError) as exc:
            _progress(t0, f"{method}: skipped ({exc})")
            skipped.append(method)
            continue
        rmse = float(np.sqrt(np.mean((pred - y_test) ** 2)))
        selection = model.selection_
        chosen = (f"; selected sigma={format_sigma(model.sigma_)} lam={model.lam_:.3g} "
                  f"({selection.n_evaluations} fits)" if selection is not None else "")
        _progress(t0, f"{method}: done, fit {fit_s:.2f}s, test RMSE {rmse:.4f}{chosen}")
        if method == "pcg":
            r = model.solver_trace_.rank        # the preconditioner's rank
        rows.append((method, "-" if r is None else str(r), len(yf), rmse, fit_s, predict_s,
                     mem.bytes / 2**20, model.lam_))

    print()
    header = f"{'method':<10}{'r':>6}{'n_fit':>8}{'lam':>10}{'test RMSE':>11}{'fit s':>9}" \
             f"{'predict s':>11}{'peak MiB':>10}"
    print(header)
    print("-" * len(header))
    for method, r, nfit, rmse, fit_s, pred_s, mib, lam in rows:
        print(f"{method:<10}{r:>6}{nfit:>8}{lam:>10.3g}{rmse:>11.4f}{fit_s:>9.2f}"
              f"{pred_s:>11.3f}{mib:>10.0f}")
    print("\nfit s: the whole fit, hyperparameter selection included (sigma='auto' or 'ard', "
          "lam='auto'); the selected lengthscales are printed above.\npeak MiB: peak resident "
          "memory above the level before each fit (fit + predict).")
    for method in dict.fromkeys(row[0] for row in rows):
        print(f"  {method}: {DESCRIPTIONS[method]}")
    print("\nerror against time (the frontier: each fit more accurate than every faster one)")
    best = float("inf")
    for method, r, nfit, rmse, fit_s, *_ in sorted(rows, key=lambda row: row[4]):
        if rmse < best:
            best = rmse
            print(f"  {fit_s:9.2f} s  test RMSE {rmse:.4f}  {method} (r={r}, n_fit={nfit})")
    if args.plot and rows:
        _write_plot(args.plot, rows, args.data)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s on {resolve_n_jobs(args.n_jobs)} "
          "threads, data loading included")
    if skipped:
        print(f"error: {len(skipped)} of {len(methods)} method(s) skipped ({', '.join(skipped)}); "
              "see the messages above", file=sys.stderr)
        return 1
    return 0


def _write_plot(path, rows, data):
    """The frontier of the table's rows to ``path`` (hkern.plotting), with the Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    from .plotting import plot_frontier
    ax = plot_frontier([(method, fit_s, rmse) for method, _, _, rmse, fit_s, *_ in rows],
                       title=f"{data}: test RMSE against fit time", ylabel="test RMSE "
                       "(standardised y)")
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=120)
    print(f"\nwrote the frontier to {path}")


def run():
    """Console-script entry point (``hkern``): exit with main()'s status."""
    sys.exit(main())

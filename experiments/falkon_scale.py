"""FALKON at scale (issue 54 item 4): beside the real Falkon library at 10^6 rows, and alone
on 10^7 rows with X memory-mapped.

    python experiments/falkon_scale.py peer [--n 1000000] [--r 4096] [--rounds 2] [--write]
    python experiments/falkon_scale.py ten-million [--n 10000000] [--r 4096] [--write]
    python experiments/falkon_scale.py ridge [--n 100000 1000000] [--write]

The data are experiments/growth.py's synthetic set with d = 8 (X standard normal, y a sum of
sines plus noise of sd 0.1, so the best test RMSE is 0.1), its first n rows, tested on its
10 000 test rows.  Both fits use the same r centres (rows drawn uniformly without
replacement with seed 0), the Gaussian kernel exp(-|x - z|^2 / (2 sigma^2)) with sigma 2,
and the same ridge: hkern's lam of K + lam I is Falkon's ``penalty`` times n (Falkon solves
(C^T C + penalty n W) alpha = C^T y), with the penalty 1e-5 at every n (PENALTY).  hkern's
model is the targets' mean plus a zero-mean fit, so Falkon is given y minus the training mean
and the mean is added to its predictions.

``peer``: rounds of hkern's ``fit_nystrom(solver="pcg")`` (its defaults: tol 1e-3, precision
"auto"), each followed (in the first ``--falkon-rounds``) by the real Falkon with as many
iterations as hkern took (its own default is 20, and it has no stopping rule of its own at
these tolerances); each fit in a fresh process, one after the other, so that they share the
machine's state.  Falkon runs in its own environment: ``$FALKON_PYTHON`` (default
/work/falkon-venv/bin/python; FalkonML/falkon built with FORCE_ONLY_CPU=1 on torch's CPU
build, float64 tensors, torch's threads = the machine's cores).

``peer --double``: hkern alone with ``precision="double"`` (Falkon's arithmetic), for the
same comparison without hkern's single-precision passes.

``ten-million``: hkern's fit on the memory-mapped X of n = 10^7 rows.

``ridge``: hkern alone, with lam held at 1 and with lam / n held at PENALTY, at each n: why the
penalty, not lam, is held fixed.

Each record: fit seconds, iterations, test RMSE, and the fit's peak anonymous resident memory
(RssAnon, not the page cache of a memory-mapped X) and peak resident set above the process's
before the fit.  Records go to ``results/falkon_scale.json`` (``--write``).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from growth import N_MAX, AnonymousPeak, data_path, make_data  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "results" / "falkon_scale.json"
FALKON_PYTHON = os.environ.get("FALKON_PYTHON", "/work/falkon-venv/bin/python")
D = 8
FALKON_MEMORY_CAP = 4 * 2**30
SIGMA = 2.0
# FALKON's penalty lam / n, held fixed as n grows (hkern's lam = PENALTY n: 10 at 10^6 rows, 100
# at 10^7).  With lam held at 1 instead, hkern's iterations grew from 18 at 10^5 rows to 48 at
# 10^6 (188.7 s against 95.7 s at 19 iterations, test RMSE 0.1029 against 0.1054): 4096 centres
# then no longer make C^T C close to (n / m) W^2 at the scale of the ridge, and 10^7 rows would
# take far beyond the 20 minutes.
PENALTY = 1e-5


def centre_indices(n, r, seed=0):
    """The r centres' row indices, drawn once for both libraries."""
    return np.sort(np.random.default_rng(seed).choice(n, r, replace=False))


def load(n, mmap):
    folder = data_path(D)
    X_all = np.load(folder / "X.npy", mmap_mode="r")
    y_all = np.load(folder / "y.npy", mmap_mode="r")
    X = X_all[:n] if mmap else np.array(X_all[:n])
    return X, np.array(y_all[:n]), np.array(X_all[N_MAX[D]:]), np.array(y_all[N_MAX[D]:])


def fit_hkern(n, r, mmap, centres, lam=None, precision="auto"):
    import hkern
    from hkern._threads import resolve_n_jobs
    X, y, Xt, yt = load(n, mmap)
    lam = PENALTY * n if lam is None else lam
    t0 = time.perf_counter()
    with AnonymousPeak() as peak:
        model = hkern.fit_nystrom(X, y, r, solver="pcg", sigma=SIGMA, lam=lam, seed=0,
                                  landmarks=centres, precision=precision)
    seconds = time.perf_counter() - t0
    rmse = float(np.sqrt(np.mean((model.predict(Xt) - yt) ** 2)))
    return dict(library="hkern", version=hkern.__version__, lam=lam, seconds=seconds,
                iterations=int(model.n_iter_), precision=model.solver_trace_.precision,
                test_rmse=rmse, peak_anonymous_bytes=peak.bytes, peak_resident_bytes=peak.rss_bytes,
                threads=resolve_n_jobs(None))


def fit_falkon(n, r, centres, maxiter):
    import falkon
    import torch
    from falkon.center_selection import FixedSelector
    from falkon.kernels import GaussianKernel
    X, y, Xt, yt = load(n, mmap=False)
    mean = float(y.mean())
    Xtorch = torch.from_numpy(X)
    ytorch = torch.from_numpy((y - mean)[:, None])
    # Its default memory cap is unbounded: it then asks for one n x r block (33 GB at 10^6 x
    # 4096) and fails; with a cap it works in blocks that fit it.
    options = falkon.FalkonOptions(use_cpu=True, keops_active="no",
                                   max_cpu_mem=FALKON_MEMORY_CAP)
    t0 = time.perf_counter()
    with AnonymousPeak() as peak:
        Z = Xtorch[torch.from_numpy(centres)].contiguous()
        model = falkon.Falkon(kernel=GaussianKernel(sigma=SIGMA, opt=options),
                              penalty=PENALTY, M=r, center_selection=FixedSelector(Z),
                              maxiter=maxiter, seed=0, options=options)
        model.fit(Xtorch, ytorch)
    seconds = time.perf_counter() - t0
    predicted = model.predict(torch.from_numpy(Xt)).numpy()[:, 0] + mean
    rmse = float(np.sqrt(np.mean((predicted - yt) ** 2)))
    return dict(library="falkon", version=falkon.__version__, seconds=seconds,
                iterations=maxiter, precision="double", test_rmse=rmse,
                peak_anonymous_bytes=peak.bytes, peak_resident_bytes=peak.rss_bytes,
                threads=torch.get_num_threads())


def child(args):
    centres = np.load(args.centres)
    if args.library == "hkern":
        record = fit_hkern(args.n, args.r, args.mmap, centres, args.lam, args.precision)
    else:
        record = fit_falkon(args.n, args.r, centres, args.maxiter)
    print(json.dumps(record), flush=True)


def run_child(python, args):
    out = subprocess.run([python, __file__, "child", *args], capture_output=True, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(out.stderr[-2000:])
    record = json.loads(lines[-1])
    print({k: record[k] for k in ("library", "seconds", "iterations", "precision",
                                  "test_rmse")}, flush=True)
    return record


def code_version_of_hkern():
    """common.code_version, imported on call: this module also runs in Falkon's environment,
    which has no hkern."""
    from common import code_version
    return code_version()


def ridge(args):
    """hkern's iterations and error with lam held at 1 and with lam / n held at PENALTY."""
    make_data(D)
    records = []
    for n in args.n:
        centres_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"falkon_scale_{n}_{args.r}.npy"
        np.save(centres_file, centre_indices(n, args.r))
        for lam in (1.0, PENALTY * n):
            ours = run_child(sys.executable, ["hkern", "--n", str(n), "--r", str(args.r),
                                              "--centres", str(centres_file), "--lam", str(lam)])
            records.append(dict(ours, part="ridge", n=n, d=D, r=args.r, sigma=SIGMA,
                                penalty=lam / n, code=code_version_of_hkern()))
    if args.write:
        write(records, lambda r: r["part"] == "ridge")


def write(records, replaced):
    kept = json.loads(RECORD.read_text())["records"] if RECORD.exists() else []
    commands = json.loads(RECORD.read_text()).get("commands", {}) if RECORD.exists() else {}
    commands[records[0]["part"]] = f"python experiments/falkon_scale.py {' '.join(sys.argv[1:])}"
    RECORD.write_text(json.dumps(dict(commands=commands, records=[r for r in kept
                                                                  if not replaced(r)] + records),
                                 indent=1) + "\n")
    print("wrote", RECORD.relative_to(ROOT))


def measure(args):
    make_data(D)
    centres_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"falkon_scale_{args.n}_{args.r}.npy"
    np.save(centres_file, centre_indices(args.n, args.r))
    common = ["--n", str(args.n), "--r", str(args.r), "--centres", str(centres_file)]
    records = []
    where = dict(n=args.n, d=D, r=args.r, sigma=SIGMA, lam=PENALTY * args.n, penalty=PENALTY,
                 code=code_version_of_hkern())
    part = "peer_double" if getattr(args, "double", False) else args.part
    for round_ in range(args.rounds):
        ours = run_child(sys.executable, ["hkern", *common]
                         + (["--mmap"] if args.part == "ten-million" else [])
                         + (["--precision", "double"] if part == "peer_double" else []))
        records.append(dict(where, round=round_, part=part, memmap=args.part ==
                            "ten-million", **ours))
        if part == "peer_double":
            continue
        if args.part == "peer" and round_ < args.falkon_rounds:
            theirs = run_child(FALKON_PYTHON, ["falkon", *common, "--maxiter",
                                               str(ours["iterations"])])
            records.append(dict(where, round=round_, part="peer", memmap=False, **theirs))
    if args.write:
        write(records, lambda r: (r["part"], r["n"], r["r"]) == (part, args.n, args.r))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    for part, n, rounds in (("peer", 10**6, 2), ("ten-million", 10**7, 1)):
        p = sub.add_parser(part)
        p.add_argument("--n", type=int, default=n)
        p.add_argument("--r", type=int, default=4096)
        p.add_argument("--rounds", type=int, default=rounds)
        p.add_argument("--falkon-rounds", type=int, default=1)
        if part == "peer":
            p.add_argument("--double", action="store_true",
                           help="hkern alone, in double precision (the records' part "
                                "peer_double)")
        p.add_argument("--write", action="store_true")
    g = sub.add_parser("ridge")
    g.add_argument("--n", type=int, nargs="+", default=[10**5, 10**6])
    g.add_argument("--r", type=int, default=4096)
    g.add_argument("--write", action="store_true")
    c = sub.add_parser("child")
    c.add_argument("library", choices=["hkern", "falkon"])
    c.add_argument("--n", type=int)
    c.add_argument("--r", type=int)
    c.add_argument("--centres")
    c.add_argument("--maxiter", type=int, default=20)
    c.add_argument("--mmap", action="store_true")
    c.add_argument("--lam", type=float, default=None)
    c.add_argument("--precision", default="auto")
    args = parser.parse_args()
    if args.part == "child":
        child(args)
    elif args.part == "ridge":
        ridge(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()

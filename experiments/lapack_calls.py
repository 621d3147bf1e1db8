"""hkern's decompositions against LAPACK's and against an older hkern, side by side (issue 51).

    python experiments/lapack_calls.py                        # this hkern and SciPy's LAPACK
    python experiments/lapack_calls.py --old-python /path/to/old-venv/bin/python

Every measurement runs in a fresh process (its peak resident memory is that process's high
water mark), in rounds: each round runs every case once for each build, the builds in
alternating order, so that a slow spell of the machine hits both.  The record keeps every
round and the medians; ``--out`` (default results/lapack_calls.json) receives it.

Cases (2 threads unless said):

* ``eigh``: all eigenpairs of a random symmetric 4000 x 4000, hkern's ``_linalg.eigh`` against
  SciPy's ``eigh(driver="evd")`` (LAPACK dsyevd) in the same process, in the order hkern,
  LAPACK, LAPACK, hkern (each time the mean of the two; ``ratio``: hkern's over LAPACK's);
* ``eigh_subset``: its top 16 pairs, against SciPy's ``eigh(subset_by_index=..., driver="evr")``;
* ``lstsq``: a random 6000 x 2000 least squares with 50 right-hand sides, against SciPy's
  ``lstsq(lapack_driver="gelsd")``;
* ``nystrom_direct``: ``fit_nystrom(X, y, 4000, solver="direct")`` on 20 000 kin40k rows
  (sigma 2, lam 1e-3), with its test RMSE;
* ``kernel_pca``: an HCK model of 6 000 kin40k rows (r 128), ``kernel_pca`` with 10 and with
  750 components (Lanczos and the dense eigensolver);
* ``meka``: ``fit_meka(X, y, 512, n_clusters=8)`` on all of kin40k (sigma 2, lam 1e-3), with
  its test RMSE;
* ``long_calls`` (this build only: ``--cases long_calls``): the single LAPACK calls of the fits
  on one thread at sizes the fits reach (``LONG_CALLS``), for the list in doc/design.md;
* ``shared_sets`` (``--cases shared_sets``, with $HKERN_DATA): the default calls
  ``fit_nystrom(X, y, 1024)`` and ``fit_meka(X, y, 256)`` on split 0 of ``SHARED_SETS``, their
  test RMSE and time.

The old build's ``_linalg`` had no ``n_threads``: its decompositions ran on one thread (which
was the point of writing them out); its time is reported as it ran.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ["eigh", "eigh_subset", "lstsq", "nystrom_direct", "kernel_pca", "meka"]
# The shared sets on which the fits whose decompositions changed are compared (``shared_sets``,
# read from $HKERN_DATA but for the bundled kin40k).
SHARED_SETS = ["kin40k", "pol", "elevators", "protein", "keggundirected"]
# The single LAPACK calls of the fits, on one thread as the fits run them, at sizes the fits
# reach (doc/design.md lists those that can exceed a second): name -> (what, call maker).
LONG_CALLS = ["eigh 2000", "eigh 4000", "eigh 6000", "eigh top 16 of 4000",
              "eigh top 750 of 6000", "getrf 2048", "getrf 4096", "lstsq 2048 x 1024",
              "qr 40000 x 512"]     # lstsq: MEKA's driver, gesdd, with m right-hand sides


def _rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(call):
    t0 = time.perf_counter()
    out = call()
    return time.perf_counter() - t0, out


def _long_call(name, rng, _linalg, sla):
    """The call named in LONG_CALLS, on fresh random inputs (it may overwrite them)."""
    words = name.split()
    if words[0] == "eigh":
        n = int(words[-1])
        A = rng.standard_normal((n, n))
        A += A.T
        subset = None if words[1] != "top" else (n - int(words[2]), n - 1)
        return lambda: _linalg.eigh(A, subset=subset, overwrite_a=True)
    if words[0] == "getrf":
        A = rng.standard_normal((int(words[1]),) * 2)
        return lambda: sla.lu_factor(A, overwrite_a=True, check_finite=False)
    m, n = int(words[1]), int(words[3])
    A = rng.standard_normal((m, n))
    if words[0] == "lstsq":
        B = rng.standard_normal((m, m))
        return lambda: _linalg.lstsq(A, B, driver="gesdd")
    return lambda: _linalg.qr(A)


def worker(case):
    """Run one case in this process and print its record (one JSON line)."""
    import numpy as np
    import scipy.linalg as sla
    from threadpoolctl import threadpool_limits

    import hkern
    from hkern import _linalg
    from hkern.datasets import load_uci, standardize

    takes_threads = "n_threads" in (_linalg.eigh.__doc__ or "")
    threads = {"n_threads": 2} if takes_threads else {}
    rng = np.random.default_rng(0)
    record = {"case": case}
    if case in ("eigh", "eigh_subset", "lstsq"):
        # hkern, LAPACK, LAPACK, hkern (a drift of the machine's speed during the run cancels
        # in each pair's mean), A copied afresh for each.
        if case == "lstsq":
            A, B = rng.standard_normal((6000, 2000)), rng.standard_normal((6000, 50))
            ours = lambda: _linalg.lstsq(A, B, **threads)[0]                    # noqa: E731
            lapack = lambda: sla.lstsq(A, B, lapack_driver="gelsd")[0]        # noqa: E731
        else:
            A = rng.standard_normal((4000, 4000))
            A += A.T
            subset = (3984, 3999) if case == "eigh_subset" else None
            kw = {"driver": "evd"} if subset is None else {"driver": "evr",
                                                          "subset_by_index": subset}
            ours = lambda: _linalg.eigh(A, subset=subset, **threads)            # noqa: E731
            lapack = lambda: sla.eigh(A, **kw)                                  # noqa: E731
        times = {"hkern": [], "lapack": []}
        outs = {}
        before = _rss_mib()
        for name in ("hkern", "lapack", "lapack", "hkern"):
            with threadpool_limits(2):
                seconds, outs[name] = _timed(ours if name == "hkern" else lapack)
            times[name].append(seconds)
            if name == "hkern" and "hkern_extra_mib" not in record:
                record["hkern_extra_mib"] = _rss_mib() - before
        record["hkern_s"] = sum(times["hkern"]) / 2
        record["lapack_s"] = sum(times["lapack"]) / 2
        record["ratio"] = record["hkern_s"] / record["lapack_s"]
        ours_out, ref_out = outs["hkern"], outs["lapack"]
        if case == "lstsq":
            record["relative_difference"] = float(np.linalg.norm(ours_out - ref_out)
                                                  / np.linalg.norm(ref_out))
        else:
            record["max_eigenvalue_difference"] = float(np.abs(ours_out[0] - ref_out[0]).max())
    elif case == "shared_sets":
        # The default call of each fit whose decompositions changed (the Nystrom features'
        # factor, MEKA's bases, links and orthonormal form, the ridge selection's eigenpairs):
        # its test RMSE (standardised y) on split 0.
        for name in SHARED_SETS:
            Xtr, ytr, Xte, yte, _ = standardize(*load_uci(name, split=0))
            for fit, call in (("nystrom", lambda: hkern.fit_nystrom(Xtr, ytr, 1024, seed=0,
                                                                    n_jobs=2)),
                              ("meka", lambda: hkern.fit_meka(Xtr, ytr, 256, seed=0,
                                                              n_jobs=2))):
                seconds, model = _timed(call)
                record[f"{name} {fit} test_rmse"] = float(
                    np.sqrt(np.mean((model.predict(Xte) - yte) ** 2)))
                record[f"{name} {fit} fit_s"] = seconds
    elif case == "long_calls":
        for name in LONG_CALLS:
            call = _long_call(name, rng, _linalg, sla)
            with threadpool_limits(1):
                record[name] = _timed(call)[0]
            del call
    else:
        Xtr, ytr, Xte, yte, _ = standardize(*load_uci("kin40k", split=0))
        before = _rss_mib()
        if case == "nystrom_direct":
            seconds, model = _timed(lambda: hkern.fit_nystrom(
                Xtr[:20000], ytr[:20000], 4000, solver="direct", sigma=2.0, lam=1e-3, seed=0,
                n_jobs=2))
            record["fit_s"] = seconds
            record["test_rmse"] = float(np.sqrt(np.mean((model.predict(Xte) - yte) ** 2)))
        elif case == "kernel_pca":
            model = hkern.fit_hierarchical(Xtr[:6000], ytr[:6000], r=128, sigma=2.0,
                                           lam=1e-3, seed=0, n_jobs=2)
            before = _rss_mib()
            record["pca10_s"], (v10, _) = _timed(lambda: model.kernel_pca(10))
            record["pca750_s"], (v750, _) = _timed(lambda: model.kernel_pca(750))
            record["top_eigenvalues"] = [float(v) for v in v10[:3]]
            record["eigenvalue_750"] = float(v750[-1])
        elif case == "meka":
            seconds, model = _timed(lambda: hkern.fit_meka(
                Xtr, ytr, 512, n_clusters=8, sigma=2.0, lam=1e-3, seed=0, n_jobs=2))
            record["fit_s"] = seconds
            record["test_rmse"] = float(np.sqrt(np.mean((model.predict(Xte) - yte) ** 2)))
        record["extra_mib"] = _rss_mib() - before
    record["peak_mib"] = _rss_mib()
    print(json.dumps(record))


def _run(python, case):
    out = subprocess.run([python, str(Path(__file__).resolve()), "worker", case],
                         capture_output=True, text=True, cwd=ROOT / "experiments", check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old-python", help="an interpreter with the older hkern installed")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "results" / "lapack_calls.json"))
    args = parser.parse_args(argv)
    builds = {"new": sys.executable}
    if args.old_python:
        builds["old"] = args.old_python
    runs = {name: {case: [] for case in args.cases.split(",")} for name in builds}
    for round_ in range(args.rounds):
        for case in args.cases.split(","):
            order = list(builds) if round_ % 2 == 0 else list(builds)[::-1]
            for name in order:
                record = _run(builds[name], case)
                runs[name][case].append(record)
                print(name, json.dumps(record), flush=True)
    medians = {name: {case: {key: statistics.median(r[key] for r in records)
                             for key in records[0] if isinstance(records[0][key], float)}
                      for case, records in cases.items()}
               for name, cases in runs.items()}
    for name, cases in medians.items():
        for case, values in cases.items():
            print(f"median {name:3s} {case:15s} " + "  ".join(
                f"{key} {value:.4g}" for key, value in values.items()))
    Path(args.out).write_text(json.dumps({"command": " ".join(sys.argv), "rounds": args.rounds,
                                          "runs": runs, "medians": medians}, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2])
    else:
        main()

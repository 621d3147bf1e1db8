"""A memory-mapped X against the same X in memory (issue 54 item 2): the same model, bit for
bit, and the fit's peak memory beyond the page cache against its own estimate.

    python experiments/memory_mapped.py [--methods falkon rff exact_pcg] [--write]

The data are experiments/growth.py's synthetic set with d = 8; FALKON (1024 centres) and random
features (1024) fit its first 10^6 rows, exact PCG (K recomputed at every product) its first
30 000 (at 10^5 rows it took 453 s, and its time grows as n^2: 10^6 rows would take about
half a day).  sigma = sqrt(8), lam 1e-3, seed 0, the machine's threads.

Each fit runs in a fresh process, after a fit of 2000 rows (the BLAS and OpenMP threads' own
memory is made then), the in-memory X first (``np.load`` of the rows, then the
fit), then ``np.load(..., mmap_mode="r")[:n]`` itself.  Recorded for each: the fit's seconds,
a digest of its coefficients and of its predictions on the 10 000 test rows, the peak
anonymous resident memory above the process's before the fit (RssAnon: what the fit
allocates; a memory map's pages are file pages, not anonymous), the peak resident set (which
also counts X's pages read into the page cache), and the largest estimate the fit passed to
its memory guard (``hkern._memory.recorded_estimates``).  Records go to
``results/memory_mapped.json`` (``--write``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from falkon_scale import code_version_of_hkern, load  # noqa: E402
from growth import AnonymousPeak, make_data  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "results" / "memory_mapped.json"
D = 8
FIXED = dict(sigma=math.sqrt(D), lam=1e-3, seed=0)
METHODS = {
    "falkon": ("fit_nystrom", dict(r=1024, solver="pcg"), 10**6),
    "rff": ("fit_rff", dict(r=1024), 10**6),
    "exact_pcg": ("fit_exact", dict(solver="pcg"), 30_000),
}


def digest(array):
    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float64).tobytes()).hexdigest()[:16]


def child(method, mmap):
    import hkern
    from hkern._memory import recorded_estimates
    call, size, n = METHODS[method]
    X, y, Xt, _ = load(n, mmap)
    fit = getattr(hkern, call)
    # A small fit first: the BLAS threads' buffers and OpenMP's threads are the process's, made
    # once at the first call, not the fit's (10 to 20 MiB here).
    fit(np.array(X[:2000]), y[:2000], **size, **FIXED)
    t0 = time.perf_counter()
    with recorded_estimates() as estimates, AnonymousPeak() as peak:
        model = fit(X, y, **size, **FIXED)
    seconds = time.perf_counter() - t0
    record = dict(method=method, n=n, d=D, memmap=mmap, x_type=type(X).__name__,
                  arguments=repr(dict(size, **FIXED)), seconds=seconds,
                  coef_digest=digest(model.coef_ if hasattr(model, "coef_")
                                     else model.dual_coef_),
                  predictions_digest=digest(model.predict(Xt)),
                  peak_anonymous_bytes=peak.bytes, peak_resident_bytes=peak.rss_bytes,
                  estimate_bytes=max((need for _, need in estimates), default=None),
                  estimates=[what for what, _ in estimates])
    print(json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "MMAP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1] == "mmap")
        return
    make_data(D)
    records = []
    for method in args.methods:
        for form in ("memory", "mmap"):
            out = subprocess.run([sys.executable, __file__, "--child", method, form],
                                 capture_output=True, text=True)
            lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
            if not lines:
                raise RuntimeError(out.stderr[-2000:])
            record = dict(json.loads(lines[-1]), code=code_version_of_hkern())
            print({k: record[k] for k in ("method", "memmap", "seconds", "coef_digest",
                                          "peak_anonymous_bytes", "estimate_bytes")},
                  flush=True)
            records.append(record)
    if args.write:
        kept = json.loads(RECORD.read_text())["records"] if RECORD.exists() else []
        kept = [r for r in kept if r["method"] not in args.methods]
        command = f"python experiments/memory_mapped.py {' '.join(sys.argv[1:])}".strip()
        RECORD.write_text(json.dumps(dict(command=command, records=kept + records), indent=1)
                          + "\n")
        print("wrote", RECORD.relative_to(ROOT))


if __name__ == "__main__":
    main()

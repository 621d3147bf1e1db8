"""How each fit's time, memory and error grow with n, from 10^3 to 10^7 rows (issue 54).

    python experiments/growth.py run [--d 8] [--n 1000 10000 ...] [--methods ...]
                                     [--call fixed default] [--budget 1200]
    python experiments/growth.py page        # doc/results/growth.md and its plots

A synthetic regression problem: X standard normal in d dimensions, y = f(X) + 0.1 noise with
f(x) = sum_j sin(a_j x_j) / sqrt(d / 2), a_j uniform in [0.5, 1.5], drawn once for the largest n
and memory-mapped from ``$HKERN_GROWTH_DIR`` (default /tmp/hkern_growth), so that every n
fits the first n rows of one data set; the test set is 10 000 further rows.

Each (method, n, call) runs in a fresh process (its peak resident memory is its own: the
resident set above the one after X was read in), one thread per core the machine has, and
the record goes to ``results/growth.json``.  ``fixed``: sigma = sqrt(d), lam 1e-3 and each
method's size below; ``default``: the call with X and y only (and seed=0), its selection
included.  A method stops growing where a run took longer than ``--budget`` seconds, the
next n would by its measured exponent, or the fit refused the memory (its ValueError is the
record: where and why it stops).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "results" / "growth.json"
DATA = Path(os.environ.get("HKERN_GROWTH_DIR", "/tmp/hkern_growth"))
TEST_ROWS = 10_000
CHUNK = 1_000_000
# The rows drawn per d (the largest n measured): 10^7 x 8 is 0.6 GiB, 10^6 x 90 is 0.7 GiB.
N_MAX = {8: 10**7, 90: 10**6}
# A run expected to exceed 4 budgets is started only to see whether the fit refuses the memory
# (it checks before any work), and stopped after this many seconds otherwise.
PROBE_SECONDS = 60

# The fits, their size at fixed hyperparameters, and the theory's exponents of time and memory
# in n at that size (d and the size fixed; memory beyond X and y).  exact PCG's factor is
# n r, but its default rank keeps it within 1 GiB (hkern.solvers.exact_pcg.default_rank), so
# past 10^5 rows its memory stops growing and its iterations grow instead; Nystrom, FALKON and
# random features hold O(r^2) and a block of rows at a time.
METHODS = {
    "exact_direct": dict(call="fit_exact", size={"solver": "direct"}, time=3, memory=2),
    "exact_pcg": dict(call="fit_exact", size={"solver": "pcg"}, time=2, memory=1),
    "falkon": dict(call="fit_nystrom", size={"r": 1024, "solver": "pcg"}, time=1, memory=0),
    "falkon_4096": dict(call="fit_nystrom", size={"r": 4096, "solver": "pcg"}, time=1, memory=0),
    "nystrom": dict(call="fit_nystrom", size={"r": 1024}, time=1, memory=0),
    "rff": dict(call="fit_rff", size={"r": 1024}, time=1, memory=0),
    "hck": dict(call="fit_hierarchical", size={"r": 128}, time=1, memory=1),
}


def data_path(d):
    return DATA / f"growth_d{d}"


def make_data(d):
    """X (N_MAX[d] + TEST_ROWS, d) and y, written once in chunks as .npy files to memory-map."""
    n_max = N_MAX[d]
    folder = data_path(d)
    if (folder / "done").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rows = n_max + TEST_ROWS
    rng = np.random.default_rng(54)
    a = rng.uniform(0.5, 1.5, d)
    X = np.lib.format.open_memmap(folder / "X.npy", mode="w+", dtype=np.float64,
                                  shape=(rows, d))
    y = np.lib.format.open_memmap(folder / "y.npy", mode="w+", dtype=np.float64, shape=(rows,))
    for lo in range(0, rows, CHUNK):
        hi = min(lo + CHUNK, rows)
        block = rng.standard_normal((hi - lo, d))
        X[lo:hi] = block
        y[lo:hi] = np.sin(block * a).sum(axis=1) / math.sqrt(d / 2) \
            + 0.1 * rng.standard_normal(hi - lo)
    X.flush()
    y.flush()
    del X, y
    (folder / "done").write_text("")
    return folder


class AnonymousPeak:
    """The peak of the process's anonymous resident memory (RssAnon: not the page cache of a
    memory-mapped X) above its value at the start, and of its whole resident set (VmRSS,
    which counts X's mapped pages), sampled every 5 ms in a thread: ``bytes``, ``rss_bytes``."""

    def __enter__(self):
        import threading
        self.start, self.rss_start = _status("RssAnon:"), _status("VmRSS:")
        self.peak, self.rss_peak = self.start, self.rss_start
        self._stop = threading.Event()

        def sample():
            while not self._stop.wait(0.005):
                self._sample()
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        self.peak = max(self.peak, _status("RssAnon:"))
        self.rss_peak = max(self.rss_peak, _status("VmRSS:"))

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()
        self.bytes = self.peak - self.start
        self.rss_bytes = self.rss_peak - self.rss_start


def _status(field):
    """A field of /proc/self/status in bytes (0 where the system has no such field)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def one(method, n, d, call, mmap):
    """One fit in this process; prints its record as JSON."""
    import hkern
    from hkern._memory import peak_memory

    n_max = N_MAX[d]
    folder = data_path(d)
    X_all = np.load(folder / "X.npy", mmap_mode="r")
    y_all = np.load(folder / "y.npy", mmap_mode="r")
    X = X_all[:n] if mmap else np.array(X_all[:n])
    y = np.array(y_all[:n])
    Xt, yt = np.array(X_all[n_max:]), np.array(y_all[n_max:])
    spec = METHODS[method]
    fit = getattr(hkern, spec["call"])
    kwargs = dict(spec["size"], seed=0)
    if call == "fixed":
        kwargs.update(sigma=math.sqrt(d), lam=1e-3)
    else:
        kwargs = {k: v for k, v in kwargs.items() if k in ("solver", "seed")}
    record = dict(method=method, call=call, n=n, d=d, memmap=mmap, arguments=repr(kwargs),
                  theory_time=spec["time"], theory_memory=spec["memory"])
    t0 = time.perf_counter()
    try:
        with peak_memory() as peak, AnonymousPeak() as anonymous:
            model = fit(X, y, **kwargs)
        record["seconds"] = time.perf_counter() - t0
        record["peak_bytes"] = peak.bytes
        record["peak_anonymous_bytes"] = anonymous.bytes
        record["test_rmse"] = float(np.sqrt(np.mean((model.predict(Xt) - yt) ** 2)))
        record["status"] = "ok"
    except (ValueError, MemoryError) as error:
        record["seconds"] = time.perf_counter() - t0
        record["status"] = f"refused: {str(error)[:300]}"
    record["hkern"] = hkern.__version__
    print(json.dumps(record), flush=True)


def load_records():
    return json.loads(RECORD.read_text())["records"] if RECORD.exists() else []


def save(records, command):
    RECORD.write_text(json.dumps(dict(command=command, records=records), indent=1) + "\n")


def key(r):
    return (r["method"], r["call"], r["n"], r["d"], r.get("memmap", False))


def run(args):
    make_data(args.d)
    records = load_records()
    command = "python experiments/growth.py run " + " ".join(sys.argv[2:])
    for call in args.call:
        for method in args.methods:
            previous = None
            for n in sorted(args.n):
                timeout, expected = 8 * args.budget, None
                if previous is not None:
                    if previous["status"] != "ok":
                        break
                    expected = previous["seconds"] * (n / previous["n"]) ** \
                        METHODS[method]["time"]
                    if previous["seconds"] > args.budget or expected > 4 * args.budget:
                        # Run it only as far as the memory check: a refusal comes at once.
                        timeout = PROBE_SECONDS
                child = [sys.executable, __file__, "one", method, str(n), str(args.d), call] \
                    + (["--mmap"] if args.mmap else [])
                try:
                    out = subprocess.run(child, capture_output=True, text=True,
                                         timeout=timeout)
                except subprocess.TimeoutExpired:
                    if timeout == PROBE_SECONDS:
                        status = (f"not run: about {expected:.0f} s by the time exponent "
                                  f"{METHODS[method]['time']} from n = {previous['n']}")
                    else:
                        status = f"stopped: still running after {timeout:.0f} s"
                    record = dict(method=method, call=call, n=n, d=args.d, memmap=args.mmap,
                                  status=status, seconds=None, expected_seconds=expected,
                                  theory_time=METHODS[method]["time"],
                                  theory_memory=METHODS[method]["memory"], command=command)
                    print(record["status"], flush=True)
                    records = [r for r in records if key(r) != key(record)] + [record]
                    save(records, command)
                    break
                lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
                if not lines:
                    record = dict(method=method, call=call, n=n, d=args.d, memmap=args.mmap,
                                  status=f"failed: {out.stderr.strip()[-300:]}", seconds=None,
                                  theory_time=METHODS[method]["time"],
                                  theory_memory=METHODS[method]["memory"])
                else:
                    record = json.loads(lines[-1])
                record["command"] = command
                print({k: record.get(k) for k in ("method", "call", "n", "d", "seconds",
                                                   "peak_bytes", "test_rmse", "status")},
                      flush=True)
                records = [r for r in records if key(r) != key(record)] + [record]
                save(records, command)
                previous = record


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="part", required=True)
    r = sub.add_parser("run")
    r.add_argument("--d", type=int, default=8, choices=sorted(N_MAX))
    r.add_argument("--n", type=int, nargs="+", default=[10**3, 10**4, 10**5, 10**6])
    r.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    r.add_argument("--call", nargs="+", default=["fixed"], choices=["fixed", "default"])
    r.add_argument("--budget", type=float, default=1200.0)
    r.add_argument("--mmap", action="store_true", help="fit the memory-mapped X itself")
    o = sub.add_parser("one")
    o.add_argument("method")
    o.add_argument("n", type=int)
    o.add_argument("d", type=int)
    o.add_argument("call")
    o.add_argument("--mmap", action="store_true")
    sub.add_parser("page")
    args = parser.parse_args()
    if args.part == "run":
        run(args)
    elif args.part == "one":
        one(args.method, args.n, args.d, args.call, args.mmap)
    else:
        page()


def curves(records, d, call, field):
    """{method: (n, values)} of the runs that finished, in memory (not memory-mapped)."""
    out = {}
    for method in METHODS:
        pts = sorted((r["n"], r[field]) for r in records if r["method"] == method and
                     r["call"] == call and r["d"] == d and r["status"] == "ok" and
                     not r.get("memmap") and r.get(field))
        if pts:
            out[method] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


def page():
    """The plots of doc/results/growth.md (its numbers are rendered by experiments/pages.py)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import FIGURES, pyplot

    from hkern.plotting import plot_scaling
    plt = pyplot()
    if plt is None:
        return
    records = load_records()
    for d in sorted({r["d"] for r in records}):
        for call in sorted({r["call"] for r in records if r["d"] == d}):
            fig, axes = plt.subplots(1, 2, figsize=(11, 4))
            plot_scaling(curves(records, d, call, "seconds"), axes[0], ylabel="fit seconds",
                         title=f"time, d = {d}, {call} call")
            gib = {m: (n, [v / 2**30 for v in values]) for m, (n, values)
                   in curves(records, d, call, "peak_bytes").items()}
            plot_scaling(gib, axes[1], ylabel="peak GiB above X",
                         title=f"memory, d = {d}, {call} call")
            fig.tight_layout()
            path = FIGURES / f"growth_d{d}_{call}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            print("wrote", path.relative_to(ROOT))


if __name__ == "__main__":
    main()

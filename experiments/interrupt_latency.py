"""Ctrl-C on kin40k, measured from a parent process (issue 31, item 2 acceptance).

For each long call the parent starts a child interpreter, sends it SIGINT ``--after`` seconds
into the call, and reports the seconds from the signal to the child's KeyboardInterrupt (the
child's clock, the same machine's).  After the exception the child runs
a second, smaller fit; the parent compares its predictions, bit for bit, with the same fit in a
fresh interpreter that was never interrupted.

    python experiments/interrupt_latency.py [--after 6] [--n-jobs 2] [--calls name,...]

Calls (all on kin40k split 0, standardised): fit_exact_pcg (all 36 000 rows),
fit_hierarchical (r=2048), fit_nystrom_pcg (r=8192, FALKON), kernel_matrix (30 000^2).
"""
from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import textwrap
import time

PRELUDE = """
import hashlib, time
import numpy as np
import hkern
from hkern.datasets import load_uci, standardize
X, y, Xte, _, _ = standardize(*load_uci("kin40k", split=0))
J = {n_jobs}
"""

CALLS = {
    "fit_exact_pcg": "hkern.fit_exact(X, y, solver='pcg', sigma=1.41, lam=1e-2, seed=0, "
                     "n_jobs=J)",
    "fit_hierarchical": "hkern.fit_hierarchical(X, y, r=2048, sigma=1.41, lam=1e-2, seed=0, "
                        "n_jobs=J)",
    "fit_nystrom_pcg": "hkern.fit_nystrom(X, y, 8192, solver='pcg', sigma=1.41, lam=1e-2, "
                       "seed=0, n_jobs=J)",
    "kernel_matrix": "hkern.kernel_matrix(X[:30000], sigma=1.41, n_jobs=J)",
}

# The second fit, in the interrupted child and in a fresh one.
SECOND = ("hkern.fit_hierarchical(X[:4000], y[:4000], r=256, sigma=1.41, lam=1e-2, seed=0, "
          "n_jobs=J)"
          ".predict(Xte[:500])")


def child_code(call, n_jobs):
    return PRELUDE.format(n_jobs=n_jobs) + textwrap.dedent(f"""
        print("start", flush=True)
        try:
            {call}
            print("finished", repr(time.time()), flush=True)
        except KeyboardInterrupt:
            print("caught", repr(time.time()), flush=True)
        second = np.ascontiguousarray({SECOND})
        print("second", hashlib.sha256(second.tobytes()).hexdigest(), flush=True)
        """)


def fresh_second(n_jobs):
    code = PRELUDE.format(n_jobs=n_jobs) + textwrap.dedent(f"""
        second = np.ascontiguousarray({SECOND})
        print(hashlib.sha256(second.tobytes()).hexdigest())
        """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def measure(name, after, n_jobs):
    child = subprocess.Popen([sys.executable, "-c", child_code(CALLS[name], n_jobs)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "start"
    time.sleep(after)
    sent = time.time()
    child.send_signal(signal.SIGINT)
    lines = {}
    for line in child.stdout:
        key, _, value = line.strip().partition(" ")
        lines[key] = value
    child.wait()
    return sent, lines, child.stderr.read()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after", type=float, default=6.0)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--calls", default=",".join(CALLS))
    args = parser.parse_args()
    reference = fresh_second(args.n_jobs)
    for name in args.calls.split(","):
        sent, lines, err = measure(name, args.after, args.n_jobs)
        if "caught" not in lines:
            print(f"{name:18s} not interrupted: {lines} {err[-500:]}")
            continue
        latency = float(lines["caught"]) - sent
        same = lines.get("second") == reference
        print(f"{name:18s} KeyboardInterrupt {latency:.3f} s after SIGINT; second fit "
              f"{'identical to' if same else 'DIFFERENT from'} a fresh process", flush=True)


if __name__ == "__main__":
    main()

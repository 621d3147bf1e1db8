"""Exact KRR by PCG on MPI shards against one rank (issue 54; doc/results/mpi.md).

    OMP_NUM_THREADS=1 mpiexec -n 2 python experiments/exact_sharded.py fit --write
    OMP_NUM_THREADS=1 mpiexec -n 1 python experiments/exact_sharded.py fit --write
    python experiments/exact_sharded.py run --rounds 2 --ranks 1 2 --write   # both, alternating

``fit``: every rank reads kin40k's training rows of split 0 (the first n) and keeps its
contiguous share, fits ``fit_exact(solver="pcg", comm=COMM_WORLD, n_jobs=1)`` at fixed
hyperparameters, and rank 0 prints one JSON record: the fit's wall seconds (between
barriers), the solver's record (iterations, preconditioner rank and seconds, precision), the
test RMSE on the 4 000 test rows, the peak resident memory of each rank, and a digest of the
coefficients (equal digests: bitwise equal fits).  ``run``: the ``fit`` commands for each
rank count, one after the other, ``--rounds`` times (so that the machine's drift falls on both
alike), and the record of all of them appended to ``--out``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

OUT = "results/mpi_exact_pcg.json"


def fit(args):
    from mpi4py import MPI

    import hkern
    from hkern._mpi import block_layout
    from hkern.datasets import load_uci, standardize
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    Xtr, ytr, Xte, yte, _ = standardize(*load_uci("kin40k", split=0))
    Xtr, ytr = Xtr[:args.n], ytr[:args.n]
    off = block_layout(Xtr.shape[0], size)
    X, y = Xtr[off[rank]:off[rank + 1]].copy(), ytr[off[rank]:off[rank + 1]].copy()
    del Xtr, ytr
    comm.Barrier()
    start = time.perf_counter()
    model = hkern.fit_exact(X, y, sigma=args.sigma, lam=args.lam, solver="pcg", seed=0,
                            n_jobs=1, precision=args.precision, comm=comm)
    comm.Barrier()
    seconds = time.perf_counter() - start
    peak = comm.gather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    if rank == 0:
        trace = model.solver_trace_
        rmse = float(np.sqrt(np.mean((model.predict(Xte) - yte) ** 2)))
        record = dict(
            ranks=size, threads_per_rank=1, n=int(off[-1]), d=int(X.shape[1]),
            sigma=args.sigma, lam=args.lam, precision=args.precision,
            ran=trace.precision, seconds=round(seconds, 2),
            iterations=int(model.n_iter_), preconditioner_rank=int(trace.rank),
            preconditioner_seconds=round(float(trace.preconditioner_seconds), 2),
            test_rmse=round(rmse, 5), peak_rss_bytes=[int(p) for p in peak],
            coef_digest=hashlib.blake2b(np.ascontiguousarray(model.dual_coef_).tobytes(),
                                        digest_size=8).hexdigest())
        print(json.dumps(record), flush=True)


def run(args):
    records = []
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    for round_ in range(args.rounds):
        for ranks in args.ranks:
            cmd = ["mpiexec", "-n", str(ranks), sys.executable, __file__, "fit", "--n",
                   str(args.n), "--sigma", str(args.sigma), "--lam", str(args.lam),
                   "--precision", args.precision]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            record = json.loads(out.stdout.strip().splitlines()[-1])
            record["round"] = round_
            print(json.dumps(record), flush=True)
            records.append(record)
    if args.write:
        entry = dict(command="python experiments/exact_sharded.py run " + " ".join(sys.argv[2:]),
                     date=time.strftime("%Y-%m-%d"), runs=records)
        with open(args.out, "a") as f:
            f.write(json.dumps(entry) + "\n")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("part", choices=["fit", "run"])
    p.add_argument("--n", type=int, default=36_000)
    p.add_argument("--sigma", type=float, default=2.0)
    p.add_argument("--lam", type=float, default=1e-3)
    p.add_argument("--precision", default="double")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--write", action="store_true")
    p.add_argument("--out", default=OUT)
    args = p.parse_args(argv)
    (fit if args.part == "fit" else run)(args)


if __name__ == "__main__":
    main()

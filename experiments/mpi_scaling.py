"""Memory and time of the sharded fits against the serial fit (issues 20 and 54; doc/mpi.md).

    python experiments/mpi_scaling.py --method hck --n 2000000 --r 128            # serial
    OMP_NUM_THREADS=1 mpiexec -n 4 python experiments/mpi_scaling.py --method hck \\
        --n 2000000 --r 128 --comm --n-jobs 1                                      # 4 ranks

Each rank generates only its own rows (blocks of rows seeded by their block number, so any
layout of ranks gets the same data set) -- standing in for one reader per rank -- then fits
and predicts 20 000 test points (each rank its share).  Printed per rank, as one JSON record
(appended to ``--out`` with ``--write``): the fit's and the prediction's wall seconds (between
barriers), the peak resident memory of the process (ru_maxrss) and the resident memory before
the fit.  The serial run (no ``--comm``) is one process with the whole data set.

Strong and weak scaling (issue 54; ``results/mpi_growth.json``, doc/results/mpi.md): every fit
on 1, 2 and 4 ranks of one thread each, n fixed (``--study strong``) or n per rank fixed
(``--study weak``), e.g.

    for p in 1 2 4; do OMP_NUM_THREADS=1 mpiexec -n $p python experiments/mpi_scaling.py \
        --method falkon --r 1024 --n 500000 --comm --n-jobs 1 --study strong \
        --out results/mpi_growth.json --write; done

Synthetic data: x uniform in [-1, 1]^d, y = sum_j sin(3 x_j) / sqrt(d) + 0.1 noise.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

BLOCK = 1 << 16


def rows(lo, hi, d, seed):
    """Rows lo .. hi - 1 of the synthetic data set, generated block by block."""
    X, y = np.empty((hi - lo, d)), np.empty(hi - lo)
    b = lo // BLOCK
    while b * BLOCK < hi:
        rng = np.random.default_rng([seed, b])
        Xb = rng.uniform(-1, 1, size=(BLOCK, d))
        yb = np.sin(3 * Xb).sum(axis=1) / np.sqrt(d) + 0.1 * rng.standard_normal(BLOCK)
        a, e = max(lo, b * BLOCK), min(hi, (b + 1) * BLOCK)
        X[a - lo:e - lo], y[a - lo:e - lo] = Xb[a - b * BLOCK:e - b * BLOCK], \
            yb[a - b * BLOCK:e - b * BLOCK]
        b += 1
    return X, y


def current_rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--method", choices=["hck", "falkon", "exact"], default="hck")
    p.add_argument("--n", type=int, default=2_000_000)
    p.add_argument("--d", type=int, default=8)
    p.add_argument("--r", type=int, default=128,
                   help="HCK's r, or FALKON's centres (exact PCG: its default preconditioner)")
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--lam", type=float, default=1e-2)
    p.add_argument("--n-test", type=int, default=20_000)
    p.add_argument("--n-jobs", type=int, default=None)
    p.add_argument("--comm", action="store_true", help="fit on shards over MPI.COMM_WORLD")
    p.add_argument("--study", choices=["strong", "weak"], default=None,
                   help="tag the records: n fixed over the rank counts, or n per rank fixed")
    p.add_argument("--write", action="store_true")
    p.add_argument("--out", default="results/mpi_scaling.json")
    args = p.parse_args(argv)

    import hkern
    from hkern._mpi import block_layout
    comm, rank, size = None, 0, 1
    if args.comm:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        rank, size = comm.Get_rank(), comm.Get_size()
    off = block_layout(args.n, size)
    X, y = rows(int(off[rank]), int(off[rank + 1]), args.d, seed=0)
    toff = block_layout(args.n_test, size)
    Xt, yt = rows(args.n + int(toff[rank]), args.n + int(toff[rank + 1]), args.d, seed=0)
    barrier = comm.Barrier if comm is not None else (lambda: None)
    rss_before = current_rss()
    barrier()
    start = time.perf_counter()
    if args.method == "hck":
        model = hkern.fit_hierarchical(X, y, r=args.r, sigma=args.sigma, lam=args.lam, seed=0,
                                       n_jobs=args.n_jobs, comm=comm)
    elif args.method == "exact":
        model = hkern.fit_exact(X, y, sigma=args.sigma, lam=args.lam, seed=0, solver="pcg",
                                n_jobs=args.n_jobs, comm=comm)
    else:
        model = hkern.fit_nystrom(X, y, args.r, sigma=args.sigma, lam=args.lam, seed=0,
                                  solver="pcg", tol=1e-4, n_jobs=args.n_jobs, comm=comm)
    barrier()
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    pred = model.predict(Xt)
    barrier()
    predict_seconds = time.perf_counter() - start
    sq = float(np.sum((pred - yt) ** 2))
    if comm is not None:
        sq = comm.allreduce(sq)
    record = dict(method=args.method, study=args.study, n=args.n, d=args.d, r=args.r,
                  sigma=args.sigma, lam=args.lam, ranks=size, rank=rank, n_jobs=args.n_jobs,
                  threads=os.environ.get("OMP_NUM_THREADS"), sharded=args.comm,
                  fit_seconds=round(fit_seconds, 3), predict_seconds=round(predict_seconds, 3),
                  test_rmse=round(float(np.sqrt(sq / args.n_test)), 5),
                  peak_rss_gib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                     * 1024 / 2**30, 3),
                  rss_before_fit_gib=round(rss_before / 2**30, 3),
                  code=os.popen("git rev-parse --short HEAD 2>/dev/null").read().strip())
    records = comm.gather(record, root=0) if comm is not None else [record]
    if rank == 0:
        for rec in records:
            print(json.dumps(rec), flush=True)
        if args.write:
            old = json.load(open(args.out)) if os.path.exists(args.out) else []
            json.dump(old + records, open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The command line of oASIS-P (:mod:`hkern.oasis.sharded`): select Nystrom columns of a data
file's kernel matrix on MPI ranks, each rank reading only its block of rows.

    mpiexec -n 4 python -m hkern.oasis data.npy --r 1000 --sigma 1.0 --seed 0
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .._mpi import RankState, block_layout, every_rank_stops, get_mpi
from .._validation import read_csv
from .sharded import LABEL, oasis_mpi


def _read_block(path, rank, size):
    """(this rank's block of rows of the data file, the file's number of rows).

    A .npy file is memory-mapped and only the block is copied out, so no rank holds all the
    data.  A CSV file has no index of its rows: each rank parses the whole file and keeps its
    block (the whole data passes through every rank's memory for a moment).
    """
    if path.endswith(".npy"):
        data = np.load(path, mmap_mode="r")
    else:
        data = read_csv(path)
    if data.ndim != 2:
        raise ValueError(f"X must be 2-D with shape (n_samples, n_features); {path} holds an "
                         f"array of shape {data.shape}")
    offsets = block_layout(data.shape[0], size)
    return np.array(data[offsets[rank]: offsets[rank + 1]], order="C"), data.shape[0]


def _load_shards(comm, path):
    """Every rank's block of the data file; a file missing or unreadable on one node stops
    every rank with that rank's error (rather than leaving the others in oasis_mpi's first
    collective)."""
    with every_rank_stops(comm, LABEL):
        state = RankState(comm, LABEL)
        block = state.run(_read_block, path, state.rank, state.size)
        state.agree()
    return block


def main(argv=None):
    """``python -m hkern.oasis DATA.npy --r L ...`` under mpiexec.

    Each rank reads only its contiguous block of rows (:func:`block_layout`) of the .npy file,
    through a memory map; a CSV file is parsed whole on every rank, which keeps its block.
    Exit status 0 on success, 2 for bad arguments or data (the message on stderr, from rank
    0, every rank exiting), 1 when the ranks were aborted.
    """
    p = argparse.ArgumentParser(prog="mpiexec -n P python -m hkern.oasis",
                                description="oASIS-P: select Nystrom columns of the kernel "
                                            "matrix of a data file on MPI ranks.")
    p.add_argument("data", help="a .npy file (n x d) or a CSV file (one point per row)")
    p.add_argument("--r", type=int, required=True, help="number of columns to select")
    p.add_argument("--kernel", default="gaussian")
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--tol", type=float, default=0.0)
    p.add_argument("--init", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-jobs", type=int, default=None,
                   help="OpenMP threads per rank (default: honour OMP_NUM_THREADS and the CPUs "
                        "available; 1 is typical when the ranks share a machine)")
    p.add_argument("--out", default=None, help="write indices, W_inv, scores to this .npz")
    args = p.parse_args(argv)       # the same arguments on every rank: each exits alike
    comm = get_mpi().COMM_WORLD
    try:
        X_local, n = _load_shards(comm, args.data)
        result = oasis_mpi(X_local, args.r, kernel=args.kernel, sigma=args.sigma,
                           tol=args.tol, init=args.init, seed=args.seed, n_jobs=args.n_jobs,
                           gather=False, comm=comm)
    except (ValueError, OSError) as exc:
        if comm.Get_rank() == 0:
            p.exit(2, f"{p.prog}: error: {exc}\n")
        return 2
    if result.comm_rank_ == 0:
        print(f"oASIS-P on {result.comm_size_} ranks: {len(result.indices_)} columns of n = {n}; "
              f"first indices {result.indices_[:10].tolist()}")
        if args.out:
            np.savez(args.out, indices=result.indices_, W_inv=result.W_inv_, scores=result.scores_)
    return 0


if __name__ == "__main__":
    sys.exit(main())

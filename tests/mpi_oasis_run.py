"""Run by tests/test_oasis_mpi.py under mpiexec: oASIS-P on synthetic data sharded over the ranks.

    mpiexec -n P python mpi_oasis_run.py N L SEED LAYOUT:INIT[:nogather] [...]

Every rank generates the same data and passes oasis_mpi only its shard (:func:`shard`, by the
named layout).  For each configuration the selection is saved in the working directory: with
gather by rank 0 as ``LAYOUT-INIT.npz`` (C and F of all rows), with ``nogather`` by every rank
as ``LAYOUT-INIT-nogather-RANK.npz`` (its own rows and ``row_offset``).  Rank 0 prints one JSON
line listing the files.  Imported by mpi_oasis_faults.py for :func:`shard`.
"""
import json
import sys

import numpy as np

from hkern._mpi import block_layout, offsets_of

LAYOUTS = ("block", "uneven", "first", "last", "empty1")


def shard_counts(layout, n, size):
    """Rows per rank: ``block`` (block_layout), ``uneven`` (rank p about (p + 1)^2 parts),
    ``first`` / ``last`` (every row on rank 0 / on the last rank), ``empty1`` (rank 1 none,
    the others in blocks)."""
    if layout == "block":
        return np.diff(block_layout(n, size))
    counts = np.zeros(size, dtype=np.int64)
    if layout == "uneven":
        weights = np.arange(1, size + 1) ** 2
        counts[:] = n * weights // weights.sum()
        counts[-1] += n - counts.sum()
    elif layout in ("first", "last"):
        counts[0 if layout == "first" else -1] = n
    elif layout == "empty1":
        if size < 2:
            raise ValueError("layout empty1 needs 2 ranks or more")
        counts[np.arange(size) != 1] = np.diff(block_layout(n, size - 1))
    else:
        raise ValueError(f"unknown layout {layout!r}")
    return counts


def shard(X, layout, comm=None):
    """This rank's rows of X under ``layout`` (a copy: nothing else of X reaches oasis_mpi)."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD if comm is None else comm
    offsets = offsets_of(shard_counts(layout, len(X), comm.Get_size()))
    rank = comm.Get_rank()
    return np.array(X[offsets[rank]: offsets[rank + 1]])


def main(argv):
    from mpi4py import MPI

    from hkern.datasets import make_regression
    from hkern.oasis.sharded import oasis_mpi

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    n, ell, seed = (int(a) for a in argv[:3])
    X, _ = make_regression(n, d=3, seed=11)
    files = []
    for config in argv[3:]:
        layout, init, *rest = config.split(":")
        gather = rest != ["nogather"]
        result = oasis_mpi(shard(X, layout), ell, sigma=0.5, init=int(init), seed=seed,
                           gather=gather)
        arrays = dict(indices=result.indices_, scores=result.scores_, W_inv=result.W_inv_,
                      C=result.C_, F=result.F_, row_offset=result.row_offset_,
                      size=result.comm_size_)
        if gather and rank == 0:
            name = f"{layout}-{init}.npz"
        elif not gather:
            name = f"{layout}-{init}-nogather-{rank}.npz"
        else:
            continue
        np.savez(name, **arrays)
        files.append(name)
    everyone = comm.gather(files, root=0)
    if rank == 0:
        print(json.dumps({"size": comm.Get_size(), "files": sum(everyone, [])}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""fit_hierarchical(..., comm=comm): HCK on data sharded over MPI ranks.

The tree and its landmarks are built collectively (:mod:`hkern.hierarchical.sharded_tree`):
the top L = ceil(log2 P) levels split over all ranks, the subtrees below whole on their
ranks.  Each rank then holds an :class:`~hkern.hierarchical._hck.HCKOperator` of its part: the
top nodes (replicated: a few r x r blocks each) and its subtrees (its rows, O(n r / P)).  Every
pass of the serial core runs on a part level by level with the same arithmetic per node; where
a pass crosses level L the ranks exchange the r x r Theta blocks (factorisation) or the r x k
vectors (solve, matvec, prediction vectors) of the level-L nodes, and compute the top levels
alike.  So the factors, the weights A^{-1} y and the predictions are those of the serial fit of
the concatenated shards bit for bit; log det A too (the per-node terms gathered into heap order
and summed as serially).  The quadratic form y^T A^{-1} y of the likelihood is a sum over ranks
(about 1e-16 relative from the serial sum).

Test points are per rank: each goes to the rank that owns its leaf's subtree, is predicted
there with the serial batches (and, with ``return_std``, its posterior variance from the
factors of hkern/hierarchical/_posterior.pyx, built on the parts with one more exchange of the
level-L theta blocks), and comes back.  Training-order vectors (``solve``,
``matvec``, ``dual_coef_``) are per rank too: each rank passes and gets the rows of its shard.
"""
from __future__ import annotations

import functools

import numpy as np

from .._gp import Evidence
from .._memory import check_memory
from .._model import KernelRidgeModel, format_sigma, renamed
from .._mpi import Agreed, RankState, every_rank_stops, get_mpi, offsets_of
from .._parameters import check_parameter
from .._sharded import exact_over_ranks, gather_rows, prepare_sharded_fit
from .._threads import blas_threads, budget_threads, budgeted, in_budget
from .._validation import check_array, check_bool, check_rhs
from . import _posterior, _tree
from ._hck import HCKOperator
from .factor import refined_solve
from .plan import check_tree_args, default_jitter, hck_fit_bytes, tree_depth
from .sharded_tree import build_sharded_tree, rank_levels, subtree_owner

__all__ = ["ShardedHierarchicalKRR", "fit_hierarchical_sharded"]


# ------------------------------------------------------------------ moving rows between orders


class _Reorder:
    """Moves row blocks between the shards' order (each rank its rows) and the tree order (each
    rank the tree positions it holds): two alltoallv's, both directions bit for bit."""

    def __init__(self, comm, offsets, perm):
        size = comm.Get_size()
        self.comm = comm
        source = np.searchsorted(offsets, perm, side="right") - 1      # owner of each position
        self.order = np.argsort(source, kind="stable")                  # positions by source
        self.tree_counts = np.bincount(source, minlength=size).astype(np.int64)
        local = (perm - offsets[source])[self.order].astype(np.int64)
        counts = np.array(comm.alltoall(self.tree_counts.tolist()), dtype=np.int64)
        self.shard_counts = counts                  # rows this rank's shard sends to each rank
        self.shard_index = np.empty(int(counts.sum()), dtype=np.int64)
        comm.Alltoallv([local, self.tree_counts], [self.shard_index, counts])

    def to_tree(self, B):
        """Rows of the shard (n_local, k) -> the rows of the tree positions held (rows, k)."""
        return self._move(B, self.shard_index, self.shard_counts, self.tree_counts, self.order)

    def from_tree(self, T):
        """Rows of the tree positions held (rows, k) -> the rows of the shard (n_local, k)."""
        return self._move(T, self.order, self.tree_counts, self.shard_counts, self.shard_index)

    def _move(self, A, send_rows, send_counts, recv_counts, recv_rows):
        """A's rows ``send_rows`` sent (``send_counts`` rows to each rank), the rows received
        (``recv_counts`` from each) put at ``recv_rows``."""
        k = A.shape[1]
        received = np.empty((int(recv_counts.sum()), k))
        self.comm.Alltoallv([np.ascontiguousarray(A[send_rows]), send_counts * k],
                            [received, recv_counts * k])
        out = np.empty_like(received)
        out[recv_rows] = received
        return out


def _share_level(state, owned_nodes, slot):
    """Every rank's blocks of the nodes it holds among the level-L nodes, written into
    ``slot(node)`` on every rank (one allgather)."""
    mine = {int(i): np.array(slot(i)) for i in owned_nodes}
    for blocks in state.comm.allgather(mine):
        for i, block in blocks.items():
            if int(i) not in mine:
                slot(i)[...] = block


# ------------------------------------------------------------------ the model


def _collective(method):
    """A model method every rank calls together: it gets a fresh RankState, and an error on any
    rank ends the call on every rank (hkern._mpi.every_rank_stops)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        label = f"{type(self).__name__}.{method.__name__}"
        with every_rank_stops(self._comm, label):
            return method(self, RankState(self._comm, label), *args, **kwargs)
    return wrapper


class ShardedHierarchicalKRR(KernelRidgeModel):
    """HCK kernel ridge regression fitted on data sharded over MPI ranks (one per rank).

    Every method is a collective: call it on every rank.  ``predict`` and
    ``decision_function`` take each rank's own test points; ``solve``, ``matvec`` and
    ``dual_coef_`` are in the rows of each rank's training shard.

    Attributes
    ----------
    r_, jitter_, depth_
        As for :class:`hkern.HierarchicalKRR`.
    levels_ : int
        Tree levels split over the ranks (ceil(log2 P)); below them each rank owns whole
        subtrees.
    n_ : int
        Training points on all ranks.
    perm_ : ndarray
        The global training row at each tree position this rank holds.

    Examples
    --------
    Saved as ``hck.py`` and run with ``mpiexec -n 2 python hck.py``:

    >>> import numpy as np, hkern                                      # doctest: +SKIP
    >>> from mpi4py import MPI                                         # doctest: +SKIP
    >>> comm = MPI.COMM_WORLD                                          # doctest: +SKIP
    >>> rng = np.random.default_rng(comm.rank)                         # doctest: +SKIP
    >>> X, y = rng.normal(size=(1000, 3)), rng.normal(size=1000)       # doctest: +SKIP
    >>> model = hkern.fit_hierarchical(X, y, r=32, seed=0, comm=comm)  # doctest: +SKIP
    >>> model.predict(X[:5]).shape                                     # doctest: +SKIP
    (5,)
    """

    def __init__(self, *, comm, operator, tree, reorder, weights, pred_vectors, pred_offsets,
                 logdet, r, jitter, evidence, **kw):
        super().__init__(evidence=evidence, **kw)
        self._comm = comm
        self._op = operator
        self._tree = tree
        self._reorder = reorder
        self._weights_tree = weights
        self._pred_vectors = pred_vectors
        self._pred_offsets = pred_offsets
        self._logdet = logdet
        self.r_ = r
        self.jitter_ = jitter
        self.depth_ = tree.depth
        self.levels_ = tree.levels
        self.n_ = int(tree.count[0])
        self.perm_ = tree.perm
        self._posterior = None          # the posterior variance's factors, made when asked

    r = renamed("r_")
    jitter = renamed("jitter_")

    # -- predictions: each test point to the rank of its subtree and back

    def predict(self, X, *, return_std=False, include_noise=False):
        """Predictions at this rank's test points X, and with ``return_std`` the GP posterior
        standard deviation (regression; ``include_noise``: of a new target, sqrt(var + lam)),
        as :meth:`hkern.HierarchicalKRR.predict`; a collective."""
        return self._predict(X, return_std, include_noise)

    @_collective
    @budgeted
    def _predict(self, state, X, return_std, include_noise):
        def check():
            flags = check_bool(return_std, "return_std"), check_bool(include_noise,
                                                                     "include_noise")
            if flags[0] and self.encoding_.task != "regression":
                raise ValueError("predict(X, return_std=True) is defined for regression, but "
                                 "this model was fitted with task='classification'; use "
                                 "decision_function for the one-vs-rest scores")
            return self._checked_X(X), flags
        out = state.run(check)
        flags = state.agree(None if out is None else out[1])
        if len(set(flags)) > 1:
            raise Agreed(ValueError("predict must be called with the same return_std and "
                                    "include_noise on every rank"))
        X, (with_std, noise) = out
        if not with_std:
            return self.encoding_.decode(self._scores(X))
        LC, phi, t_off = self._posterior_factors(state)
        k = self._weights_tree.shape[1]

        def mean_and_variance(points, leaf_start, n_threads):
            scores = self._op.predict(points, leaf_start, self._weights_tree,
                                      self._pred_vectors, self._pred_offsets, n_threads)
            var = _posterior.posterior_variance(self._op, points, leaf_start, LC, phi, t_off,
                                                n_threads)
            return np.column_stack([scores, var])
        both = self._routed(X, mean_and_variance, k + 1)
        var = both[:, k] + (self.lam if noise else 0.0)
        # In the units of y: times each output's signal variance (hkern._gp).
        std = np.sqrt(np.maximum(var, 0.0)[:, None] * self._evidence.signal_variance())
        return self.encoding_.decode(both[:, :k]), std[:, 0] if self.encoding_.squeeze else std

    def _posterior_factors(self, state):
        """The posterior variance's factors of this part (a collective, the first time)."""
        if self._posterior is None:
            top = (1 << self._tree.levels) - 1
            owned = [top + s for s in self._tree.subtrees]

            def exchange(theta, t_off, error):
                if error is not None and state.failure is None:
                    state.failure = error
                state.agree()
                _share_level(state, owned, lambda i: theta[t_off[i]:t_off[i + 1]])
            with blas_threads(1):
                self._posterior = _posterior.posterior_factors(self._op, budget_threads(),
                                                               exchange)
        return self._posterior

    def _checked_X(self, X):
        Xc = check_array(X, "X", min_samples=0)
        if Xc.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {Xc.shape[1]} features, but the model was fitted with "
                             f"{self.n_features_in_} features")
        return np.ascontiguousarray(Xc if self._lengthscales is None else Xc / self._lengthscales)

    @_collective
    @budgeted
    def _checked_scores(self, state, X):
        X = state.run(self._checked_X, X)
        state.agree()
        return self._scores(X)

    def _scores(self, X):
        k = self._weights_tree.shape[1]
        return self._routed(X, lambda points, leaf_start, n_threads: self._op.predict(
            points, leaf_start, self._weights_tree, self._pred_vectors, self._pred_offsets,
            n_threads), k)

    def _routed(self, X, evaluate, k):
        """``evaluate(points, leaf_start, n_threads)`` ((m, k) rows) at this rank's test points:
        each sent to the rank of its subtree, evaluated there with the serial per-leaf batches,
        and sent back."""
        comm, size = self._comm, self._comm.Get_size()
        tree = self._tree
        d = X.shape[1]
        n_threads = budget_threads()
        Xc = np.ascontiguousarray(X - tree.centre)
        top = (1 << tree.levels) - 1
        sub = _tree.route(Xc, np.ascontiguousarray(tree.directions[:top]),
                          np.ascontiguousarray(tree.thresholds[:top]), tree.levels, n_threads)
        dest = np.array([subtree_owner(int(s), tree.levels, size) for s in range(1 << tree.levels)],
                        dtype=np.int64)[sub] if len(sub) else np.zeros(0, dtype=np.int64)
        order = np.argsort(dest, kind="stable")
        send_counts = np.bincount(dest, minlength=size).astype(np.int64)
        recv_counts = np.array(comm.alltoall(send_counts.tolist()), dtype=np.int64)
        points = np.empty((int(recv_counts.sum()), d))
        comm.Alltoallv([np.ascontiguousarray(Xc[order]), send_counts * d],
                       [points, recv_counts * d])
        # The points this rank predicts, in the global order of the test points (source ranks
        # in order): grouped by leaf as the serial model groups them.
        leaf = _tree.route(points, tree.directions, tree.thresholds, tree.depth, n_threads)
        by_leaf = np.argsort(leaf, kind="stable")
        leaf_start = np.zeros((1 << tree.depth) + 1, dtype=np.int64)
        np.cumsum(np.bincount(leaf, minlength=1 << tree.depth), out=leaf_start[1:])
        with blas_threads(1):
            scores_g = evaluate(np.ascontiguousarray(points[by_leaf]), leaf_start, n_threads)
        scores = np.empty_like(scores_g)
        scores[by_leaf] = scores_g
        back = np.empty((len(X), k))
        comm.Alltoallv([np.ascontiguousarray(scores), recv_counts * k],
                       [back, send_counts * k])
        out = np.empty_like(back)
        out[order] = back
        return out

    # -- the operator A = K_hier' + (lam - lam') I in the shards' rows

    def _checked_rhs(self, state, B, name):
        """This rank's rows of B as (n_local, k) and whether B was a vector, after every rank
        checked its rows (a bad B on any rank, or different k, is raised on every rank)."""
        n_local = int(self._reorder.shard_counts.sum())

        def check():
            checked = check_rhs(B, n_local, name)
            k = 1 if checked.ndim == 1 else checked.shape[1]
            return np.ascontiguousarray(checked.reshape(n_local, k)), checked.ndim == 1
        out = state.run(check)
        shapes = state.agree(None if out is None else out[0].shape[1])
        if len(set(shapes)) > 1:
            raise Agreed(ValueError(f"{name} has {shapes[0]} column(s) on rank 0 but "
                                    f"{sorted(set(shapes))} over the ranks"))
        return out

    @_collective
    @budgeted
    def solve(self, state, B):
        """A^{-1} B for this rank's rows of B ((n_local,) or (n_local, k)); a collective."""
        return self._apply_in_tree_order(state, B, self._solve_tree)

    @_collective
    @budgeted
    def matvec(self, state, B):
        """A B for this rank's rows of B ((n_local,) or (n_local, k)); a collective."""
        return self._apply_in_tree_order(state, B, self._matvec_tree)

    def _apply_in_tree_order(self, state, B, tree_operation):
        """tree_operation(state, B in tree order), returned in this rank's row order."""
        B, vector = self._checked_rhs(state, B, "B")
        out = self._reorder.from_tree(tree_operation(state, self._reorder.to_tree(B)))
        return out[:, 0] if vector else out

    def logdet(self):
        """log det A, the same on every rank."""
        return self._logdet

    @_collective
    @budgeted
    def log_marginal_likelihood(self, state, y=None):
        """log N(y - mu | 0, s2 A) at the fitted mean and signal variance, as
        :meth:`hkern.HierarchicalKRR.log_marginal_likelihood`: the training targets' (default),
        or this rank's rows of other targets y (a collective)."""
        if state.comm.allreduce(y is None, op=get_mpi().LAND):
            if self.encoding_.task != "regression":     # the same on every rank
                raise Agreed(ValueError(
                    "log_marginal_likelihood() is defined for regression, but this model was "
                    "fitted with task='classification'; pass y (e.g. the +-1 one-vs-rest "
                    "encoding of the labels, each rank its rows)"))
            return self._evidence.lml(self._evidence.signal_variance())
        Y, _ = self._checked_rhs(state, y, "y")
        regression = self.encoding_.task == "regression"
        Y = np.ascontiguousarray(self.encoding_.centre(Y))
        alpha = self._reorder.from_tree(self._solve_tree(state, self._reorder.to_tree(Y)))
        quad = exact_over_ranks(state, Y * alpha)
        return Evidence(quad, self._logdet, self.n_).lml(
            self._evidence.signal_variance() if regression else None)

    def kernel_pca(self, n_components=2, seed=0):
        """Not available on shards: raises NotImplementedError saying what to do instead.

        The serial :meth:`hkern.HierarchicalKRR.kernel_pca` runs Lanczos over all n rows;
        a sharded version is not written yet.  No rank communicates here, so every rank
        raises the same error at once and none waits in a collective.

        Raises
        ------
        NotImplementedError
            Always.
        """
        raise NotImplementedError(
            f"kernel_pca is not available on a model fitted on shards (comm with "
            f"{self._comm.Get_size()} ranks): gather X on one rank and fit there without comm, "
            f"hkern.fit_hierarchical(X, y, r={self.r_}, kernel={self.kernel!r}, sigma=..., "
            f"lam={self.lam:g}, seed=...) with this fit's sigma and seed (the sharded fit is "
            f"the serial fit of the concatenated shards), and call its kernel_pca; it needs "
            f"O(n r) memory on that rank")

    @property
    def dual_coef_(self):
        """A^{-1} Y in the rows of this rank's training shard (a collective)."""
        with every_rank_stops(self._comm, "dual_coef_"):
            return self._reorder.from_tree(self._weights_tree)

    def _solve_tree(self, state, Bt):
        return _refined(state, self._op, Bt, self.lam, budget_threads(), "solve")

    def _matvec_tree(self, state, Bt):
        return _matvec(state, self._op, Bt, budget_threads())

    def _repr_fields(self):
        return {"r": str(self.r_), "kernel": repr(self.kernel), "sigma": format_sigma(self.sigma),
                "lam": f"{self.lam:g}", "ranks": str(self._comm.Get_size())}


# ------------------------------------------------------------------ the passes on a part


def _level_nodes(op, t):
    """The nodes of level t this part holds."""
    off = op.level_offsets()
    return op.held_nodes()[off[t]:off[t + 1]]


def _share_vectors(state, op, c, c_off):
    """The level-L nodes' c vectors of every part (the levels above need them)."""
    L = op.levels
    if L == 0:
        return
    _share_level(state, _level_nodes(op, L), lambda i: c[c_off[i]:c_off[i + 1]])


def _solve(state, op, Bt, n_threads):
    """A^{-1} B for the tree-ordered rows held (a collective)."""
    k = Bt.shape[1]
    c_off, g_off = op.vector_offsets(k)
    c = np.zeros(max(int(c_off[-1]), 1))
    g = np.zeros(max(int(g_off[-1]), 1))
    sv = np.zeros(max(int(g_off[-1]), 1))
    Y = np.empty_like(Bt)
    L, J = op.levels, op.depth
    with blas_threads(1):
        op.solve_levels_up(Bt, Y, c, g, sv, c_off, g_off, J, L, n_threads)
        _share_vectors(state, op, c, c_off)
        op.solve_levels_up(Bt, Y, c, g, sv, c_off, g_off, L - 1, 0, n_threads)
        op.solve_levels_down(Y, g, g_off, 1, J, n_threads)
    return Y


def _refined(state, op, Bt, lam, n_threads, label):
    """A^{-1} B refined as the serial fit's (:func:`hkern.hierarchical.factor.refined_solve`),
    the residual norms summed over the ranks (a collective)."""
    return refined_solve(
        op, Bt, lam, n_threads, label, solve=lambda V: _solve(state, op, V, n_threads),
        matvec=lambda V: _matvec(state, op, V, n_threads),
        sum_over_ranks=lambda v: state.comm.allreduce(np.ascontiguousarray(v),
                                                      op=get_mpi().SUM))


def _up_and_siblings(state, op, Bt, n_threads):
    """c of every held node and the sibling exchange: (dv, c_off) (a collective)."""
    k = Bt.shape[1]
    c_off, g_off = op.vector_offsets(k)
    c = np.zeros(max(int(c_off[-1]), 1))
    dv = np.zeros(max(int(c_off[-1]), 1))
    sv = np.zeros(max(int(g_off[-1]), 1))
    L, J = op.levels, op.depth
    with blas_threads(1):
        op.up_levels(Bt, c, sv, c_off, g_off, J, max(L, 1), n_threads)
        _share_vectors(state, op, c, c_off)
        op.up_levels(Bt, c, sv, c_off, g_off, L - 1, 1, n_threads)
        op.siblings(c, dv, c_off, k, n_threads)
    return dv, c_off


def _matvec(state, op, Bt, n_threads):
    dv, c_off = _up_and_siblings(state, op, Bt, n_threads)
    Y = np.empty_like(Bt)
    with blas_threads(1):
        op.matvec_down(Bt, Y, dv, c_off, n_threads)
    return Y


# ------------------------------------------------------------------ the fit


def _sharded_fit_bytes(rows, n_local, d, k, r, sub_depth, n_threads):
    """Estimated peak bytes of one rank: the serial fit's estimate for the tree positions it
    holds (its subtrees), beside its shard's rows on their way (sent and received: 2 n_local
    (d + k + 1) numbers)."""
    return (hck_fit_bytes(max(rows, 1), d, k, r, sub_depth, n_threads)
            + 16 * n_local * (d + k + 1))


def fit_hierarchical_sharded(state, *, X, y, r, kernel, sigma, lam, task, seed, n_jobs, jitter,
                             partition, leaf_size, criterion="auto", verbose, comm,
                             max_memory):
    """The sharded fit_hierarchical (module docstring); arguments as fit_hierarchical's, X and
    y this rank's rows."""
    arguments = dict(r=r, kernel=kernel, sigma=np.asarray(sigma).tolist()
                     if not isinstance(sigma, str) else sigma, lam=lam, task=task,
                     seed=seed if seed is None or np.isscalar(seed) else "generator",
                     jitter=jitter, partition=partition, leaf_size=leaf_size)
    state.run(check_parameter, "partition", partition)
    fit = prepare_sharded_fit(state, X, y, kernel=kernel, sigma=sigma, lam=lam, task=task,
                              n_jobs=n_jobs, max_memory=max_memory, arguments=arguments)
    inputs, n, size = fit.inputs, fit.n, state.size
    try:       # the same checks with the same (agreed) values on every rank
        r, leaf_size = check_tree_args(n, r, leaf_size, partition)
        jit = check_parameter("jitter", jitter, lam=inputs.lam)
        jit = default_jitter(inputs.lam) if jit is None else jit
    except ValueError as exc:
        raise Agreed(exc) from None
    depth = tree_depth(n, r, leaf_size)
    levels = rank_levels(depth, size)
    with in_budget(n_jobs) as n_threads:
        start, count = _tree.node_ranges(n, depth)
        first = (1 << levels) - 1
        rows = sum(int(count[first + s]) for s in range(1 << levels)
                   if subtree_owner(s, levels, size) == state.rank)
        d, k = inputs.X.shape[1], inputs.Y.shape[1]
        state.run(check_memory, _sharded_fit_bytes(rows, len(inputs.X), d, k, r, depth - levels,
                                                   n_threads) + inputs.scaled_bytes,
                  max_memory, what=f"fit_hierarchical on rank {state.rank} of {size} with "
                  f"{rows} of n={n} points, r={r}, d={d} (depth {depth})",
                  fix="choose a smaller r, use more ranks, or pass a larger max_memory")
        state.agree()
        tree = build_sharded_tree(state, inputs.X, inputs.Y, fit.offsets, r, depth, partition,
                                  fit.rng(seed), n_threads)
        return _factorize(state, tree, inputs, fit.offsets, r, jit, n_threads, n_jobs)


def _factorize(state, tree, inputs, offsets, r, jitter, n_threads, n_jobs):
    comm = state.comm
    depth, levels = tree.depth, tree.levels
    n_nonleaf = (1 << depth) - 1
    sizes = np.zeros(n_nonleaf, dtype=np.intp)
    for i, lm in tree.landmarks.items():
        sizes[i] = len(lm)
    lm_off = offsets_of(sizes).astype(np.intp)
    lm = np.concatenate([tree.landmarks[i] for i in sorted(tree.landmarks)]).astype(np.intp) \
        if tree.landmarks else np.zeros(0, dtype=np.intp)
    # The top nodes' landmark points, from the ranks holding their positions.
    top = (1 << levels) - 1
    part = dict(row0=tree.row0, levels=levels, subtrees=tree.subtrees)
    if levels > 0:
        positions = np.unique(np.concatenate([tree.landmarks[i] for i in range(top)]))
        held = offsets_of(comm.allgather(tree.rows))
        points = gather_rows(state, held, tree.X_tree, positions)
        ztop = np.concatenate([np.searchsorted(positions, tree.landmarks[i])
                               for i in range(top)])
        part.update(Ztop=np.ascontiguousarray(points[ztop]),
                    ztop_off=offsets_of([len(tree.landmarks[i]) for i in range(top)]))

        def exchange(theta, error):
            if error is not None and state.failure is None:
                state.failure = error
            state.agree()
            first = top
            owned = [first + s for s in tree.subtrees]
            _share_level(state, owned, lambda i: theta[i])
        part["exchange"] = exchange
    if levels == 0:         # one rank holds the whole tree (one rank, or a tree of depth 0)
        op = state.run(_operator, tree, lm_off, lm, inputs, jitter, n_threads, part)
        state.agree()
    else:
        # A failure below the top levels is agreed in the exchange; the top levels are the same
        # arithmetic on every rank, so they fail alike.
        try:
            op = _operator(tree, lm_off, lm, inputs, jitter, n_threads, part)
        except ValueError as exc:
            raise Agreed(exc) from None
    weights = _refined(state, op, tree.Y_tree, inputs.lam, n_threads, "fit_hierarchical")
    dv, c_off = _up_and_siblings(state, op, weights, n_threads)
    # log det A: every node's term, in heap order, summed as the serial fit sums them.
    parts = op.factors()["logdet_parts"].copy()
    if state.rank != 0:
        parts[:top] = 0.0                 # the top nodes' terms once (every rank has them)
    comm.Allreduce(get_mpi().IN_PLACE, parts, op=get_mpi().SUM)
    logdet = float(np.sum(parts))
    # y^T A^{-1} y summed exactly: the serial fit's bits (its signal variance, its std)
    quad = exact_over_ranks(state, tree.Y_tree * weights)
    evidence = Evidence(quad, logdet, int(tree.count[0]))
    reorder = _Reorder(comm, offsets, tree.perm)
    return ShardedHierarchicalKRR(
        comm=comm, operator=op, tree=tree, reorder=reorder, weights=weights,
        pred_vectors=dv, pred_offsets=c_off, logdet=logdet, r=r, jitter=jitter,
        evidence=evidence, **inputs.model_params(n_jobs))


def _operator(tree, lm_off, lm, inputs, jitter, n_threads, part):
    with blas_threads(1):
        return HCKOperator(tree.X_tree, tree.depth, tree.start.astype(np.intp),
                           tree.count.astype(np.intp), lm_off, lm, inputs.kind,
                           inputs.bandwidth, inputs.lam, jitter, n_threads, part=part)


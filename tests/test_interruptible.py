"""One long LAPACK call runs on a worker thread so that Ctrl-C reaches the caller at once
(hkern._interruptible; the latency itself is measured in test_interrupts.py, case
fit_nystrom_direct).  Here: the worker gives the same bits as the direct call, hands back
its exceptions, and small calls or calls off the main thread run directly."""
import threading

import numpy as np
import pytest

import hkern._interruptible as interruptible
from hkern import _linalg


def _decompositions():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((700, 700))
    A = A @ A.T
    B = rng.standard_normal((700, 600))
    b = rng.standard_normal(700)
    return (*_linalg.eigh(A), *_linalg.svd(B), *_linalg.lstsq(B, b, rcond=1e-10))


def test_the_worker_gives_the_bits_of_the_direct_call(monkeypatch):
    threads = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start",
                        lambda self: (threads.append(self.name), start(self))[1])
    on_worker = _decompositions()
    assert threads == ["hkern-lapack"] * 3          # eigh, svd and lstsq, each above 512 rows
    monkeypatch.setattr(interruptible, "SIZE_THRESHOLD", 10**9)
    direct = _decompositions()
    assert len(threads) == 3
    for a, b in zip(on_worker, direct):
        assert np.array_equal(a, b)


def test_the_workers_exception_reaches_the_caller():
    def fails(size):
        raise np.linalg.LinAlgError(f"no luck at {size}")

    with pytest.raises(np.linalg.LinAlgError, match="no luck at 5000"):
        interruptible.run_interruptibly(fails, 5000, 5000)


def test_small_calls_and_calls_off_the_main_thread_run_directly():
    where = []

    def record():
        where.append(threading.current_thread().name)
        return len(where)

    assert interruptible.run_interruptibly(record, 10) == 1
    worker = threading.Thread(target=interruptible.run_interruptibly, args=(record, 10**6),
                              name="caller")
    worker.start()
    worker.join()
    assert interruptible.run_interruptibly(record, 10**6) == 3
    assert where == [threading.main_thread().name, "caller", "hkern-lapack"]

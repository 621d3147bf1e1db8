"""Thread budgets: n_jobs=None honours the limits a user sets; an explicit n_jobs bounds BLAS.

Issue 16 defect 7: every function ran 2 threads under OMP_NUM_THREADS=1 and inside
threadpoolctl.threadpool_limits(1).  Thread use is measured as CPU time / wall time of a call
that takes about a second, in a fresh interpreter (environment variables are read at start-up).
"""
import json
import textwrap

import numpy as np
import pytest
from fresh_python import run_python
from threadpoolctl import threadpool_info, threadpool_limits

import hkern
from hkern._threads import _cgroup_cpu_quota, available_cpus, resolve_n_jobs, thread_budget

_PROBE = """
import json, os, time
import numpy as np
import hkern
from threadpoolctl import threadpool_limits
X = np.random.default_rng(0).normal(size=(6000, 5)); y = X[:, 0].copy()
hkern.fit_exact(X[:500], y[:500], n_jobs={n_jobs}, sigma=1.0,
                lam=1e-2)          # warm-up: libraries loaded

def thread_ticks():
    ticks = {{}}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{{tid}}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            ticks[tid] = int(fields[11]) + int(fields[12])      # utime + stime
        except OSError:
            pass
    return ticks

def run():
    t0, c0, w0 = thread_ticks(), time.process_time(), time.perf_counter()
    hkern.fit_exact(X, y, n_jobs={n_jobs}, sigma=1.0, lam=1e-2)
    ratio = (time.process_time() - c0) / (time.perf_counter() - w0)
    t1 = thread_ticks()
    # Threads that did at least 0.1 s of work: unlike the ratio, not lowered by other load.
    busy = sum(1 for tid, t in t1.items() if t - t0.get(tid, 0) >= 10)
    return [ratio, busy]
{body}
"""


def _cpu_per_wall(n_jobs="None", body="print(json.dumps(run()))", env=None):
    """[CPU time / wall time, threads that worked >= 0.1 s] of an exact fit at n = 6000."""
    code = _PROBE.format(n_jobs=n_jobs, body=textwrap.dedent(body))
    out = run_python(code, env=env, drop_env=("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"),
                     timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _assert_one_thread(measured):
    ratio, busy = measured
    assert ratio < 1.3 and busy == 1, f"CPU/wall {ratio:.2f}, {busy} busy threads"


def test_none_under_omp_num_threads_1_uses_one_thread():
    _assert_one_thread(_cpu_per_wall(env={"OMP_NUM_THREADS": "1"}))


def test_none_inside_threadpool_limits_uses_one_thread():
    body = """
    with threadpool_limits(1):
        print(json.dumps(run()))
    """
    _assert_one_thread(_cpu_per_wall(body=body))


def test_explicit_n_jobs_1_uses_one_thread():
    _assert_one_thread(_cpu_per_wall(n_jobs="1"))


def test_the_measurement_sees_two_threads():
    # The contrast that gives the three tests above their meaning: two threads asked for are
    # two threads at work (counted per thread, so other load on the machine cannot hide them).
    ratio, busy = _cpu_per_wall(n_jobs="2")
    assert busy == 2, f"CPU/wall {ratio:.2f}, {busy} busy threads"


def test_resolve_none_follows_threadpool_limits():
    with threadpool_limits(1):
        assert resolve_n_jobs(None) == 1
    with threadpool_limits(1, user_api="blas"):
        assert resolve_n_jobs(None) == 1
    assert resolve_n_jobs(None) == min(available_cpus(), resolve_n_jobs(None))


def test_negative_n_jobs_counts_back_from_available_cpus():
    assert resolve_n_jobs(-1) == available_cpus()
    assert resolve_n_jobs(-available_cpus() - 5) == 1


def test_thread_budget_bounds_blas_and_restores_it():
    def blas_threads():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    before = blas_threads()
    with thread_budget(1) as n:
        assert n == 1 and blas_threads() == {1}
    assert blas_threads() == before


@pytest.mark.parametrize("files, expected", [
    ({"cpu.max": "max 100000"}, None),
    ({"cpu.max": "150000 100000"}, 2),
    ({"cpu.max": "50000 100000"}, 1),
    ({"cpu/cpu.cfs_quota_us": "300000", "cpu/cpu.cfs_period_us": "100000"}, 3),
    ({"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}, None),
    ({}, None),
])
def test_cgroup_cpu_quota(tmp_path, files, expected):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _cgroup_cpu_quota(str(tmp_path)) == expected


def test_results_do_not_depend_on_the_thread_limit(rng):
    X = rng.normal(size=(700, 4))
    y = np.sin(X[:, 0])
    ref = hkern.fit_exact(X, y, n_jobs=2, sigma=1.0, lam=1e-2).predict(X)
    with threadpool_limits(1):
        got = hkern.fit_exact(X, y, sigma=1.0, lam=1e-2).predict(X)
    np.testing.assert_array_equal(got, ref)

"""Hold a function's memory estimate against the peak RSS it really reaches.

Each measurement runs in a fresh interpreter, so memory freed by earlier tests cannot hide
inside the measured block: ``setup`` builds the inputs, then ``call`` runs inside
``hkern._memory.peak_memory()`` (peak RSS above the start) and ``recorded_estimates()``
(every estimate passed to ``check_memory``; the first is the outermost call's).
"""
import json
import textwrap

from fresh_python import run_python

_SCRIPT = """
import gc, json
import numpy as np
import hkern
from hkern._memory import peak_memory, recorded_estimates
{setup}
gc.collect()
with recorded_estimates() as log, peak_memory() as peak:
    result = {call}
print(json.dumps({{"peak": peak.bytes, "estimates": log}}))
"""


def measure(setup, call, *, env=None, timeout=600):
    """(peak RSS bytes of ``call``, [(what, estimated bytes), ...]) in a fresh interpreter."""
    out = run_python(_SCRIPT.format(setup=textwrap.dedent(setup), call=call), env=env,
                     timeout=timeout)
    if out.returncode != 0:
        raise AssertionError(f"measurement failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return data["peak"], [tuple(e) for e in data["estimates"]]


def assert_estimate_close(setup, call, *, factor=1.5, env=None):
    """The outermost estimate is within ``factor`` of the measured peak (either way)."""
    peak, estimates = measure(setup, call, env=env)
    assert estimates, f"{call} made no memory estimate (check_memory was not called)"
    what, need = estimates[0]
    ratio = need / max(peak, 1)
    assert 1 / factor <= ratio <= factor, (
        f"{what}: estimated {need / 2**20:.1f} MiB, measured peak RSS {peak / 2**20:.1f} MiB "
        f"(ratio {ratio:.2f}, allowed 1/{factor}..{factor})")
    return peak, need

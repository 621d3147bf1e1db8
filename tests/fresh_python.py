"""Run test code in a fresh interpreter: a crash there fails the test instead of killing pytest.

The child runs in this folder (tests/), never the repository root: ``python -c`` puts its working
folder first on sys.path, and from the root it would import the uncompiled source tree instead of
the installed hkern.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_python(code, *, env=None, drop_env=(), timeout=120):
    """CompletedProcess of ``code`` (dedented) run by this interpreter in tests/.

    ``env`` entries are added to the current environment after removing the names in
    ``drop_env``.
    """
    full_env = {k: v for k, v in os.environ.items() if k not in drop_env}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=full_env, cwd=HERE)


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_child(code, *args, wait):
    """Run ``code`` (``python -c code *args``) in tests/, send it SIGINT ``wait`` seconds after
    it prints "start", and return (``lines``, ``sent``, ``out``, ``err``).

    ``lines``: the child's output lines "key value" as a dict (the child prints "caught <time>"
    when the KeyboardInterrupt reaches it); ``sent``: the time.time() of the signal.  The child
    is killed if it is still running at the end (120 s at most)."""
    # A test run started in the background of a shell ignores SIGINT, and the child would
    # inherit that (Python leaves an ignored SIGINT ignored): the child starts from the default.
    child = subprocess.Popen([sys.executable, "-c", code, *args], cwd=HERE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=_default_sigint)
    try:
        assert child.stdout.readline().strip() == "start", child.stderr.read()
        time.sleep(wait)
        sent = time.time()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return lines, sent, out, err

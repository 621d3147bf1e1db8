"""Progress through the ``hkern`` logger: verbose lines on standard output, every call's lines
to a logging configuration that asks for them, the main job's live status."""
import io
import logging

import numpy as np
import pytest

import hkern
from hkern._progress import LOGGER, live_status
from hkern.solvers.trace import seconds_left


@pytest.fixture
def data(rng):
    X = rng.normal(size=(300, 3))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)


def test_quiet_by_default_and_logged_when_asked(data, capsys, caplog):
    X, y = data
    hkern.fit_exact(X, y, solver="pcg", sigma=1.0, lam=1e-2, seed=0)
    assert capsys.readouterr().out == ""
    with caplog.at_level(logging.INFO, logger="hkern"):
        hkern.fit_exact(X, y, solver="pcg", sigma=1.0, lam=1e-2, seed=0)
    assert capsys.readouterr().out == ""                # logged, not printed
    lines = [r.getMessage() for r in caplog.records if r.name == "hkern"]
    assert any(line.startswith("[fit_exact pcg] iteration") for line in lines)
    assert all(r.levelno == logging.INFO for r in caplog.records if r.name == "hkern")


def test_verbose_prints_each_line_once(data, capsys, caplog):
    X, y = data
    with caplog.at_level(logging.INFO, logger="hkern"):
        hkern.fit_nystrom(X, y, 50, sigma="auto", lam="auto", seed=0, verbose=True)
    out = capsys.readouterr().out.splitlines()
    assert out and all(line.startswith("[fit_nystrom") for line in out)
    assert out == [r.getMessage() for r in caplog.records if r.name == "hkern"]


def test_iteration_lines_give_the_time_left(data, capsys):
    X, y = data
    hkern.fit_exact(X, y, solver="pcg", sigma=1.0, lam=1e-4, seed=0, tol=1e-10,
                    verbose=True)
    lines = [line for line in capsys.readouterr().out.splitlines() if " iteration " in line]
    # (no estimate where the residual rose over the last ten iterations: CG's is not monotone)
    with_estimate = [line for line in lines if line.endswith(" s left)")]
    assert len(lines) > 10 and len(with_estimate) >= len(lines) // 2


def test_seconds_left_from_the_rate_of_the_residual():
    residuals = [1.0, 0.1, 0.01]                 # a tenth per iteration
    times = [0.0, 2.0, 4.0]                      # 2 s per iteration
    assert seconds_left(residuals, times, 1e-6, 100) == ", about 8 s left"   # 4 more
    assert seconds_left(residuals, times, 1e-6, 1) == ", about 2 s left"     # max_iter first
    assert seconds_left(residuals[:1], times[:1], 1e-6, 100) == ""
    assert seconds_left([1.0, 1.0], [0.0, 1.0], 1e-6, 100) == ""             # no decrease
    assert seconds_left([1.0, 1e-7], [0.0, 1.0], 1e-6, 100) == ""            # met


def test_live_status_paces_lines_and_restores_the_logger(data):
    X, y = data
    level, handlers = LOGGER.level, list(LOGGER.handlers)
    stream = io.StringIO()
    with live_status(stream, every=3600.0):
        hkern.fit_exact(X, y, solver="pcg", sigma=1.0, lam=1e-2, seed=0)
    assert len(stream.getvalue().splitlines()) == 1         # one line an hour at most
    assert stream.getvalue().startswith("  [fit_exact pcg]")
    stream = io.StringIO()
    with live_status(stream, every=0.0):
        hkern.fit_exact(X, y, solver="pcg", sigma=1.0, lam=1e-2, seed=0)
    assert len(stream.getvalue().splitlines()) > 2          # every line
    assert LOGGER.level == level and LOGGER.handlers == handlers


def test_live_status_rewrites_one_line_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    with live_status(stream) as status:
        LOGGER.info("first")
        LOGGER.info("second")
        status.clear()
    text = stream.getvalue()
    assert "\n" not in text and text.count("\r") == 4 and text.endswith(" \r")


def test_verbose_lines_are_not_doubled_by_a_default_logging_configuration(data, capsys):
    """logging.basicConfig() at its default level (WARNING) has a root handler of level
    NOTSET: a verbose line reaches the console once, not the root handler too."""
    X, y = data
    root = logging.getLogger()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root.addHandler(handler)
    try:
        hkern.fit_exact(X, y, solver="pcg", sigma=1.0, lam=1e-2, seed=0, verbose=True)
    finally:
        root.removeHandler(handler)
    assert capsys.readouterr().out and stream.getvalue() == ""

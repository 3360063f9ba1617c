"""Shared fixtures: small real models and a helper that trains them through the recorder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# One intra-op thread per process, set before any test imports torch and inherited by every
# training the tests start as a subprocess: the models are tiny, and on a shared 2-core machine
# a second OpenMP thread per process only spins against the other xdist worker (the README's
# quickstart took 7 s of CPU and 20 s under load with two threads, 3 s and 8 s with one).
# A value the user set is kept.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

FULL_TESTS = os.environ.get("TUIDIAG_FULL_TESTS") == "1"
"""``TUIDIAG_FULL_TESTS=1``: also run the repeats and extra grid points that the default run leaves out.

The default run keeps at least one test of every class (each integration, DDP strategy, fault
kind); what it leaves out proves the same claim again and costs a fresh interpreter or a
training. Each test that is shorter by default says what the full run adds."""


def examples(count: int) -> int:
    """Hypothesis's ``max_examples`` for a property test: ``count`` in the full run, a third of it
    (at least 10) by default. Each run draws new examples (not derandomised), so the default runs
    together still explore the space; the full run gives one run the whole budget."""
    return count if FULL_TESTS else max(10, count // 3)


full_only = pytest.mark.skipif(not FULL_TESTS, reason="a repeat of a claim tested by default: TUIDIAG_FULL_TESTS=1 runs it")
"""Mark a test (or a ``pytest.param``) that only the full run runs."""


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A fresh path for one run directory."""
    return tmp_path / "run"


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (for subprocess tests)."""
    return sys.executable


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto``: at least 4, one per CPU where there are more. About a third of the suite's
    time is spent waiting (on training subprocesses, the monitor's timers and workers), so on a 2-core
    machine more workers than cores finish sooner (measured there: 197 s with 4 workers, 208 s with 3)."""
    return max(4, os.cpu_count() or 1)

"""SIGKILL at random moments, 15 times (30 with ``TUIDIAG_FULL_TESTS=1``): every run readable, crashed,
losing at most the last flush.

A reader tails all runs while they are being written and killed; it must never
see a partial shard (a partial file would show as a reader warning).
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

import tuidiag
from tests.conftest import FULL_TESTS, ROOT

TRIALS = 30 if FULL_TESTS else 15
"""Trainings killed; each trial is a fresh process killed at a random moment of its own (0.1 s of CPU each)."""
FLUSH_INTERVAL = 0.05
SLACK_SECONDS = 1.0
"""Scheduling slack on a loaded machine on top of one flush interval (a bound, not a speed claim)."""
POLL_PAUSE = FLUSH_INTERVAL / 5
"""The tailing reader's pause between polls: several polls per flush, without taking a whole core
from the trainings it watches (a busy loop took 5 s of the test's 10 s of CPU)."""


def _tail(root: Path, stop: threading.Event, done: set[str], warnings: list[str], polls: list[int]) -> None:
    """Open and refresh every run under ``root`` until stopped, collecting reader warnings.

    A run the driver has reported killed (in ``done``) is read once more and then left alone: it
    no longer changes, and refreshing every finished run at every poll took most of this reader's time."""
    runs: dict[Path, tuidiag.Run] = {}
    finished: set[Path] = set()
    while not stop.is_set():
        for path in tuidiag.find_runs(root):
            if path in finished:
                continue
            over = str(path) in done  # read before the refresh: its last refresh then sees the whole run
            run = runs.get(path)
            if run is None:
                run = runs[path] = tuidiag.open_run(path)
            else:
                run.refresh()
            warnings.extend(w for w in run.warnings if w not in warnings)
            if over:
                finished.add(path)
        polls[0] += 1
        stop.wait(POLL_PAUSE)


def test_sigkills_at_random_moments_leave_readable_crashed_runs_losing_at_most_one_flush(tmp_path, python) -> None:
    warnings: list[str] = []
    polls = [0]
    done: set[str] = set()
    stop = threading.Event()
    tailer = threading.Thread(target=_tail, args=(tmp_path, stop, done, warnings, polls), daemon=True)
    tailer.start()
    command = [python, "-m", "tests.crash_driver", str(tmp_path), str(TRIALS), "7", str(FLUSH_INTERVAL)]
    driver = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    trials = []
    try:
        for line in driver.stdout:  # one line as each trial's training is killed
            trials.append(json.loads(line))
            done.add(trials[-1]["run"])
        stderr = driver.stderr.read()
        assert driver.wait(timeout=120) == 0, stderr
    finally:
        driver.kill()
        driver.wait()
        stop.set()
        tailer.join()
    assert len(trials) == TRIALS
    assert polls[0] > 0 and warnings == []  # the tailing reader never met a partial shard
    lost_windows = [_check_trial(t) for t in trials]
    assert max(lost_windows) <= FLUSH_INTERVAL + SLACK_SECONDS


def _check_trial(trial: dict) -> float:
    """Check one killed run; return how many seconds of logged rows it lost."""
    run_dir = Path(trial["run"])
    run = tuidiag.open_run(run_dir)
    assert run.status == "crashed", run_dir
    assert run.warnings == []
    steps = run.series("x").steps
    assert steps.tolist() == list(range(len(steps)))  # a prefix: no gap, no duplicate
    assert np.array_equal(run.series("x").values, steps.astype(float))
    for shard in list((run_dir / "metrics").glob("r*.parquet")) + list((run_dir / "events").glob("r*.parquet")):
        pq.read_table(shard)  # every visible shard is whole
    times = np.load(run_dir.parent / f"{run_dir.name}.times.npy")
    assert len(steps) <= len(times)
    if len(steps) == len(times):
        return 0.0
    return trial["kill_time"] - times[len(steps)]  # the oldest lost row was logged this long before the kill

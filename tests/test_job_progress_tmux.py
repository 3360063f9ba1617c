"""End to end in tmux: a real training writes a run, ``tuidiag watch RUN`` follows it, ``n`` then ``y``
arms a NaN hunt inside the training (a thread of the test process: its own process would import torch
again), and ``capture-pane`` shows the progress bar with the steps left
and the cancel key; ``x`` cancels it. Every wait is on what the pane shows, never a fixed sleep."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import training_thread

import tuidiag

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

PAUSE = 0.05
"""Seconds between training steps: 20 steps/s, so that the armed window of 200 steps outlasts the test."""


@pytest.fixture
def tmux() -> Iterator[list[str]]:
    """A private tmux server (its own socket), killed afterwards: no other session is touched."""
    base = ["tmux", "-L", f"tuidiag-jobs-{uuid.uuid4().hex[:8]}"]
    try:
        yield base
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True)


def _pane(tmux: list[str], target: str) -> str:
    return subprocess.run([*tmux, "capture-pane", "-p", "-t", target], capture_output=True, text=True).stdout


def _wait(tmux: list[str], target: str, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        screen = _pane(tmux, target)
        match = re.search(pattern, screen)
        if match or time.monotonic() > deadline:
            assert match, f"{pattern!r} never showed; the pane:\n{screen}"
            return match
        time.sleep(0.1)


def test_an_armed_nan_hunt_shows_its_progress_bar_in_tmux(tmux: list[str], tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    run = root / "live"
    env = f"env PYTHONPATH={Path(tuidiag.__file__).parent.parent} TERM=xterm-256color"  # this checkout's tuidiag
    with training_thread(run, PAUSE):  # in this process: a process of its own would import torch again
        subprocess.run([*tmux, "new-session", "-d", "-s", "jobs", "-x", "100", "-y", "30", "-c", str(tmp_path),
                        f"{env} {sys.executable} -m tuidiag watch {root}"], check=True)
        target = "jobs"
        _wait(tmux, target, r"live\s+running", timeout=60)
        subprocess.run([*tmux, "send-keys", "-t", target, "Enter"], check=True)
        _wait(tmux, target, r"live \| running \| step \d+")
        subprocess.run([*tmux, "send-keys", "-t", target, "n"], check=True)
        _wait(tmux, target, r"Run the NaN hunt\?")
        subprocess.run([*tmux, "send-keys", "-t", target, "y"], check=True)
        armed = _wait(tmux, target, r"NaN hunt .*armed: (\d+) steps left  \d+ s elapsed.*x cancels")
        assert 0 < int(armed.group(1)) <= 200
        assert "━" in armed.group(0)  # the bar itself
        subprocess.run([*tmux, "send-keys", "-t", target, "x"], check=True)
        _wait(tmux, target, r"the NaN hunt cancelled")
        assert "armed:" not in _pane(tmux, target)
        subprocess.run([*tmux, "send-keys", "-t", target, "q"], check=True)

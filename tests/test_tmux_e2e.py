"""End to end in tmux: a real training writes in one pane, the monitor runs in another.

``capture-pane`` must show the run, a growing step count, its loss and its health.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
import uuid

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True).stdout


def _screen(target: str) -> str:
    return _tmux("capture-pane", "-p", "-t", target)


def _wait_for_screen(target: str, pattern: str, timeout: float = 60.0) -> re.Match[str] | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = re.search(pattern, _screen(target))
        if match:
            return match
        time.sleep(0.5)
    return None


def test_monitor_follows_a_live_training_in_tmux(tmp_path, python) -> None:
    session = f"tuidiag-e2e-{uuid.uuid4().hex[:6]}"
    root = tmp_path / "runs"
    _tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "30",
          f"{python} -m tuidiag demo {root} --live --pace 0.05")
    try:
        app = _tmux("split-window", "-t", session, "-h", "-l", "100", "-P", "-F", "#{pane_id}",
                    f"TERM=xterm-256color {python} -m tuidiag watch {root}").strip()
        first = _wait_for_screen(app, r"live-healthy\s+running.*?\s([\d,]+)\s")
        assert first, _screen(app)
        step_then = int(first.group(1).replace(",", ""))
        later = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            match = re.search(r"live-healthy\s+running.*?\s([\d,]+)\s", _screen(app))
            if match and int(match.group(1).replace(",", "")) > step_then:
                later = match
                break
            time.sleep(0.5)
        assert later, "the step count did not grow on screen"
        assert "healthy" in _screen(app)
        _tmux("send-keys", "-t", app, "Enter")
        assert _wait_for_screen(app, r"Diagnosis \(live\)"), _screen(app)
        assert _wait_for_screen(app, r"Most likely \([<>]?\d+%\)"), _screen(app)
        _tmux("send-keys", "-t", app, "q")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)

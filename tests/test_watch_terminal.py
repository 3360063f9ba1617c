"""The monitor without a terminal: ``tuidiag watch`` and ``tuidiag replay`` say why they cannot run, and exit.

Started with its input from ``/dev/null`` (``nohup``, a cron job, a script), the monitor read end-of-file in a loop
and kept a core busy for as long as it ran; with its output to a file or pipe it wrote escape codes there. Each
command, with the input or the output not a terminal (the other one a real pseudo-terminal), exits 2 at once with
a message that names what is missing and what to run instead, and draws nothing.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests.app_helpers import DEMO_RUNS
from tests.conftest import ROOT, full_only


@pytest.mark.parametrize(("command", "missing"), [
    (["watch", str(DEMO_RUNS)], "input"), (["replay", str(DEMO_RUNS / "healthy")], "output"),
    pytest.param(["watch", str(DEMO_RUNS)], "output", marks=full_only),
    pytest.param(["replay", str(DEMO_RUNS / "healthy")], "input", marks=full_only)], ids=str)
def test_without_a_terminal_the_monitor_says_why_and_exits(command: list[str], missing: str) -> None:
    leader, follower = pty.openpty()
    try:
        stdin = subprocess.DEVNULL if missing == "input" else follower
        stdout = subprocess.PIPE if missing == "output" else follower
        proc = subprocess.run([sys.executable, "-m", "tuidiag", *command], stdin=stdin, stdout=stdout,
                              stderr=subprocess.PIPE, env=os.environ | {"PYTHONPATH": str(ROOT)}, timeout=60)
    finally:
        os.close(follower)
        os.close(leader)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert f"the monitor needs a terminal, and its {missing} is not one" in err
    assert "tuidiag watch --web" in err and "tuidiag ls" in err
    assert b"\x1b[" not in (proc.stdout or b"")  # nothing drawn into the pipe


def test_under_textual_serve_the_pipes_are_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tuidiag watch --web`` runs the monitor under textual-serve, which talks to it through pipes and names
    Textual's web driver in ``TEXTUAL_DRIVER``: then nothing is missing (this test's own input is not a terminal)."""
    from tuidiag.cli.watch_cmd import terminal_problem

    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    assert not sys.stdin.isatty() and terminal_problem() is not None
    monkeypatch.setenv("TEXTUAL_DRIVER", "textual.drivers.web_driver:WebDriver")
    assert terminal_problem() is None

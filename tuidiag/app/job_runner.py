"""Running a job as a real subprocess (``tuidiag <job> RUN --json --yes``) for the monitor.

The monitor never imports torch or the jobs: it starts the same CLI a user would
type, after asking, and reads the result file the job leaves in ``RUN/jobs/``. The
process runs tuidiag's own code, isolated from the working directory
(:mod:`tuidiag.self_command`).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from tuidiag import job_kinds, self_command
from tuidiag.store import control_channel as ctl

def job_command(job: str, run_dir: str) -> list[str]:
    """The ``tuidiag`` arguments for ``job`` on ``run_dir`` (already confirmed: ``--yes``)."""
    return [job_kinds.get(job).command, str(run_dir), "--json", "--yes"]


def shown(command: list[str]) -> str:
    """The command as a user would type it."""
    return self_command.shown(*command)


def start(command: list[str], cwd: Path) -> subprocess.Popen[str]:
    """Start ``tuidiag COMMAND`` in ``cwd``; its stdout (JSON) and stderr are captured."""
    return subprocess.Popen(self_command.command(*command, cwd=cwd), cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def tail(text: str, lines: int = 4) -> str:
    """The last lines of a job's stderr, for a failure message."""
    return "\n".join(text.strip().splitlines()[-lines:])


def live_where(manifest: dict[str, Any], job: str, steps_per_s: float | None) -> str:
    """Where a live job runs, on which device, how long, for the confirmation."""
    control = manifest.get("control") or {}
    kind = job_kinds.get(job)
    steps = kind.expected_steps()
    expected = f", about {steps / steps_per_s:.0f} s at the run's {steps_per_s:.3g} steps/s" if steps_per_s else ""
    return (f"the live training process (pid {control.get('pid')} on {control.get('host')}, "
            f"device {control.get('device', '?')}): up to {steps} {kind.unit}{expected}; "
            f"stops waiting after {ctl.REQUEST_WAIT:.0f} s without an answer from the training")


def live_progress(run_dir: Path, job: str, since: float) -> str:
    """State of the newest request for ``job`` answered after ``since`` (monotonic), e.g. "running 40/100"."""
    newest = ctl.newest_status(run_dir, job, time.time() - (time.monotonic() - since))
    if newest is None:
        return ""
    figures = f" {newest.get('done')}/{newest.get('total')}" if newest.get("total") else ""
    return f"{newest.get('state')}{figures}"

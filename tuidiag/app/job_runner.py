"""Running a job on a run's factory as a real subprocess (``tuidiag <job> RUN --json --yes``) for the monitor.

The monitor never imports torch or the jobs: for a run that is not live it starts
the same CLI a user would type, after asking, and follows the ``progress DONE
TOTAL`` lines the command writes with ``--progress-lines``. The process runs
tuidiag's own code, isolated from the working directory
(:mod:`tuidiag.self_command`). A live run's jobs need no process:
:mod:`tuidiag.app.job_requests`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuidiag import job_kinds, self_command
from tuidiag.job_kinds import PROGRESS_LINE, SAVED_LINE
from tuidiag.store import control_channel as ctl
from tuidiag.store.job_results import read_result
from tuidiag.text.numbers import duration

def job_command(job: str, run_dir: str) -> list[str]:
    """The ``tuidiag`` arguments for ``job`` on ``run_dir`` (already confirmed: ``--yes``)."""
    return [job_kinds.get(job).command, str(run_dir), "--json", "--yes"]


def live_command(job: str, run_dir: str) -> list[str]:
    """The command a user would type to send ``job`` to the live training of ``run_dir``."""
    return [job_kinds.get(job).command, str(run_dir), "--live"]


def shown(command: list[str]) -> str:
    """The command as a user would type it."""
    return self_command.shown(*command)


def start(command: list[str], cwd: Path) -> subprocess.Popen[str]:
    """Start ``tuidiag COMMAND --progress-lines`` in ``cwd``; its stderr (progress, messages) is piped,
    its stdout (the JSON result, also saved in ``RUN/jobs``) discarded."""
    return subprocess.Popen(self_command.command(*command, "--progress-lines", cwd=cwd), cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def follow(process: subprocess.Popen[str], on_status: Callable[[dict[str, Any]], None]) -> tuple[int, list[str]]:
    """Read the process's stderr to its end, reporting each progress line as a ``running`` status;
    ``(exit status, the other lines)``."""
    lines: list[str] = []
    assert process.stderr is not None
    for line in process.stderr:
        words = line.split()
        if len(words) == 3 and words[0] == PROGRESS_LINE and words[1].isdigit() and words[2].isdigit():
            on_status({"state": "running", "done": int(words[1]), "total": int(words[2])})
        elif line.strip():
            lines.append(line.rstrip("\n"))
    return process.wait(), lines


def final_status(returncode: int, lines: list[str]) -> dict[str, Any]:
    """The job's end as a status: ``done`` (exit 0 or 1) with the result file it saved, ``cancelled``
    (terminated), else ``failed`` with the end of its stderr."""
    if returncode in (0, 1):
        saved = next((line[len(SAVED_LINE):] for line in reversed(lines) if line.startswith(SAVED_LINE)), None)
        return {"state": "done", "result_path": saved}
    if returncode < 0:
        return {"state": "cancelled"}
    return {"state": "failed", "message": tail("\n".join(lines))}


def result_of(status: dict[str, Any]) -> dict[str, Any] | None:
    """The result in the file a ``done`` status names (None when there is none or it cannot be read)."""
    path = status.get("result_path")
    return saved_result(path) if path else None


def saved_result(path: str | Path) -> dict[str, Any] | None:
    """The ``result`` of the job result file at ``path`` (None when it cannot be read or holds none)."""
    try:
        record = read_result(path)
    except (OSError, ValueError):
        return None
    return record.get("result") if isinstance(record.get("result"), dict) else None


def tail(text: str, lines: int = 4) -> str:
    """The last lines of a job's stderr, for a failure message."""
    return "\n".join(text.strip().splitlines()[-lines:])


def live_where(manifest: dict[str, Any], job: str, steps_per_s: float | None) -> str:
    """Where a live job runs, on which device, how long, for the confirmation."""
    control = manifest.get("control") or {}
    kind = job_kinds.get(job)
    config = kind.default_config()
    where = f"the live training process (pid {control.get('pid')} on {control.get('host')}, device {control.get('device', '?')})"
    wait = f"stops waiting after {ctl.REQUEST_WAIT:.0f} s without an answer from the training"
    if kind.needs_capture:  # live, the hunt arms: the training goes on until a non-finite step comes, or the arming ends
        armed = int(getattr(config, "steps", 0))
        pace = f", about {duration(armed / steps_per_s)} at the run's {steps_per_s:.3g} steps/s" if steps_per_s else ""
        return (f"{where}: armed for up to {armed} training steps{pace}; the first non-finite step in them is "
                f"captured and replayed; {wait}")
    steps = kind.expected_steps(config)
    expected = f", about {duration(steps / steps_per_s)} at the run's {steps_per_s:.3g} steps/s" if steps_per_s else ""
    return f"{where}: up to {steps} {kind.unit}{expected}; {wait}"

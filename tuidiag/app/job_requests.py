"""Sending a job to a live training for the monitor (worker-thread side; no Textual here).

As with live actions (:mod:`tuidiag.app.action_requests`), the monitor writes the
control request itself, follows its status file in its worker thread, and reads the
one result file the training names when it is done: no job process, no reading of
the run. Jobs on a factory, which import the user's code, still run in a process
(:mod:`tuidiag.app.job_runner`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuidiag import job_kinds
from tuidiag.app.job_runner import saved_result
from tuidiag.store import control_channel as ctl
from tuidiag.store.job_results import JOBS_DIR


def request_args(job: str) -> dict[str, Any]:
    """The request's arguments: the job's settings with their defaults, as the CLI sends them."""
    return dataclasses.asdict(job_kinds.get(job).default_config())


def send(run_dir: Path, job: str) -> str:
    """Write the request for ``job`` with its default settings; its id (``ControlError`` when it cannot)."""
    return ctl.write_request(run_dir, job, request_args(job), expires_in=ctl.REQUEST_WAIT)


def follow(run_dir: Path, request_id: str, on_status: Callable[[dict[str, Any]], None],
           stop: Callable[[], bool]) -> dict[str, Any]:
    """Follow the request until its final state (or the training says nothing for a while, or ``stop()``)."""
    return ctl.await_answer(run_dir, request_id, ctl.REQUEST_WAIT, on_status=on_status, stop=stop)


def result_of(run_dir: Path, status: dict[str, Any]) -> dict[str, Any] | None:
    """The result a final ``done`` status names (None when it names none or it cannot be read)."""
    name = status.get("result")
    if status.get("state") != "done" or not isinstance(name, str):
        return None
    parts = Path(name).parts
    if len(parts) != 2 or parts[0] != JOBS_DIR or parts[1].startswith("."):  # only a file the training saved in RUN/jobs
        return None
    return saved_result(run_dir / name)


def cancel(run_dir: Path, request_id: str) -> None:
    """Ask the training to stop the request (it stops at the job's next progress point)."""
    try:
        ctl.request_cancel(run_dir, request_id)
    except OSError:
        pass

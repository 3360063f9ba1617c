"""Jobs run inside a live training: write a control request, follow its status, print its result.

Used by ``tuidiag lr-find | nan-hunt | overfit-batch | sharpness`` when the run is
live and its recorder accepts requests (``run.json``'s ``control``), unless
``--factory`` or ``--offline`` is given. No code named by the run directory is
imported: the training process runs the job on its own model and device.
Ctrl-C (or SIGTERM, as the monitor's cancel key sends) cancels the job. The CLI
stops waiting when the training has said nothing about the job for ``--wait``
seconds ("no answer from the training within 60 s: it may be busy or gone") or
when the run ends; a job not yet started then is withdrawn and answered ``expired``.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any

from tuidiag.store import Run
from tuidiag.store import control_channel as ctl
from tuidiag.store.job_results import read_result

def wants_live(run: Run, args: argparse.Namespace) -> bool:
    """Live unless ``--offline``, ``--factory`` or ``--checkpoint`` is given or the run cannot take requests."""
    if getattr(args, "offline", False) or getattr(args, "factory", None) or getattr(args, "checkpoint", None):
        return False
    return getattr(args, "live", False) or ctl.live_problem(run.manifest) is None


def describe(run: Run, job_text: str) -> str:
    """What will run where, for stderr and the monitor's confirmation."""
    control = run.manifest.get("control") or {}
    return (f"{job_text}\n  runs inside the live training (pid {control.get('pid')} on {control.get('host')}) "
            "at its next step, on its device; model, optimizer and RNG are restored afterwards")


def job_args(config: Any) -> dict[str, Any]:
    """The request's arguments: the job's checked config as a dict (the NaN hunt's: its arming window)."""
    return dataclasses.asdict(config)


class _Interrupted(Exception):
    """SIGTERM while waiting (the monitor's cancel key)."""


def _on_term(signum: int, frame: Any) -> None:
    raise _Interrupted()


def _show(status: dict[str, Any], quiet: bool) -> None:
    if quiet:
        return
    done, total, state = status.get("done"), status.get("total"), status.get("state")
    figures = f" {done}/{total}" if total else ""
    print(f"\r{status.get('job')}: {state}{figures}   ", end="", file=sys.stderr, flush=True)


def follow(run_dir: Path, request_id: str, wait: float, quiet: bool) -> dict[str, Any]:
    """Poll the request's status until it ends, the run ends, or the training says nothing for ``wait``
    seconds; cancel it on Ctrl-C or SIGTERM."""
    previous = signal.signal(signal.SIGTERM, _on_term)
    try:
        return ctl.await_answer(run_dir, request_id, wait, on_status=lambda status: _show(status, quiet))
    except (KeyboardInterrupt, _Interrupted):
        ctl.request_cancel(run_dir, request_id)
        return ctl.await_answer(run_dir, request_id, 10.0, 10.0)
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not quiet:
            print(file=sys.stderr)


def run_live(run: Run, job: str, request_args: dict[str, Any], wait: float) -> tuple[dict[str, Any] | None, str]:
    """Send the request and follow it; ``(result, message)``: the result is None unless it finished."""
    request_id = ctl.write_request(run.path, job, request_args, expires_in=wait)
    status = follow(run.path, request_id, wait, quiet=not sys.stderr.isatty())
    if status.get("state") != "done":
        return None, f"{status.get('state')}: {status.get('message', '')}"
    path = run.path / str(status.get("result"))
    return read_result(path)["result"], f"saved {path}"

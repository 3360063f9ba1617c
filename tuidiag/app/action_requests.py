"""Offering and sending live actions for the monitor (worker-thread side; no Textual here).

The monitor writes the control request itself: an action is a small change the
training applies at its next step (no job process, no user code), and the answer
comes back through the request's status file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuidiag.viewmodel.actions import PastAction, Proposal, finder_suggestion, lr_conflict, past_actions, propose
from tuidiag.store import control_channel as ctl
from tuidiag.store.manifest import read_manifest

ANSWER_WAIT = 30.0
"""Seconds to wait for the training to apply an action, and for the steps after it to show it, before saying it has not yet."""
SHOWN_PAST = 3
"""Earlier actions the action screen lists, newest last."""


def offer(model: Any, run_dir: Path) -> tuple[list[Proposal], str, str | None, tuple[PastAction, ...], str | None]:
    """``(proposals, where, problem, past, withheld)`` for ``run_dir``; ``problem`` says why nothing can be
    applied, ``past`` are the run's latest actions and whether they held, ``withheld`` why no LR change
    is offered (the evidence on the LR conflicts)."""
    try:
        manifest = read_manifest(run_dir)
    except (OSError, ValueError) as exc:
        return [], "", f"cannot read {run_dir}/run.json ({exc})", (), None
    problem = ctl.live_problem(manifest)
    if problem is not None:
        return [], "", f"changes apply only to a live training: {problem}", (), None
    detail = model.detail(str(run_dir))
    if detail is None:
        return [], "", "the run is not loaded yet", (), None
    control = manifest.get("control") or {}
    where = f"the training process (pid {control.get('pid')} on {control.get('host')})"
    clipping = detail.clip_threshold is not None
    past = tuple(past_actions(detail.events)[-SHOWN_PAST:])
    suggested = finder_suggestion(run_dir)
    withheld = lr_conflict(detail.diagnosis, detail.summary.lr, suggested)
    return propose(detail.diagnosis, detail.summary.lr, suggested, clipping), where, None, past, withheld


def apply(run_dir: Path, proposal: Proposal, wait: float = ANSWER_WAIT) -> tuple[bool, str]:
    """Send ``proposal`` and wait for the training's answer: ``(applied, what it said)``."""
    return ctl.send_and_wait(run_dir, proposal.action, proposal.args, wait)

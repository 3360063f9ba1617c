"""A note on the recording itself: values the recorder refused at the call, rows it lost or dropped.

Not an alarm about the training (an extension code, ``recorder_losses``): a fact
about the data the other rules judged, so that "No problem detected" is never read as "everything
was recorded". Counts as of the view's step (``tuidiag.store.recorder_losses``).
"""

from __future__ import annotations

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.view import RunView
from tuidiag.format import EVENT_REJECTED
from tuidiag.store.recorder_losses import run_losses

SHOWN_NAMES = 5
"""Rejected names quoted in the evidence, with their reasons."""


def recorder_losses(view: RunView) -> Finding | None:
    """The recorder rejected values, lost or dropped rows, or hit its own errors."""
    losses = run_losses(view.run, view.at)
    if not losses:
        return None
    when = "in the whole run" if view.at is None else f"up to step {view.at}"
    evidence = [f"the recorder reports {when}: {losses.text()}"]
    rejected = [e for e in view.run.events if e.kind == EVENT_REJECTED and (view.at is None or e.step <= view.at)]
    for event in rejected[:SHOWN_NAMES]:
        evidence.append(f"{str(event.data.get('key'))[:80]!r} {str(event.data.get('reason'))[:160]} (first at step {event.step})")
    if len(rejected) > SHOWN_NAMES:
        evidence.append(f"and {len(rejected) - SHOWN_NAMES} more names (rejected_value events)")
    fix = "findings judge only what was recorded; README 'Logging values' says what log() and step() accept"
    return Finding("recorder_losses", "Not everything was recorded", 1.0, "info", evidence, fix, None)


RULES = [recorder_losses]

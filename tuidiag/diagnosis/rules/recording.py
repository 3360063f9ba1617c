"""A note on the recording itself: values the recorder refused at the call, rows it lost or dropped,
a run recorded beside a path that could not be used (degraded).

Not an alarm about the training (an extension code, ``recorder_losses``): a fact
about the data the other rules judged, so that "No problem detected" is never read as "everything
was recorded". Counts as of the view's step (``tuidiag.store.recorder_losses``).
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Claim, Evidence, Fact, Level, measure, quoted
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.view import RunView
from tuidiag.format import EVENT_REJECTED
from tuidiag.store.recorder_losses import METRIC_OF, manifest_losses, run_losses

SHOWN_NAMES = 5
"""Rejected names quoted in the evidence, with their reasons."""


def recorder_losses(view: RunView) -> Finding | None:
    """The recorder rejected values, lost or dropped rows, or hit its own errors."""
    losses = run_losses(view.run, view.at)
    if not losses:
        return None
    when = "in the whole run" if view.at is None else f"up to step {view.at}"
    evidence = [counts_line(view, f"the recorder reports {when}: {losses.text()}")]
    if losses.degraded:  # the path asked for could not be used: recorded beside it (run.json "degraded")
        evidence.append(Evidence(f"the run is degraded: {'; '.join(_quote(reason, 160) for reason in losses.degraded)}",
                                 Fact("manifest", "degraded", losses.degraded)))
    rejected = [e for e in view.run.events if e.kind == EVENT_REJECTED and (view.at is None or e.step <= view.at)]
    for event in rejected[:SHOWN_NAMES]:
        key, reason = _quote(event.data.get("key"), 80), _quote(event.data.get("reason"), 160)
        evidence.append(Evidence(f"rejected {key}: {reason} (first at step {event.step})",
                                 Fact("event", EVENT_REJECTED, (event.step, (str(event.data.get("key")),)))))
    if len(rejected) > SHOWN_NAMES:
        evidence.append(f"and {len(rejected) - SHOWN_NAMES} more names (rejected_value events)")
    fix = "findings judge only what was recorded; README 'Logging values' says what log() and step() accept"
    return Finding("recorder_losses", "Not everything was recorded", 1.0, "info", evidence, fix, None)


def counts_line(view: RunView, text: str) -> Evidence:
    """``text`` (which states the counts) backed by :func:`count_claims`, naming the steps the counts were last written at."""
    claims = count_claims(view)
    windows = list(dict.fromkeys(c.m.where for c in claims if isinstance(c, Level)))
    return Evidence(text + (f" (last counted at {', '.join(windows)})" if windows else ""), *claims)


def count_claims(view: RunView) -> list[Claim]:
    """What backs each count: the last ``recorder/*`` row of each rank up to the view's step, and run.json's stats."""
    claims: list[Claim] = []
    stated = manifest_losses(view.run.manifest) if view.at is None else None
    for key, metric in METRIC_OF.items():
        for rank in view.run.ranks:
            series = view.run.series(metric, rank)
            steps, values = series.steps, series.values
            if view.at is not None:
                cut = int(np.searchsorted(steps, view.at, side="right"))
                steps, values = steps[:cut], values[:cut]
            if len(steps):
                claims.append(Level(measure(metric, steps[-1:], values[-1:], "last", rank=rank if len(view.run.ranks) > 1 else None)))
        if stated is not None and getattr(stated, key):
            claims.append(Fact("manifest", f"stats.{key}", getattr(stated, key)))
    return claims


def _quote(value: object, limit: int) -> str:
    """Text from the run file, quoted as evidence lines quote names (never read as numbers)."""
    return quoted(str(value)[:limit].replace("'", "\u2019"))


RULES = [recorder_losses]

"""``diagnose(run, at=None, jobs=())``: run every rule over a run and rank what they found."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuidiag.diagnosis.calibration import calibrated
from tuidiag.diagnosis.combine import combine, healthy, resolve_fix_conflicts, unreadable
from tuidiag.diagnosis.finding import Diagnosis, Finding
from tuidiag.diagnosis.job_evidence import lr_evidence, nan_evidence, overfit_evidence
from tuidiag.diagnosis.lr_target import one_lr_target
from tuidiag.diagnosis.rules import RULES
from tuidiag.diagnosis.view import RunView
from tuidiag.store import Run
from tuidiag.store.job_results import JobRecord


def with_job_results(found: list[Finding], view: RunView) -> list[Finding]:
    """``found`` weighed, as new findings, against the newest LR-finder, NaN-hunt and overfit-one-batch results the view
    was given that count at its step (none made after it: a diagnosis as of step 400 cannot see a job of step 593)."""
    if (lr_find := view.job_result("lr_find")) is not None:
        found = lr_evidence(found, lr_find, view.lr_now)
    if (nan_hunt := view.job_result("nan_hunt")) is not None:
        found = nan_evidence(found, nan_hunt)
    if (overfit := view.job_result("overfit_batch")) is not None:
        found = overfit_evidence(found, overfit)
    return found


def run_rules(view: RunView, skipped: list[str]) -> list[Finding]:
    """Every rule's finding on ``view``; a rule that raises is named in ``skipped`` instead."""
    found: list[Finding] = []
    with np.errstate(all="ignore"):  # odd values (log of 0, empty slices) must not print warnings
        for rule in RULES:
            try:
                finding = rule(view)
            except Exception as exc:  # a rule must never take the diagnosis down
                skipped.append(f"rule {rule.__name__} failed: {type(exc).__name__}: {exc}")
                continue
            if finding is not None:
                found.append(finding)
    return found


def diagnose(run: Run, at: int | None = None, jobs: Sequence[JobRecord] = ()) -> Diagnosis:
    """Ranked findings for ``run`` (loaded already) as of step ``at`` (default: everything recorded).

    ``jobs``: the run's saved job results (:func:`tuidiag.store.job_results.job_records`);
    those made after ``at`` are not used. A pure function of its arguments: it reads no
    file and changes none of them, so it is cheap enough to call after every refresh and
    gives the same answer for the same data. A rule that fails on odd data is skipped
    and named in ``Diagnosis.skipped``.
    """
    view = RunView(run, at, jobs)
    if run.unreadable is not None:  # nothing read is nothing judged: never "no problem detected"
        return Diagnosis(run.name, view.last_step, [unreadable(view, list(run.warnings))], [], [])
    skipped = list(run.warnings)
    found = with_job_results(run_rules(view, skipped), view)
    alarms = calibrated(combine([f for f in found if f.severity != "info"]) or [healthy(view)], skipped)
    notes = sorted((f for f in found if f.severity == "info"), key=lambda f: -f.confidence)
    resolved = one_lr_target(resolve_fix_conflicts(alarms + notes))
    alarms, notes = resolved[: len(alarms)], resolved[len(alarms) :]
    return Diagnosis(run.name, view.last_step, alarms, notes, skipped)

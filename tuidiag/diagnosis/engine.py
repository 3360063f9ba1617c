"""``diagnose(run, at=None)``: run every rule over a run and rank what they found."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tuidiag.diagnosis.calibration import calibrated
from tuidiag.diagnosis.combine import combine, healthy, resolve_fix_conflicts
from tuidiag.diagnosis.finding import Diagnosis, Finding
from tuidiag.diagnosis.job_evidence import latest_results, lr_evidence, nan_evidence
from tuidiag.diagnosis.rules import RULES
from tuidiag.diagnosis.view import RunView
from tuidiag.store import Run, open_run
from tuidiag.store.job_results import step_from_run


def with_job_results(found: list[Finding], view: RunView) -> list[Finding]:
    """``found`` weighed against the newest LR-finder and NaN-hunt results of the run that
    count at the view's step (none made after it: a diagnosis as of step 400 cannot see a job of step 593)."""
    results = latest_results(view.run.path, view.at, step_from_run(view.run))
    if "lr_find" in results:
        found = lr_evidence(found, results["lr_find"], view.lr_now)
    if "nan_hunt" in results:
        found = nan_evidence(found, results["nan_hunt"])
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


def diagnose(run: Run | str | Path, at: int | None = None) -> Diagnosis:
    """Ranked findings for ``run`` as of step ``at`` (default: everything recorded).

    Pure function of the run's data: cheap enough to call after every refresh. A
    rule that fails on odd data is skipped and named in ``Diagnosis.skipped``.
    """
    run = run if isinstance(run, Run) else open_run(run)
    view = RunView(run, at)
    skipped = list(run.warnings)
    found = with_job_results(run_rules(view, skipped), view)
    alarms = calibrated(combine([f for f in found if f.severity != "info"]) or [healthy(view)], skipped)
    notes = sorted((f for f in found if f.severity == "info"), key=lambda f: -f.confidence)
    resolve_fix_conflicts(alarms + notes)
    return Diagnosis(run.name, view.last_step, alarms, notes, skipped)

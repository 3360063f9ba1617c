"""Job results as evidence: an LR-finder result sharpens the LR findings, a NaN-hunt result
becomes the evidence (and the fix) of the non-finite loss.

Applied after the rules have run, on the newest result of each job in ``RUN/jobs``
(:mod:`tuidiag.store.job_results`). Pure functions of the findings and the
results; reading the files is :func:`latest_results`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.stats import fmt
from tuidiag.store.job_results import StepOf, latest_result

AGREES = 3.0
"""Current LR this many times off the suggestion counts as the finder's agreement."""
ALONE = 30.0
"""This far off, the finder's result alone raises an LR finding."""


def latest_results(run_dir: Path, at: int | None = None, step_of: StepOf | None = None) -> dict[str, dict[str, Any]]:
    """The newest readable ``result`` of the LR finder and the NaN hunt that counts at step ``at``
    (every result when ``at`` is None; missing ones left out)."""
    found = {}
    for job in ("lr_find", "nan_hunt"):
        try:
            record = latest_result(run_dir, job, at, step_of)
        except OSError:
            continue
        if record is not None and isinstance(record.get("result"), dict):
            found[job] = record["result"]
    return found


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


def reliable_suggestion(result: dict[str, Any]) -> float | None:
    """The LR finder's suggested LR, unless it has none or flagged the sweep as unreliable."""
    return None if result.get("reliable") is False else _number(result.get("suggested_lr"))


def _by_code(findings: list[Finding], code: str) -> Finding | None:
    return next((f for f in findings if f.code == code), None)


def lr_evidence(findings: list[Finding], result: dict[str, Any], lr_now: float | None) -> list[Finding]:
    """Sharpen (or weaken) ``lr_too_high`` / ``lr_too_low`` with the LR finder's suggestion."""
    suggested = reliable_suggestion(result)
    current = lr_now or _number(result.get("run_lr")) or _number(result.get("optimizer_lr"))
    if suggested is None or current is None:
        return findings
    ratio = current / suggested
    text = f"LR finder: current LR {fmt(current)} is {_times(ratio)} the suggested {fmt(suggested)} (steepest descent of loss vs LR)"
    high, low = _by_code(findings, "lr_too_high"), _by_code(findings, "lr_too_low")
    for finding, agrees in ((high, ratio >= AGREES), (low, ratio <= 1 / AGREES)):
        if finding is None:
            continue
        finding.evidence.insert(0, text)
        finding.confidence = min(0.97, finding.confidence + 0.1) if agrees else finding.confidence * 0.6
        if agrees:
            finding.fix = f"set LR to about {fmt(suggested)} (LR finder), from {fmt(current)}; " + finding.fix
    if high is None and ratio >= ALONE:
        findings.append(_alone("lr_too_high", "Learning rate too high", text, f"reduce LR from {fmt(current)} to about {fmt(suggested)}"))
    if low is None and ratio <= 1 / ALONE:
        findings.append(_alone("lr_too_low", "Learning rate too low", text, f"raise LR from {fmt(current)} to about {fmt(suggested)}"))
    return findings


def _times(ratio: float) -> str:
    if 1 / AGREES < ratio < AGREES:
        return "within 3x of"
    return f"{ratio:.0f}x above" if ratio > 1 else f"{1 / ratio:.0f}x below"


def _alone(code: str, title: str, evidence: str, fix: str) -> Finding:
    return Finding(code, title, 0.55, "warning", [evidence, "the recorded curves alone did not show it yet"], fix, None)


def nan_evidence(findings: list[Finding], result: dict[str, Any]) -> list[Finding]:
    """Put the NaN hunt's culprit into the finding that explains the non-finite loss."""
    summary = result.get("summary")
    if not summary or result.get("verdict") in (None, "no_capture", "no_nonfinite"):
        return findings
    target = _by_code(findings, "nonfinite_loss") or next((f for f in findings if "nonfinite_loss" in f.related), None)
    if target is None:
        return findings
    step = result.get("step")
    target.evidence.insert(0, f"NaN hunt{f' (step {step})' if step is not None else ''}: {summary}")
    if result.get("verdict") == "batch":
        target.fix = "the batch itself was non-finite: validate and filter inputs before the forward pass; " + target.fix
    elif result.get("op"):
        target.fix = f"guard the operation {result['op']} in {result.get('module') or 'the model'} (clamp its input, add an epsilon); " + target.fix
    return findings

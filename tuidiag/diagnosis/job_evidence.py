"""Job results as evidence: an LR-finder result is weighed against the LR findings of the
curves, a NaN-hunt result becomes the evidence (and the fix) of the non-finite loss.

The LR finder is one sweep from one point of the training, so it is one piece of
evidence: an unreliable sweep is not used, a reliable one that disagrees never
weakens a well-supported curve finding, and a fix the curves do not support never
moves the LR more than 10x. Applied after the rules have run, on the newest result
of each job in ``RUN/jobs`` that counts at the diagnosis' step
(:mod:`tuidiag.store.job_results`). Pure functions of the findings and the
results; reading the files is :func:`latest_results`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.moves import LR_DOWN, LR_UP, Move
from tuidiag.text.numbers import fmt
from tuidiag.store.job_results import StepOf, latest_result
from tuidiag.text.safe import clean

AGREES = 3.0
"""Current LR this many times off the suggestion counts as the finder's agreement."""
ALONE = 30.0
"""This far off, the finder's result alone raises an LR finding (a weak one)."""
WELL_SUPPORTED = 0.75
"""A curve finding at least this confident keeps its confidence when the finder disagrees."""
CONFLICT_DISCOUNT = 0.8
"""A less supported curve finding the finder disagrees with keeps this share of its confidence."""
ALONE_CONFIDENCE = 0.45
"""Confidence of a finding from the finder alone: below the 0.5 at which live actions are offered."""
RULE_WORDS = {"steepest": "steepest descent of loss vs LR", "valley": "valley of loss vs LR", "min_div10": "minimum of loss vs LR, /10",
              "valley_floor": "valley of loss vs LR, or a tenth of where a flat curve starts to rise"}
"""How the evidence names the rule that made the suggestion (the result's ``rule``; older results: steepest)."""
MAX_UNSUPPORTED_STEP = 10.0
"""A fix the curves do not support never moves the LR further than this factor."""


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
    """The LR finder's suggested LR when the result says it is reliable after its stability check."""
    if result.get("reliable") is not True or not isinstance(result.get("stability"), dict):
        return None
    return _number(result.get("suggested_lr"))


def unreliable_reason(result: dict[str, Any]) -> str:
    """Why :func:`reliable_suggestion` gave nothing for ``result``."""
    if result.get("reliable") is False:
        return str(result.get("warning") or "it says it is not reliable")
    if not isinstance(result.get("stability"), dict):
        return "it was made without the stability check (an older tuidiag); run the LR finder again"
    return "it gave no suggestion"


def finder_verdict(current: float, suggested: float) -> str:
    """What a reliable suggestion says of ``current``: ``high``, ``low`` (3x or more off) or ``fine``."""
    return "high" if current / suggested >= AGREES else "low" if suggested / current >= AGREES else "fine"


def _by_code(findings: list[Finding], code: str) -> Finding | None:
    return next((f for f in findings if f.code == code), None)


def lr_evidence(findings: list[Finding], result: dict[str, Any], lr_now: float | None) -> list[Finding]:
    """Weigh the LR finder's result, as one piece of evidence, against ``lr_too_high`` / ``lr_too_low``.

    A reliable suggestion that agrees with a curve finding raises it and names the LR.
    One that disagrees never weakens a well-supported finding (it is listed after
    the curves' evidence) and weakens a less supported one a little; an unreliable
    one changes nothing but is named as not used. Without a curve finding, a reliable
    suggestion far off raises a weak finding whose fix moves the LR at most 10x.
    """
    high, low = _by_code(findings, "lr_too_high"), _by_code(findings, "lr_too_low")
    suggested = reliable_suggestion(result)
    if suggested is None:
        if result.get("suggested_lr") is not None:
            for finding in (f for f in (high, low) if f is not None):
                finding.evidence.append(f"LR finder result not used: {unreliable_reason(result)}")
        return findings
    current = lr_now or _number(result.get("run_lr")) or _number(result.get("optimizer_lr"))
    if current is None:
        return findings
    ratio, verdict = current / suggested, finder_verdict(current, suggested)
    name = clean(str(result.get("rule", "steepest")), 40)  # results saved before the rule was named used steepest
    rule = f"rule {name}: {RULE_WORDS[name]}" if name in RULE_WORDS else f"rule {name}"
    text = f"LR finder: current LR {fmt(current)} is {_times(ratio, verdict)} the suggested {fmt(suggested)} ({rule})"
    for finding, agrees in ((high, verdict == "high"), (low, verdict == "low")):
        if finding is None:
            continue
        if agrees:
            finding.evidence.insert(0, text)
            finding.confidence = min(0.97, finding.confidence + 0.1)
            _prefix_lr_clause(finding, LR_DOWN if finding is high else LR_UP,
                              f"set LR to about {fmt(suggested)} (LR finder), from {fmt(current)}")
        elif finding.confidence >= WELL_SUPPORTED:
            finding.evidence.append(f"{text}: it disagrees, and one sweep does not outweigh the curves above")
        else:
            finding.evidence.insert(0, f"{text}: it disagrees")
            finding.confidence *= CONFLICT_DISCOUNT
    if high is None and low is None and ratio >= ALONE:
        findings.append(_alone("lr_too_high", "Learning rate too high", text,
                               f"reduce LR 10x, from {fmt(current)} to {fmt(current / MAX_UNSUPPORTED_STEP)}, and watch the loss; "
                               "lower it further only if the loss improves"))
    if high is None and low is None and ratio <= 1 / ALONE:
        findings.append(_alone("lr_too_low", "Learning rate too low", text,
                               f"raise LR 10x, from {fmt(current)} to {fmt(current * MAX_UNSUPPORTED_STEP)}, and watch the loss; "
                               "raise it further only if the loss improves"))
    return findings


def _prefix_lr_clause(finding: Finding, move: Move, prefix: str) -> None:
    """Make ``prefix`` (the finder's LR) the clause of ``finding``'s fix that makes ``move``: it replaces the
    rule's own LR clause (one target, not two), or leads an untagged fix as part of it, so that the
    combiner, should it drop the move, drops the finder's words with it."""
    old = finding.moves.get(move)
    if not old or old not in str(finding.fix):
        finding.fix = f"{prefix}; {finding.fix}"
        return
    tagged = old != str(finding.fix)
    new = prefix if tagged else f"{prefix}; {old}"  # a tagged LR clause is replaced: one LR target, not two
    finding.fix = str(finding.fix).replace(old, new, 1)
    for other, clause in list(finding.moves.items()):
        if clause == old:  # an untagged fix: its one clause makes every move
            finding.moves[other] = new


def _times(ratio: float, verdict: str) -> str:
    if verdict == "fine":
        return "within 3x of"
    return f"{ratio:.0f}x above" if ratio > 1 else f"{1 / ratio:.0f}x below"


def _alone(code: str, title: str, evidence: str, fix: str) -> Finding:
    return Finding(code, title, ALONE_CONFIDENCE, "warning", [evidence, "the recorded curves alone do not show it"], fix, None,
                   tags={FINDER_ONLY})


FINDER_ONLY = "finder_only"
"""Tag of a finding raised by the LR finder alone, without the curves' support."""


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
    elif result.get("op") and result.get("created") is False:
        target.fix = (f"keep the non-finite value that {result['op']} in {result.get('module') or 'the model'} writes on purpose "
                      "(a -inf mask, a constant) out of the loss; ") + target.fix
    elif result.get("op"):
        target.fix = f"guard the operation {result['op']} in {result.get('module') or 'the model'} (clamp its input, add an epsilon); " + target.fix
    return findings

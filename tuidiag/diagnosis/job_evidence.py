"""Job results as evidence: an LR-finder result is weighed against the LR findings of the
curves, a NaN-hunt result becomes the evidence (and the fix) of the non-finite loss.

The LR finder is one sweep from one point of the training, so it is one piece of
evidence: an unreliable sweep is not used, a reliable one that disagrees never
weakens a well-supported curve finding, and a fix the curves do not support never
moves the LR more than 10x. Applied after the rules have run, on the newest result
of each job that counts at the diagnosis' step (:meth:`RunView.job_result`). Pure
functions of the findings and the results: they return new findings and read no file
(the caller reads ``RUN/jobs`` with :func:`tuidiag.store.job_results.job_records`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.fix_edit import drop_move
from tuidiag.diagnosis.lr_target import LRClause, finder_capped, finder_suggests
from tuidiag.diagnosis.moves import CAPACITY_UP, LR_DOWN, LR_UP, FixText, Move, fix_text
from tuidiag.text.numbers import fmt
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


def _index(findings: list[Finding], code: str) -> int | None:
    return next((i for i, f in enumerate(findings) if f.code == code), None)


def lr_evidence(findings: list[Finding], result: Mapping[str, Any], lr_now: float | None) -> list[Finding]:
    """Weigh the LR finder's result, as one piece of evidence, against ``lr_too_high`` / ``lr_too_low``:
    new findings (``findings`` are left as they were).

    A reliable suggestion that agrees with a curve finding raises it and names the LR.
    One that disagrees never weakens a well-supported finding (it is listed after
    the curves' evidence) and weakens a less supported one a little; an unreliable
    one changes nothing but is named as not used. Without a curve finding, a reliable
    suggestion far off raises a weak finding whose fix moves the LR at most 10x.
    """
    found = list(findings)
    high, low = _index(found, "lr_too_high"), _index(found, "lr_too_low")
    suggested = reliable_suggestion(result)
    if suggested is None:
        if result.get("suggested_lr") is not None:
            for i in (i for i in (high, low) if i is not None):
                found[i] = found[i].changed(evidence=[*found[i].evidence, f"LR finder result not used: {unreliable_reason(result)}"])
        return found
    current = lr_now or _number(result.get("run_lr")) or _number(result.get("optimizer_lr"))
    if current is None:
        return found
    ratio, verdict = current / suggested, finder_verdict(current, suggested)
    name = clean(str(result.get("rule", "steepest")), 40)  # results saved before the rule was named used steepest
    rule = f"rule {name}: {RULE_WORDS[name]}" if name in RULE_WORDS else f"rule {name}"
    text = f"LR finder: current LR {fmt(current)} is {_times(ratio, verdict)} the suggested {fmt(suggested)} ({rule})"
    for i, agrees in ((high, verdict == "high"), (low, verdict == "low")):
        if i is None:
            continue
        finding = found[i]
        if agrees:
            move = LR_DOWN if i == high else LR_UP
            fix, moves = _prefix_lr_clause(finding, move, finder_suggests(move, suggested, current))
            found[i] = finding.changed(evidence=[text, *finding.evidence], confidence=min(0.97, finding.confidence + 0.1),
                                       fix=fix, moves=moves)
        elif finding.confidence >= WELL_SUPPORTED:
            found[i] = finding.changed(evidence=[*finding.evidence, f"{text}: it disagrees, and one sweep does not outweigh the curves above"])
        else:
            found[i] = finding.changed(evidence=[f"{text}: it disagrees", *finding.evidence], confidence=finding.confidence * CONFLICT_DISCOUNT)
    if high is None and low is None and ratio >= ALONE:
        found.append(_alone("lr_too_high", "Learning rate too high", text,
                            fix_text((LR_DOWN, finder_capped(LR_DOWN, current, MAX_UNSUPPORTED_STEP, ", and watch the loss")),
                                     "lower it further only if the loss improves")))
    if high is None and low is None and ratio <= 1 / ALONE:
        found.append(_alone("lr_too_low", "Learning rate too low", text,
                            fix_text((LR_UP, finder_capped(LR_UP, current, MAX_UNSUPPORTED_STEP, ", and watch the loss")),
                                     "raise it further only if the loss improves")))
    return found


def _prefix_lr_clause(finding: Finding, move: Move, clause: LRClause) -> tuple[str, dict[Move, str]]:
    """``(fix, moves)`` of ``finding`` with ``clause`` (the finder's LR) as the clause that makes ``move``: it replaces
    the rule's own LR clause (one target, not two), or leads a fix that has none of its own, so that the
    combiner, should it drop the move, drops the finder's words with it."""
    moves = dict(finding.moves)
    old = moves.get(move)
    if old and old in str(finding.fix) and old != str(finding.fix):  # a tagged LR clause: replaced
        return str(finding.fix).replace(old, clause, 1), {**moves, move: clause}
    return f"{clause}; {finding.fix}", {**moves, move: clause}


def _times(ratio: float, verdict: str) -> str:
    if verdict == "fine":
        return "within 3x of"
    return f"{ratio:.0f}x above" if ratio > 1 else f"{1 / ratio:.0f}x below"


def _alone(code: str, title: str, evidence: str, fix: FixText) -> Finding:
    return Finding(code, title, ALONE_CONFIDENCE, "warning", [evidence, "the recorded curves alone do not show it"], fix, None,
                   tags={FINDER_ONLY})


FINDER_ONLY = "finder_only"
"""Tag of a finding raised by the LR finder alone, without the curves' support."""


def nan_hunt_counts(result: Mapping[str, Any] | None) -> bool:
    """Whether a NaN hunt's result is evidence (it replayed the failing step and says what it found): then the
    fix no longer offers the hunt; one that found no capture or no non-finite step is not."""
    return result is not None and bool(result.get("summary")) and result.get("verdict") not in (None, "no_capture", "no_nonfinite")


def _where(result: Mapping[str, Any]) -> str:
    """`` at FILE:LINE`` of the innermost user frame the hunt found for the op (its ``op_stack``), or ""."""
    stack = result.get("op_stack")
    if isinstance(stack, list) and stack and isinstance(stack[-1], str):
        return f" at {clean(stack[-1].split(' in ')[0])[:200]}"
    return ""


def nan_evidence(findings: list[Finding], result: Mapping[str, Any]) -> list[Finding]:
    """New findings with the NaN hunt's culprit put into the one that explains the non-finite loss (``findings`` are left as they were)."""
    found = list(findings)
    summary = result.get("summary")
    if not nan_hunt_counts(result):
        return found
    i = _index(found, "nonfinite_loss")
    i = i if i is not None else next((i for i, f in enumerate(found) if "nonfinite_loss" in f.related), None)
    if i is None:
        return found
    target, step = found[i], result.get("step")
    fix = target.fix
    if result.get("verdict") == "batch":
        fix = "the batch itself was non-finite: validate and filter inputs before the forward pass; " + fix
    elif result.get("op") and result.get("created") is False:
        fix = (f"keep the non-finite value that {result['op']} in {result.get('module') or 'the model'} writes on purpose "
               "(a -inf mask, a constant) out of the loss; ") + fix
    elif result.get("op"):
        fix = (f"guard the operation {result['op']} in {result.get('module') or 'the model'}{_where(result)} "
               "(clamp its input, add an epsilon); ") + fix
    found[i] = target.changed(evidence=[f"NaN hunt{f' (step {step})' if step is not None else ''}: {summary}", *target.evidence], fix=fix)
    return found


def overfit_passed(result: Mapping[str, Any] | None) -> bool:
    """Whether an overfit-one-batch result shows the model fitting a batch (passed, and not marked uninformative)."""
    return result is not None and result.get("passed") is True and result.get("informative") is not False


def overfit_evidence(findings: list[Finding], result: Mapping[str, Any]) -> list[Finding]:
    """New findings with a passed overfit-one-batch weighed in (``findings`` are left as they were): a model that
    fit one batch has the capacity to fit data, so a finding that advised more capacity no longer does, and says
    why with the job's figures; a failed or uninformative result changes nothing."""
    if not overfit_passed(result):
        return list(findings)
    initial, final = _number(result.get("initial_loss")), _number(result.get("final_loss"))
    lr, steps = _number(result.get("lr")), result.get("steps")
    figures = (f" from {fmt(initial)} to {fmt(final)}" if initial is not None and final is not None else "") + (
        f" in {steps} steps" if isinstance(steps, int) and not isinstance(steps, bool) else "")
    line = (f"overfit-one-batch passed: {clean(str(result.get('optimizer') or 'its optimizer'), 40)}"
            f"{f' at LR {fmt(lr)}' if lr is not None else ''} fit one batch{figures}: the model can fit data")
    return [drop_move(f, CAPACITY_UP, "not increasing capacity: the model fit one batch (overfit-one-batch passed)")
            .changed(evidence=[*f.evidence, line]) if CAPACITY_UP in f.moves else f for f in findings]

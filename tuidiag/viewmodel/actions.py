"""What the monitor offers to change in a live training, to try the diagnosis's fix without a restart.

Pure functions of the findings, the current LR and the newest LR-finder result; the
app shows the proposals, the user picks one, and it goes to the training as a
control request (:mod:`tuidiag.store.control_channel`, applied by :mod:`tuidiag.recorder.actions`).
The actions already applied, and whether the steps after them showed them, come from
the run's ``action`` events (:func:`past_actions`).
Where the evidence on the LR conflicts, no LR change is offered and the app says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuidiag.action_kinds import CHECKPOINT, CLIP_GRAD, SCALE_LR
from tuidiag.action_kinds import MAX_LR_FACTOR as MAX_FACTOR
from tuidiag.diagnosis import Diagnosis
from tuidiag.diagnosis.codes import live_codes
from tuidiag.diagnosis.moves import CLIP_TIGHTER, MIN_LR_UP
from tuidiag.diagnosis.moves import LR_DOWN as LOWER_LR
from tuidiag.diagnosis.moves import LR_UP as RAISE_LR
from tuidiag.diagnosis.job_evidence import FINDER_ONLY, finder_verdict, reliable_suggestion
from tuidiag.diagnosis.lr_target import LRClause, LRMove
from tuidiag.format import EVENT_ACTION
from tuidiag.store import Event
from tuidiag.store.job_results import latest_result
from tuidiag.text.numbers import fmt

LR_DOWN = live_codes(LOWER_LR)
"""Findings that make the monitor offer a lower LR (each code's ``live`` moves, :mod:`tuidiag.diagnosis.codes`)."""
LR_UP = live_codes(RAISE_LR)
"""Findings that make it offer a higher LR."""
CLIP = live_codes(CLIP_TIGHTER)
"""Findings that make it offer clipping, when the training does not clip yet."""
CONSIDERED = 0.5
"""Findings at least this confident shape the proposals."""


@dataclass(frozen=True)
class Proposal:
    """One change the user may apply: what it says, the control request's action and arguments."""

    label: str
    action: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PastAction:
    """A live action the training applied at ``step``; ``failed`` when the steps after it did not show it."""

    step: int
    failed: bool
    message: str


def past_actions(events: list[Event] | tuple[Event, ...]) -> list[PastAction]:
    """The run's live actions, oldest first, from its ``action`` events (an event without a
    status, from a tuidiag that did not check its actions, counts as applied)."""
    return [PastAction(e.step, e.data.get("status") == "failed", e.message) for e in events if e.kind == EVENT_ACTION]


def finder_suggestion(run_dir: Path) -> float | None:
    """The newest reliable LR-finder suggestion of the run, if any."""
    try:
        record = latest_result(run_dir, "lr_find")
    except OSError:
        return None
    return reliable_suggestion((record or {}).get("result") or {})


def _lr_proposal(lr: float | None, factor: float, why: str) -> Proposal:
    factor = float(f"{factor:.2g}")
    now = f" ({lr:.3g} -> {lr * factor:.3g})" if lr else ""
    return Proposal(f"scale the LR x{factor:g}{now}: {why}", SCALE_LR.name, {SCALE_LR.arg: factor})


def diagnosis_lr_move(diagnosis: Diagnosis) -> LRMove | None:
    """The LR move the diagnosis's printed fixes name (a target LR, or a step when the LR is unknown): the one
    every LR clause of the diagnosis names (:func:`tuidiag.diagnosis.lr_target.one_lr_target`); None when no
    printed fix names a number."""
    for finding in diagnosis.findings + diagnosis.notes:
        for move in (LOWER_LR, RAISE_LR):
            clause = finding.moves.get(move)
            if isinstance(clause, LRClause) and clause.lr.names_change and clause in str(finding.fix):
                return clause.lr
    return None


def _target_proposal(lr: float | None, target: LRMove) -> Proposal | str:
    """The LR change to the fix's own number: ``lr -> target`` (the factor exact, so the LR the action sets is
    the fix's), or the fix's step when neither the LR now nor the fix's names an LR; else why it gives none."""
    now = lr if lr else target.current
    if target.target is not None and now:
        factor = target.target / now
        if (factor >= 1) == (target.move == LOWER_LR):  # the LR moved since: the target is behind it
            return f"the LR now, {fmt(now)}, is already past the fixes' target {fmt(target.target)}"
        why = "the fix's target LR" + (" (the LR finder's suggestion)" if target.finder else "")
        if not 1 / MAX_FACTOR <= factor <= MAX_FACTOR:  # a live action moves the LR at most 100x: part of the way
            factor = min(max(factor, 1 / MAX_FACTOR), MAX_FACTOR)
            why += f"; a live action moves the LR at most {MAX_FACTOR:g}x, so this goes part of the way"
            return Proposal(f"scale the LR x{factor:g} ({fmt(now)} -> {fmt(now * factor)}, toward {fmt(target.target)}): {why}",
                            SCALE_LR.name, {SCALE_LR.arg: factor})
        return Proposal(f"scale the LR x{factor:.3g} ({fmt(now)} -> {fmt(target.target)}): {why}", SCALE_LR.name,
                        {SCALE_LR.arg: factor})
    if target.target is None and target.step is not None:
        return Proposal(f"scale the LR x{target.step:g}: the fix's step (the LR now is unknown)", SCALE_LR.name,
                        {SCALE_LR.arg: target.step})
    return "no fix names an LR"


def _lr_change(diagnosis: Diagnosis, codes: set[str], lr: float | None, suggested: float | None) -> Proposal:
    """The LR change to the LR the diagnosis's fixes name (:func:`diagnosis_lr_move`), so the action and the
    fix never disagree; where no fix names one (or the LR has moved past it), the curve findings' direction by
    the LR finder's factor where it agrees, else a default 3x step (the label says which, and why)."""
    named = diagnosis_lr_move(diagnosis)
    proposal = _target_proposal(lr, named) if named is not None else "no fix names an LR"
    if isinstance(proposal, Proposal):
        return proposal
    verdict = finder_verdict(lr, suggested) if lr and suggested else None
    if codes & set(LR_DOWN):
        use_finder = verdict == "high"
        factor = max(0.01, suggested / lr) if use_finder and lr and suggested else 0.3
        return _lr_proposal(lr, factor, f"the LR finder's suggestion ({proposal})" if use_finder
                            else f"3x lower, the default step ({proposal})")
    if codes & set(LR_UP):
        use_finder = verdict == "low"
        factor = min(100.0, suggested / lr) if use_finder and lr and suggested else 3.0
        return _lr_proposal(lr, factor, f"the LR finder's suggestion ({proposal})" if use_finder
                            else f"3x higher, the default step ({proposal})")
    return _lr_proposal(lr, 0.5, f"halve it (no LR finding now{'' if named is None else '; ' + proposal})")


def lr_conflict(diagnosis: Diagnosis, lr: float | None, suggested: float | None) -> str | None:
    """Why no LR change is offered: the evidence on the LR conflicts (None when it does not).

    The curves' findings (at least :data:`CONSIDERED` confident, or an LR finding at
    any confidence; none raised by the LR finder alone) and a reliable LR-finder
    suggestion must not point different ways; and where neither names a direction, no
    fix may advise a higher LR or LR floor (:data:`RAISED`), which the default halving would contradict.
    """
    claims = _curve_codes(diagnosis) | {f.code for f in diagnosis.findings
                                        if f.code in ("lr_too_high", "lr_too_low") and FINDER_ONLY not in f.tags}
    down, up = claims & set(LR_DOWN), claims & set(LR_UP)
    verdict = finder_verdict(lr, suggested) if lr and suggested else None
    finder = f"the LR finder (suggests {suggested:.3g}, the LR is {lr:.3g})" if verdict else ""
    if down and up:
        return f"the findings disagree on the LR ({', '.join(sorted(down))} say lower, {', '.join(sorted(up))} say higher)"
    if down and verdict in ("fine", "low"):
        return f"{', '.join(sorted(down))} say lower the LR, but {finder} says it is {'not too high' if verdict == 'fine' else 'too low'}"
    if up and verdict in ("fine", "high"):
        return f"{', '.join(sorted(up))} say raise the LR, but {finder} says it is {'not too low' if verdict == 'fine' else 'too high'}"
    if not down and not up and verdict == "low":
        return f"no finding asks for a lower LR and {finder} says it is too low; the curves do not confirm it yet"
    raising = sorted({f.code for f in diagnosis.findings + diagnosis.notes
                      if any(m.setting in RAISED and m.direction > 0 for m in f.moves)})
    if not down and not up and raising and verdict is None:
        return f"{', '.join(raising)} advise a higher LR or LR floor and name no LR to set; the default halving would go against it"
    return None


RAISED = (RAISE_LR.setting, MIN_LR_UP.setting)
"""Settings whose raise, in any finding's fix, rules out the default halving of the LR."""


def _curve_codes(diagnosis: Diagnosis) -> set[str]:
    return {f.code for f in diagnosis.findings if f.confidence >= CONSIDERED and FINDER_ONLY not in f.tags}


def propose(diagnosis: Diagnosis, lr: float | None, suggested: float | None, clipping: bool) -> list[Proposal]:
    """The changes worth offering for this diagnosis, most useful first; a checkpoint always.

    No LR change is offered where the evidence conflicts (:func:`lr_conflict`); the LR
    finder's value is used only where the curves agree with it."""
    codes = _curve_codes(diagnosis)
    found = [] if lr_conflict(diagnosis, lr, suggested) is not None else [_lr_change(diagnosis, codes, lr, suggested)]
    if codes & set(CLIP) and not clipping:
        found.append(Proposal("clip gradients at global norm 1.0 from the next step", CLIP_GRAD.name, {CLIP_GRAD.arg: 1.0}))
    found.append(Proposal("save a checkpoint now (RUN/checkpoints/step<N>.pt)", CHECKPOINT.name, {}))
    return found

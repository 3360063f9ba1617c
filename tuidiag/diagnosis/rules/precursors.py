"""What came before a non-finite loss: did the loss or the gradient norm grow first?

A training whose steps overshoot diverges: the loss climbs above anything it showed
before, or the gradient norm grows by an order of magnitude, and only then turns
non-finite. A loss that is finite and in its usual range one step and NaN the next,
with gradients in their usual range, did not diverge: an operation produced the
non-finite value on its own (``log`` of a zero, a division by zero, ``sqrt`` of a
negative), a numerical fault in the loss or the model, and lowering the LR does not
fix it. This module tells the two apart, with the evidence line that shows which.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuidiag.diagnosis.evidence import Evidence, Level, Measure, measure
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_TOTAL, LOSS

BEFORE = 10
"""The steps right before the first non-finite loss that are searched for growth."""
MIN_BASELINE = 10
"""Finite steps needed before those to know the usual range (fewer: the question stays open)."""
GRAD_GROWTH = 10.0
"""A gradient norm this many times its usual median grew (the exploding-gradients rule's own factor)."""
LOSS_MARGIN = 0.5
"""A loss above its earlier peak by this share of the peak's distance from the median climbed out of its range."""


@dataclass(frozen=True)
class Precursors:
    """Whether the loss or the gradient norm grew in the steps before the first non-finite loss, with the line that shows it."""

    step: int
    """The first step with a non-finite loss."""
    loss_grew: bool
    grad_grew: bool
    evidence: Evidence
    grew_from: int | None
    """The first step of the growth (``None`` when nothing grew)."""

    @property
    def grew(self) -> bool:
        """Something grew before the loss turned non-finite: it diverged."""
        return self.loss_grew or self.grad_grew


def first_nonfinite(view: RunView) -> int | None:
    """Index into ``view.loss`` of the first non-finite loss, ``None`` when all are finite."""
    bad = ~np.isfinite(view.loss[1])
    return int(np.argmax(bad)) if bad.any() else None


def _grad_before(view: RunView, at: int) -> tuple[Measure, Measure, int | None] | None:
    """(usual median, largest of the last steps, first step above ``GRAD_GROWTH`` x the median) of the gradient norm before ``at``."""
    steps, g = view.grad_total
    keep = steps < at
    steps, g = steps[keep], g[keep]
    if np.isfinite(g).sum() < MIN_BASELINE + 1:
        return None
    k = min(BEFORE, len(g) - MIN_BASELINE)
    usual = measure(GRAD_NORM_TOTAL, steps[:-k], g[:-k], "median")
    last = measure(GRAD_NORM_TOTAL, steps[-k:], g[-k:], "max")
    over = np.flatnonzero(g[-k:] > GRAD_GROWTH * usual.value)
    return usual, last, int(steps[-k:][over[0]]) if len(over) else None


def before_nonfinite(view: RunView, i: int) -> Precursors | None:
    """What the loss and the gradient norm did before ``view.loss`` turned non-finite at index ``i``.

    ``None`` when fewer than ``MIN_BASELINE + 1`` finite losses come first: too little to
    know the usual range, so the question stays open.
    """
    steps, values = view.loss
    at = int(steps[i])
    ok = np.isfinite(values[:i])
    b_steps, before = steps[:i][ok], values[:i][ok]
    if len(before) < MIN_BASELINE + 1:
        return None
    k = min(BEFORE, len(before) - MIN_BASELINE)
    peak, usual = (measure(LOSS, b_steps[:-k], before[:-k], stat) for stat in ("max", "median"))
    last = measure(LOSS, b_steps[-k:], before[-k:], "max")
    limit = peak.value + LOSS_MARGIN * (peak.value - usual.value)
    loss_grew = bool(last.value > limit)
    loss_from = int(b_steps[-k:][np.argmax(before[-k:] > limit)]) if loss_grew else None
    claims: list = [Level(last), Level(peak), Level(usual)]
    text = (f"over the {k} steps before, the loss peaked at {fmt(last.value)} ({last.where}), against a peak of {fmt(peak.value)} "
            f"and a median of {fmt(usual.value)} over {peak.where}")
    grad = _grad_before(view, at)
    grad_grew, grad_from = False, None
    if grad is not None:
        g_usual, g_last, grad_from = grad
        grad_grew = grad_from is not None
        claims += [Level(g_last), Level(g_usual)]
        text += (f"; the gradient norm peaked at {fmt(g_last.value)} ({g_last.where}), against a median of {fmt(g_usual.value)} "
                 f"over {g_usual.where}")
    return Precursors(at, loss_grew, grad_grew, Evidence(f"{text}: {_verdict(loss_grew, grad_grew, grad is not None)}", *claims,
                                                         refs=(LOSS_MARGIN, GRAD_GROWTH)), _first(loss_from, grad_from))


def _first(*steps: int | None) -> int | None:
    known = [s for s in steps if s is not None]
    return min(known) if known else None


def _verdict(loss_grew: bool, grad_grew: bool, with_grad: bool) -> str:
    """What the line concludes: which series ran away first (the loss more than half its peak-to-median spread above its
    earlier peak, the gradient norm above 10x its median), or that neither did."""
    ran = [what for what, grew in (("the loss ran above its earlier peak by more than half its spread", loss_grew),
                                   ("the gradient norm ran above 10x its median", grad_grew)) if grew]
    if ran:
        return f"{' and '.join(ran)} first: a divergence"
    grad = ", the gradient norm under 10x its median" if with_grad else ""
    return (f"nothing ran away first (the loss within half its spread above its earlier peak{grad}): "
            "a numerical fault, not a divergence")


def runaway_from(view: RunView) -> int | None:
    """The first step of the runaway that ended in a non-finite loss (``None``: no such runaway, or no non-finite loss)."""
    i = first_nonfinite(view)
    before = before_nonfinite(view, i) if i is not None else None
    return before.grew_from if before is not None and before.grew else None


def calm_loss(view: RunView) -> tuple[np.ndarray, np.ndarray, int | None]:
    """The loss before the runaway that ended in a non-finite value, with that runaway's first step (the whole loss and
    ``None`` without one): a window's median that spans the runaway would hide it, so windows end before it."""
    steps, values = view.loss
    since = runaway_from(view)
    return (steps, values, None) if since is None else (steps[steps < since], values[steps < since], since)

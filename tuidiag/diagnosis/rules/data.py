"""Rules read from input and target health: bad inputs, class imbalance."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView


SEVERE_STD, SEVERE_ABS = 100.0, 1e3
"""Inputs this spread out saturate or blow up any layer fed with them."""


def _scale_problem(view: RunView) -> tuple[str | None, bool]:
    """Evidence that inputs are far from normalized, and whether it is severe."""
    mean, std, absmax = (median(view.series(f"input/{k}")[1]) for k in ("mean", "std", "abs_max"))
    if not np.isfinite(std) or not (abs(mean) > 5 or std > 20 or std < 1e-3 or absmax > 1e4):
        return None, False
    text = f"inputs far from normalized: median mean {fmt(mean)}, std {fmt(std)}, abs-max {fmt(absmax)} (expect ~0, ~1)"
    return text, bool(std > SEVERE_STD or absmax > SEVERE_ABS)


def bad_input_data(view: RunView) -> Finding | None:
    """Inputs are non-finite, extreme or far from normalized."""
    steps, nonfinite = view.series("input/nonfinite")
    evidence, first, confidence = [], None, 0.0
    bad = np.flatnonzero(nonfinite > 0)
    if len(bad):
        first = int(steps[bad[0]])
        shown = ", ".join(str(s) for s in steps[bad[:5]])
        evidence.append(f"{len(bad)} batches contain non-finite inputs (up to {int(nonfinite.max())} values), at steps {shown}")
        confidence = 0.9
    scale, severe = _scale_problem(view)
    if scale:
        evidence.append(scale)
        confidence = max(confidence, 0.9 if severe else 0.7)
        first = first if first is not None else int(view.series("input/std")[0][0])
    if not evidence:
        return None
    fix = "validate batches (assert torch.isfinite(x).all()), filter or repair bad samples, and normalize inputs to zero mean and unit variance"
    finding = Finding("bad_input_data", "Bad input data", confidence, "critical" if len(bad) or severe else "warning", evidence, fix, first)
    finding.tags = {"severe"} if len(bad) or severe else set()
    return finding


def class_imbalance(view: RunView) -> Finding | None:
    """One class dominates the targets passed to ``rec.batch``."""
    steps, share = view.series("target/majority_share")
    if len(share) < 20:
        return None
    level = median(share)
    if level < 0.9:
        return None
    evidence = [f"the most frequent class is {level:.0%} of a typical batch (median over {len(share)} batches)"]
    fix = "re-balance: class weights in the loss (CrossEntropyLoss(weight=...)), a weighted sampler, or report per-class metrics"
    return Finding("class_imbalance", "Class imbalance in the targets", 0.85, "warning", evidence, fix, int(steps[0]))


RULES = [bad_input_data, class_imbalance]

"""Rules read from input and target health: bad inputs, class imbalance."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView


def bad_input_data(view: RunView) -> Finding | None:
    """Inputs are non-finite, extreme or far from normalized."""
    steps, nonfinite = view.series("input/nonfinite")
    evidence, severity, first, confidence = [], "warning", None, 0.0
    bad = np.flatnonzero(nonfinite > 0)
    if len(bad):
        first = int(steps[bad[0]])
        shown = ", ".join(str(s) for s in steps[bad[:5]])
        evidence.append(f"{len(bad)} batches contain non-finite inputs (up to {int(nonfinite.max())} values), at steps {shown}")
        severity, confidence = "critical", 0.9
    mean, std, absmax = (median(view.series(f"input/{k}")[1]) for k in ("mean", "std", "abs_max"))
    if np.isfinite(std) and (abs(mean) > 5 or std > 20 or std < 1e-3 or absmax > 1e4):
        evidence.append(f"inputs far from normalized: median mean {fmt(mean)}, std {fmt(std)}, abs-max {fmt(absmax)} (expect ~0, ~1)")
        confidence = max(confidence, 0.7)
        first = first if first is not None else int(view.series("input/std")[0][0])
    if not evidence:
        return None
    fix = "validate batches (assert torch.isfinite(x).all()), filter or repair bad samples, and normalize inputs to zero mean and unit variance"
    return Finding("bad_input_data", "Bad input data", confidence, severity, evidence, fix, first)


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
    return Finding("class_imbalance", "Class imbalance in the targets", 0.7, "warning", evidence, fix, int(steps[0]))


RULES = [bad_input_data, class_imbalance]

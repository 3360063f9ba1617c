"""Ranking findings where symptoms overlap: name the cause once, list its symptoms under it.

Exploding gradients, a NaN loss, heavy clipping and dead ReLUs often share one
cause, an LR that is too high. When a cause and its symptoms fire together the
cause is ranked first, with more confidence, and the symptoms follow as
alternatives with less; the user sees one story instead of unrelated alarms.
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView

EXPLAINS: dict[str, tuple[str, ...]] = {
    "bad_input_data": ("nonfinite_loss", "loss_spikes", "exploding_gradients", "lr_too_high"),
    "lr_too_high": ("exploding_gradients", "nonfinite_loss", "over_clipping", "dead_relu", "loss_spikes"),
    "vanishing_gradients": ("activation_saturation", "lr_too_low", "underfitting"),
    "lr_too_low": ("underfitting",),
    "lr_decayed_too_early": ("underfitting",),
}
SYMPTOM_DISCOUNT = 0.6
CAUSE_BOOST = 0.05


def combine(findings: list[Finding]) -> list[Finding]:
    """Rank by confidence after letting causes absorb the symptoms they explain."""
    by_code = {f.code: f for f in findings}
    for cause, symptoms in EXPLAINS.items():
        parent = by_code.get(cause)
        if parent is None or parent.severity == "info":
            continue
        for code in symptoms:
            child = by_code.get(code)
            if child is None or child.code in parent.related or parent.code in child.related:
                continue
            if cause == "bad_input_data" and code == "lr_too_high" and "non-finite" not in " ".join(parent.evidence):
                continue
            parent.related.append(code)
            parent.confidence = min(0.97, parent.confidence + CAUSE_BOOST)
            child.confidence = min(child.confidence, parent.confidence) * SYMPTOM_DISCOUNT
            parent.evidence.append(f"also seen: {child.title} (listed below)")
            if parent.first_step is None:
                parent.first_step = child.first_step
    return sorted(findings, key=lambda f: -f.confidence)


def healthy(view: RunView) -> Finding:
    """The single finding of a run with nothing wrong, with its key health figures."""
    evidence = []
    steps, loss = view.loss
    good = loss[np.isfinite(loss)]
    if len(good) >= 2:
        evidence.append(f"loss {fmt(median(good[:10]))} -> {fmt(median(good[-10:]))} over {len(good)} steps")
    grad = median(view.grad_total[1])
    if np.isfinite(grad):
        evidence.append(f"gradient norm median {fmt(grad)} (healthy range 0.1-10)")
    _, val = view.val_loss
    if len(val):
        evidence.append(f"validation loss {fmt(float(val[-1]))} at the last evaluation")
    if not evidence:
        evidence.append("not enough data yet to judge")
    return Finding("healthy", "No problem detected", 0.8 if view.n_steps >= 100 else 0.5, "info", evidence, "none", None)

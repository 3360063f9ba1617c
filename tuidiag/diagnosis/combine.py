"""Ranking findings where symptoms overlap: name the cause once, list its symptoms under it.

Exploding gradients, a NaN loss, heavy clipping and dead ReLUs often share one
cause, an LR that is too high. When a cause and its symptoms fire together the
cause is ranked first, with more confidence, and the symptoms follow as
alternatives with less; the user sees one story instead of unrelated alarms.
Causes are visited strongest first, so where two findings could explain each
other (exploding gradients and a too-high LR) the better-supported one leads.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView
from tuidiag.store.recorder_losses import run_losses

EXPLAINS: dict[str, tuple[str, ...]] = {
    "bad_input_data": ("nonfinite_loss", "loss_spikes", "exploding_gradients", "lr_too_high", "dead_relu", "activation_saturation",
                       "vanishing_gradients", "lr_too_low", "underfitting", "dead_layer"),
    "exploding_gradients": ("nonfinite_loss", "lr_too_high", "over_clipping", "loss_spikes", "dead_relu"),
    "lr_too_high": ("exploding_gradients", "nonfinite_loss", "over_clipping", "dead_relu", "loss_spikes", "underfitting",
                    "vanishing_gradients", "activation_saturation"),
    "dead_relu": ("dead_layer", "lr_too_low", "underfitting", "vanishing_gradients"),
    "activation_saturation": ("vanishing_gradients", "lr_too_low", "underfitting"),
    "vanishing_gradients": ("lr_too_low", "underfitting"),
    "over_clipping": ("lr_too_low", "underfitting"),
    "lr_decayed_too_early": ("underfitting", "lr_too_low", "frozen_val_metric"),
    "lr_too_low": ("underfitting",),
    "dead_layer": ("underfitting",),
    "train_mode_bug": ("underfitting",),
    "loss_spikes": ("exploding_gradients",),
    "rank_nonfinite_first": ("nonfinite_loss", "lr_too_high", "bad_input_data", "exploding_gradients", "loss_spikes", "rank_desync"),
    "rank_desync": ("loss_spikes", "lr_too_high", "exploding_gradients"),
    "straggler_rank": ("data_loading_bottleneck",),
}
"""cause -> symptoms it explains when both fire."""

Condition = Callable[[Finding, Finding], bool]
CONDITIONS: dict[tuple[str, str], Condition] = {
    ("bad_input_data", "lr_too_high"): lambda cause, _: "severe" in cause.tags,
    ("bad_input_data", "exploding_gradients"): lambda cause, _: "severe" in cause.tags,
    ("exploding_gradients", "lr_too_high"): lambda cause, _: "from_start" in cause.tags,
    ("lr_too_high", "exploding_gradients"): lambda _, symptom: "from_start" not in symptom.tags,
    ("loss_spikes", "exploding_gradients"): lambda _, symptom: "isolated" in symptom.tags,
    ("rank_nonfinite_first", "lr_too_high"): lambda cause, _: "bad_input" in cause.tags,
}
"""Pairs that hold only under a condition on the cause or the symptom."""
SYMPTOM_DISCOUNT = 0.6
CAUSE_BOOST = 0.05
CAP = 0.97


def _absorb(cause: Finding, symptom: Finding) -> None:
    cause.related.append(symptom.code)
    cause.confidence = min(CAP, cause.confidence + CAUSE_BOOST)
    symptom.confidence = min(symptom.confidence, cause.confidence) * SYMPTOM_DISCOUNT
    cause.evidence.append(f"also seen: {symptom.title} (listed below)")
    if cause.first_step is None:
        cause.first_step = symptom.first_step


def combine(findings: list[Finding]) -> list[Finding]:
    """Rank by confidence after letting causes absorb the symptoms they explain."""
    by_code = {f.code: f for f in findings}
    absorbed: set[str] = set()
    for cause in sorted(findings, key=lambda f: -f.confidence):
        if cause.severity == "info":
            continue
        for code in EXPLAINS.get(cause.code, ()):
            symptom = by_code.get(code)
            if symptom is None or code in absorbed or cause.code in symptom.related or code in cause.related:
                continue
            if not CONDITIONS.get((cause.code, code), lambda *_: True)(cause, symptom):
                continue
            _absorb(cause, symptom)
            absorbed.add(code)
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
    if losses := run_losses(view.run, view.at):
        evidence.append(f"judged on what was recorded; the recorder reports: {losses.text()} (see the notes)")
    return Finding("healthy", "No problem detected", 0.8 if view.n_steps >= 100 else 0.5, "info", evidence, fix="none", first_step=None)

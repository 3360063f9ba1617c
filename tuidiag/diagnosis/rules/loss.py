"""Rules read mainly from the loss curve: non-finite loss, spikes that recover."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import after_quiet, lr_change
from tuidiag.diagnosis.stats import fmt, local_baseline, median, robust_sigma
from tuidiag.diagnosis.view import RunView

SPIKE_Z = 8.0
SPIKE_WINDOW = 51
SPIKE_HORIZON = 100_000
"""Spikes are looked for in the newest steps only (a monitor cares about the recent ones; it keeps long runs cheap)."""


def _nonfinite_evidence(view: RunView, steps: np.ndarray, values: np.ndarray, i: int) -> list[str]:
    """Where the loss went non-finite, what it was before, and the gradients leading up to it."""
    evidence = [f"loss is {values[i]} at step {steps[i]}; {int((~np.isfinite(values)).sum())} of {len(values)} recorded steps are non-finite"]
    if i > 0:
        evidence.append(f"last finite loss {fmt(values[i - 1])} at step {steps[i - 1]}")
    g_steps, g = view.grad_total
    before = g[(g_steps < steps[i]) & (g_steps >= steps[i] - 20)]
    if len(before) and np.isfinite(before).any():
        evidence.append(f"gradient norm in the 20 steps before: max {fmt(np.nanmax(before))}, run median {fmt(median(g[g_steps < steps[i]]))}")
    for event in view.events("nonfinite")[:1]:
        if event.data.get("params"):
            evidence.append(f"first non-finite gradients (step {event.step}) in {', '.join(event.data['params'][:5])}")
    return evidence


def nonfinite_loss(view: RunView) -> Finding | None:
    """The loss became NaN or Inf."""
    steps, values = view.loss
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    evidence = _nonfinite_evidence(view, steps, values, i)
    fix = (
        f"NaN within the first steps: reduce LR {lr_change(view, 0.1)}, add warmup, check weight init"
        if steps[i] < 100
        else "add torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) and reduce LR; if gradients were normal "
        "before the NaN, clamp log/div inputs in the loss (e.g. torch.log(x.clamp_min(1e-7)))"
    )
    return Finding("nonfinite_loss", "Loss became NaN/Inf", 0.9, "critical", evidence, fix, int(steps[i]))


def _spikes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Indices of isolated upward spikes of the log loss that recover, their z-scores, and the noise level."""
    logs = np.log(values)
    residual = logs - local_baseline(logs, SPIKE_WINDOW)
    sigma = robust_sigma(residual)
    if sigma == 0:
        return np.empty(0, np.int64), np.empty(0), 0.0
    z = residual / sigma
    spikes = np.flatnonzero((z > SPIKE_Z) & (residual > np.log(2.0)))
    spikes = spikes[spikes + 13 < len(values)]
    if not len(spikes):
        return spikes, z[spikes], sigma
    after = np.lib.stride_tricks.sliding_window_view(residual, 10)[spikes + 3]
    recovered = spikes[np.median(after, axis=1) < 2 * sigma]
    return recovered, z[recovered], sigma


def loss_spikes(view: RunView) -> Finding | None:
    """Isolated loss spikes that recover: atypical batches."""
    steps, values = after_quiet(view, *view.loss)
    steps, values = steps[-SPIKE_HORIZON:], values[-SPIKE_HORIZON:]
    if len(values) < 60 or not np.isfinite(values).all() or (values <= 0).any():
        return None
    found, z, sigma = _spikes(values)
    if not len(found):
        return None
    shown = ", ".join(f"step {steps[i]} ({fmt(values[i])}, z={zi:.0f})" for i, zi in zip(found[:5], z[:5]))
    evidence = [f"{len(found)} isolated spike(s) that recovered: {shown}", f"typical step-to-step noise {fmt(float(np.expm1(sigma)) * 100)}%"]
    gaps = np.diff(steps[found])
    if len(gaps) >= 2 and np.ptp(gaps) <= 0.1 * np.median(gaps):
        evidence.append(f"spikes recur every {int(np.median(gaps))} steps: a periodic bad batch or shard")
    conf = min(0.9, 0.7 + 0.05 * len(found))
    fix = "inspect the batches at those steps (corrupt or mislabeled samples); clip gradients; consider a robust loss (Huber)"
    return Finding("loss_spikes", "Loss spikes that recover (atypical batches)", conf, "warning", evidence, fix, int(steps[found[0]]))


RULES = [nonfinite_loss, loss_spikes]

"""Rules read mainly from the loss curve: non-finite loss, spikes, LR too high/low, LR decayed too early."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import after_quiet, loss_drop, lr_change, recent, update_ratio
from tuidiag.diagnosis.stats import fmt, median, robust_sigma, rolling_median
from tuidiag.diagnosis.view import RunView


def nonfinite_loss(view: RunView) -> Finding | None:
    """The loss became NaN or Inf."""
    steps, values = view.loss
    bad = ~np.isfinite(values)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    evidence = [f"loss is {values[i]} at step {steps[i]}; {int(bad.sum())} of {len(values)} recorded steps are non-finite"]
    if i > 0:
        evidence.append(f"last finite loss {fmt(values[i - 1])} at step {steps[i - 1]}")
    g_steps, g = view.grad_total
    before = g[(g_steps < steps[i]) & (g_steps >= steps[i] - 20)]
    if len(before):
        evidence.append(f"gradient norm in the 20 steps before: max {fmt(np.nanmax(before))}, run median {fmt(median(g[g_steps < steps[i]]))}")
    for event in view.events("nonfinite")[:1]:
        if event.data.get("params"):
            evidence.append(f"first non-finite gradients (step {event.step}) in {', '.join(event.data['params'][:5])}")
    early = steps[i] < 100
    fix = (
        f"NaN within the first steps: reduce LR {lr_change(view, 0.1)}, add warmup, check weight init"
        if early
        else "add torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0) and reduce LR; if gradients were normal "
        "before the NaN, clamp log/div inputs in the loss (e.g. torch.log(x.clamp_min(1e-7)))"
    )
    return Finding("nonfinite_loss", "Loss became NaN/Inf", 0.9, "critical", evidence, fix, int(steps[i]))


def loss_spikes(view: RunView) -> Finding | None:
    """Isolated loss spikes that recover: atypical batches."""
    steps, values = after_quiet(view, *view.loss)
    if len(values) < 60 or not np.isfinite(values).all() or (values <= 0).any():
        return None
    logs = np.log(values)
    residual = logs - rolling_median(logs, 51)
    sigma = robust_sigma(residual)
    if sigma == 0:
        return None
    z = residual / sigma
    spikes = np.flatnonzero((z > 8) & (residual > np.log(2.0)))
    recovered = [i for i in spikes if i + 10 < len(values) and median(residual[i + 3 : i + 13]) < 2 * sigma]
    if not recovered:
        return None
    shown = ", ".join(f"step {steps[i]} ({fmt(values[i])}, z={z[i]:.0f})" for i in recovered[:5])
    evidence = [f"{len(recovered)} isolated spike(s) that recovered: {shown}", f"typical step-to-step noise {fmt(float(np.expm1(sigma)) * 100)}%"]
    conf = min(0.85, 0.55 + 0.05 * len(recovered))
    fix = "inspect the batches at those steps (corrupt or mislabeled samples); clip gradients; consider a robust loss (Huber)"
    return Finding("loss_spikes", "Loss spikes that recover (atypical batches)", conf, "warning", evidence, fix, int(steps[recovered[0]]))


def lr_too_high(view: RunView) -> Finding | None:
    """Loss oscillates or diverges because steps overshoot."""
    score, evidence, first = 0.0, [], None
    ratio, n_ratio = update_ratio(view)
    if n_ratio and ratio > 1e-2:
        score += 1.0
        evidence.append(f"update/weight ratio median {fmt(ratio)} (healthy ~1e-3; above 1e-2 overshoots)")
    elif n_ratio and ratio > 4e-3:
        score += 0.4
        evidence.append(f"update/weight ratio median {fmt(ratio)} (high; healthy ~1e-3)")
    steps, values = view.loss
    finite = np.isfinite(values)
    bad_at = int(np.argmax(~finite)) if (~finite).any() else None
    g_steps, g = after_quiet(view, *view.grad_total)
    if bad_at is not None or (len(g) > 20 and median(recent(g, 0.1, 10)) > 20 * median(g[: max(10, len(g) // 5)])):
        if not _bad_input_before(view, steps[bad_at] if bad_at is not None else None):
            score += 0.8
            first = int(steps[bad_at]) if bad_at is not None else None
            evidence.append("training diverged: " + (f"loss non-finite from step {steps[bad_at]}" if bad_at is not None else "gradient norms grew >20x"))
    rising = _loss_rising(view)
    if rising:
        score += 0.6
        evidence.append(rising)
    clipped = view.series("grad/clipped")[1]
    if len(clipped) >= 50 and clipped[-max(50, len(clipped) // 5):].mean() > 0.8:
        score += 0.3
        evidence.append(f"gradient clipping active on {clipped[-max(50, len(clipped) // 5):].mean():.0%} of recent steps")
    if score < 1.0:
        return None
    fix = f"reduce LR {lr_change(view, 0.1)} (3-10x lower); add warmup over the first {max(100, view.n_steps // 20)} steps; clip gradients at 1.0"
    return Finding("lr_too_high", "Learning rate too high", min(0.95, 0.45 + 0.25 * score), "critical" if bad_at is not None else "warning", evidence, fix, first)


def _bad_input_before(view: RunView, step: int | None) -> bool:
    steps, values = view.series("input/nonfinite")
    if step is None or not len(values):
        return False
    return bool((values[(steps <= step) & (steps >= step - 1)] > 0).any())


def _loss_rising(view: RunView) -> str | None:
    steps, values = after_quiet(view, *view.loss)
    values = values[np.isfinite(values)]
    if len(values) < 50:
        return None
    smooth = rolling_median(values, max(11, len(values) // 20))
    best, now = float(np.min(smooth[: int(len(smooth) * 0.8)])), median(recent(values))
    if now > 1.3 * best and now - best > 0.05:
        return f"loss rose from a best of {fmt(best)} to {fmt(now)} (+{(now / best - 1):.0%}) and did not come back"
    return None


def lr_too_low(view: RunView) -> Finding | None:
    """Loss falls far too slowly while gradients are healthy: steps are too small."""
    steps, values = view.loss
    if view.n_steps < 100 or not np.isfinite(values).all():
        return None
    drop = loss_drop(values)
    ratio, n_ratio = update_ratio(view)
    grad = median(view.grad_total[1])
    if drop > 0.2 or not (grad > 1e-3):
        return None
    evidence = [f"loss fell only {drop:.1%} over {view.n_steps} steps (from {fmt(median(values[:10]))} to {fmt(median(recent(values)))})",
                f"gradient norm median {fmt(grad)} is not small: gradients are there, steps are too small"]
    if n_ratio and ratio < 1e-5:
        evidence.insert(0, f"update/weight ratio median {fmt(ratio)} (healthy ~1e-3; below 1e-5 barely moves the weights)")
        confidence = 0.85
    elif n_ratio and ratio < 1e-4:
        evidence.insert(0, f"update/weight ratio median {fmt(ratio)} (low; healthy ~1e-3)")
        confidence = 0.6
    elif not n_ratio and drop < 0.05:
        confidence = 0.4
    else:
        return None
    fix = f"raise LR {lr_change(view, 10)} (2-10x higher); confirm with an LR range test"
    return Finding("lr_too_low", "Learning rate too low", confidence, "warning", evidence, fix, int(steps[0]))


def lr_decayed_too_early(view: RunView) -> Finding | None:
    """Progress stopped after the schedule drove the LR near zero."""
    lr_steps, lr = view.series("lr/group0")
    steps, values = view.loss
    if len(lr) < 50 or not np.isfinite(values).all() or np.nanmax(lr) <= 0:
        return None
    low = np.flatnonzero(lr < 0.05 * np.nanmax(lr))
    if not len(low) or lr_steps[low[0]] > lr_steps[-1] * 0.75:
        return None
    t_low = int(lr_steps[low[0]])
    before, after = values[steps < t_low], values[steps >= t_low]
    if len(before) < 20 or len(after) < 20:
        return None
    gain_before, gain_after = loss_drop(before[len(before) // 2 :]), loss_drop(after)
    if gain_before < 0.05 or gain_after > 0.02:
        return None
    evidence = [f"LR fell below 5% of its peak ({fmt(np.nanmax(lr))}) at step {t_low}, {1 - t_low / lr_steps[-1]:.0%} of the run ago",
                f"loss improved {gain_before:.1%} in the half-window before, {gain_after:.1%} since"]
    fix = "lengthen the schedule or raise its floor (min LR ~10% of peak); check scheduler.step() is called per epoch, not per batch (or vice versa)"
    return Finding("lr_decayed_too_early", "LR decayed too early", 0.75, "warning", evidence, fix, t_low)


RULES = [nonfinite_loss, loss_spikes, lr_too_high, lr_too_low, lr_decayed_too_early]

"""Rules about the learning rate: too high (overshooting, diverging), too low, decayed too early."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import (
    after_quiet, huge_from_start, loss_drop, lr_change, lr_collapse_step, recent, start_level, update_ratio,
)
from tuidiag.diagnosis.stats import block_medians, fmt, median
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_PREFIX

Points = tuple[float, str | None]
RATIO_HIGH, RATIO_OVERSHOOT = 5e-3, 1e-2
"""Update/weight ratios above these are high / overshooting (healthy ~1e-3)."""
NO_PROGRESS = 0.25
"""A loss less than this share below its start has made no real progress."""


def _ratio_points(view: RunView) -> Points:
    """Large updates relative to the weights; worth more when the loss is not improving with them."""
    ratio, n = update_ratio(view)
    if not n or ratio <= RATIO_HIGH:
        return 0.0, None
    if ratio <= RATIO_OVERSHOOT:
        return 0.3, f"update/weight ratio median {fmt(ratio)} (high; healthy ~1e-3)"
    values = view.loss[1]
    values = values[np.isfinite(values)]
    start = start_level(values)
    progress = 1 - median(recent(values)) / start if len(values) >= 30 and start > 0 else 0.0
    text = f"update/weight ratio median {fmt(ratio)} (healthy ~1e-3; above 1e-2 overshoots)"
    if progress > NO_PROGRESS:
        return 0.5, text + f", though the loss fell {progress:.0%} since the start"
    return 1.0, text + f" while the loss is about where it started ({-progress:+.0%})"


def _divergence_points(view: RunView) -> Points:
    """Non-finite loss, or gradient norms that grew >20x, not explained by a bad batch or a bad init."""
    steps, values = view.loss
    bad = ~np.isfinite(values)
    at = int(steps[np.argmax(bad)]) if bad.any() else None
    _, g = after_quiet(view, *view.grad_total)
    grew = len(g) > 20 and median(recent(g, 0.1, 10)) > 20 * median(g[: max(10, len(g) // 5)])
    if (at is None and not grew) or _bad_input_before(view, at) or huge_from_start(view):
        return 0.0, None
    if at is not None:
        return 1.0, f"training diverged from healthy gradient norms to a non-finite loss at step {at}: the steps overshoot"
    return 0.8, "training diverged: gradient norms grew >20x"


def _above_start_points(view: RunView) -> Points:
    """The loss ended well above where it started: the steps make things worse."""
    values = view.loss[1]
    values = values[np.isfinite(values)]
    if len(values) < 30:
        return 0.0, None
    start, now = start_level(values), median(recent(values))
    if start > 0 and now > 1.5 * start and now - start > 0.1:
        return 1.0, f"loss is now {fmt(now)}, {now / start:.1f}x its starting value {fmt(start)}: the updates make it worse"
    return 0.0, None


def _rising_points(view: RunView) -> Points:
    """The loss rose from its best level and stayed up over the last stretch."""
    _, values = after_quiet(view, *view.loss)
    values = values[np.isfinite(values)]
    if len(values) < 100:
        return 0.0, None
    smooth = block_medians(values, 20)
    best, now, floor = float(np.min(smooth[:14])), float(np.median(smooth[-3:])), float(np.min(smooth[-3:]))
    if now > 1.3 * best and floor > 1.15 * best and now - best > 0.05:
        return 0.6, f"loss rose from a best of {fmt(best)} to {fmt(now)} (+{(now / best - 1):.0%}) and did not come back"
    return 0.0, None


def _clip_points(view: RunView) -> Points:
    clipped = view.series("grad/clipped")[1]
    share = float(clipped[-max(50, len(clipped) // 5):].mean()) if len(clipped) >= 50 else 0.0
    return (0.3, f"gradient clipping active on {share:.0%} of recent steps") if share > 0.8 else (0.0, None)


def _bad_input_before(view: RunView, step: int | None) -> bool:
    steps, values = view.series("input/nonfinite")
    if step is None or not len(values):
        return False
    return bool((values[(steps <= step) & (steps >= step - 1)] > 0).any())


def lr_too_high(view: RunView) -> Finding | None:
    """Loss oscillates, rises or diverges because steps overshoot."""
    parts = [_ratio_points(view), _divergence_points(view), _above_start_points(view), _rising_points(view), _clip_points(view)]
    score = sum(points for points, _ in parts)
    if score < 1.0:
        return None
    evidence = [text for _, text in parts if text]
    steps, values = view.loss
    bad = ~np.isfinite(values)
    first = int(steps[np.argmax(bad)]) if bad.any() else None
    fix = f"reduce LR {lr_change(view, 0.1)} (3-10x lower); add warmup over the first {max(100, view.n_steps // 20)} steps; clip gradients at 1.0"
    return Finding("lr_too_high", "Learning rate too high", min(0.95, 0.6 + 0.2 * score), "critical" if first is not None else "warning",
                   evidence, fix, first)


def _small_steps(ratio: float, n_ratio: int, drop: float) -> tuple[float, str | None]:
    """Confidence that updates are too small (0: they are not), with the update-ratio evidence."""
    if n_ratio and ratio < 1e-5:
        return 0.9, f"update/weight ratio median {fmt(ratio)} (healthy ~1e-3; below 1e-5 barely moves the weights)"
    if n_ratio and ratio < 1e-4:
        return 0.75, f"update/weight ratio median {fmt(ratio)} (low; healthy ~1e-3)"
    if not n_ratio and drop < 0.05:
        return 0.5, None
    return 0.0, None


def lr_too_low(view: RunView) -> Finding | None:
    """Loss falls far too slowly while gradients are healthy: steps are too small."""
    steps, values = view.loss
    if view.n_steps < 100 or not np.isfinite(values).all() or lr_collapse_step(view)[0] is not None:
        return None
    drop = loss_drop(values)
    ratio, n_ratio = update_ratio(view)
    grad = median(view.grad_total[1])
    if drop > 0.2 or not (grad > 1e-3) or _some_layer_without_gradient(view):
        return None
    confidence, ratio_text = _small_steps(ratio, n_ratio, drop)
    if not confidence:
        return None
    evidence = [f"loss fell only {drop:.1%} over {view.n_steps} steps (from {fmt(median(values[:10]))} to {fmt(median(recent(values)))})",
                f"gradient norm median {fmt(grad)} is not small: gradients are there, steps are too small"]
    evidence[:0] = [ratio_text] if ratio_text else []
    fix = f"raise LR {lr_change(view, 10)} (2-10x higher); confirm with an LR range test"
    return Finding("lr_too_low", "Learning rate too low", confidence, "warning", evidence, fix, int(steps[0]))


def _some_layer_without_gradient(view: RunView) -> bool:
    """A weight layer's recent gradient is exactly zero: updates are small because nothing flows, not because of the LR."""
    for name in view.weight_params:
        values = view.series(GRAD_NORM_PREFIX + name)[1]
        if len(values) and median(recent(values, 0.2, 10)) == 0:
            return True
    return False


def _stalled_since(view: RunView, t_low: int) -> tuple[float, float | None]:
    """Loss drop over the second half of the time since ``t_low``, and the relative change of validation loss since."""
    steps, values = view.loss
    last = int(steps[-1])
    tail_drop = loss_drop(values[steps >= t_low + (last - t_low) // 2])
    v_steps, val = view.val_loss
    val_after = val[(v_steps >= t_low + (last - t_low) // 4) & np.isfinite(val)]
    val_change = abs(val_after[-1] - val_after[0]) / max(abs(val_after[0]), 1e-12) if len(val_after) >= 3 else None
    return tail_drop, val_change


def lr_decayed_too_early(view: RunView) -> Finding | None:
    """Progress stopped after the schedule drove the LR near zero, long before the run ended."""
    t_low, peak = lr_collapse_step(view)
    steps, values = view.loss
    if t_low is None or t_low == 0 or len(values) < 50 or not np.isfinite(values).all():
        return None
    last = int(steps[-1])
    before, after = values[steps < t_low], values[steps >= t_low]
    if len(before) < 10 or len(after) < max(30, len(values) // 5) or t_low > 0.75 * last:
        return None
    gain_before = loss_drop(before)
    tail_drop, val_change = _stalled_since(view, t_low)
    if gain_before < 0.05 or not (tail_drop < 0.03 or (val_change is not None and val_change < 0.01)):
        return None
    evidence = [f"LR fell below 5% of its peak ({fmt(peak)}) at step {t_low}, {1 - t_low / max(last, 1):.0%} of the run ago; now {fmt(view.lr_now or 0.0)}",
                f"loss improved {gain_before:.1%} before that; since, it is flat ({tail_drop:.1%} over the last stretch)"]
    if val_change is not None:
        evidence.append(f"validation loss changed {val_change:.2%} since")
    fix = "lengthen the schedule or raise its floor (min LR ~10% of peak); check scheduler.step() is called per epoch, not per batch (or vice versa)"
    return Finding("lr_decayed_too_early", "LR decayed too early", 0.85, "warning", evidence, fix, t_low)


RULES = [lr_too_high, lr_too_low, lr_decayed_too_early]

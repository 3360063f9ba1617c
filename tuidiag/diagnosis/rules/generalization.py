"""Rules comparing training and validation: overfitting, underfitting, frozen validation metrics."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import loss_drop, recent, start_level
from tuidiag.diagnosis.stats import fmt, median, robust_sigma
from tuidiag.diagnosis.view import RunView
from tuidiag.format import UPDATE_RATIO_PREFIX

HIGH_SHARE = 0.45
"""A plateau above this share of the starting loss is high (chance level for a classifier is ~100%)."""
GAP_SHARE = 0.2
"""Overfitting needs validation loss this share above training loss, and a gap wider than at the best step."""
FLAT = 0.1
"""Losses that improved less than this over the last 40% of the run have plateaued."""


def smooth3(values: np.ndarray) -> np.ndarray:
    """Running median of three (edges kept), so one lucky or unlucky evaluation is not a trend."""
    if len(values) < 3:
        return values.copy()
    inner = np.median(np.stack([values[:-2], values[1:-1], values[2:]]), axis=0)
    return np.concatenate([values[:1], inner, values[-1:]])


def _val_turn(view: RunView) -> tuple[np.ndarray, np.ndarray, int, float, float] | None:
    """(eval steps, values, index of the best one, best level, now) when validation loss rose clearly above its noise.

    The best level is the higher of the single best evaluation and the best running median of three,
    so that one lucky evaluation does not make a trend.
    """
    v_steps, val = view.val_loss
    ok = np.isfinite(val)
    v_steps, val = v_steps[ok], val[ok]
    if len(val) < 4:
        return None
    i_best = int(np.argmin(val))
    best, now = max(float(val[i_best]), float(np.min(smooth3(val)))), float(np.median(val[-3:]))
    noise = robust_sigma(np.diff(val))
    if i_best >= len(val) - 1 or now - best < max(0.1 * abs(best), 2 * noise):
        return None
    return v_steps, val, i_best, best, now


def overfitting(view: RunView) -> Finding | None:
    """Training loss keeps falling while validation loss rises and the gap between them opens."""
    turn = _val_turn(view)
    if turn is None:
        return None
    v_steps, val, i_best, best, now = turn
    rise = (now - best) / max(abs(best), 1e-12)
    steps, train = view.loss
    train_at_best = median(train[(steps <= v_steps[i_best]) & (steps > v_steps[i_best] - 50)])
    train_now = median(recent(train, 0.05, 10))
    if not train_now < 0.9 * train_at_best or not now - train_now > max(GAP_SHARE * now, best - train_at_best):
        return None  # training did not keep improving, or the gap did not open: not memorization
    evidence = [f"validation loss bottomed at {fmt(float(val[i_best]))} (step {v_steps[i_best]}) and is now {fmt(now)} (+{rise:.0%} over its best level)",
                f"training loss kept falling over the same span: {fmt(train_at_best)} -> {fmt(train_now)}",
                f"train/val gap now {fmt(now - train_now)}"]
    fix = (f"stop early around step {v_steps[i_best]} (keep the best checkpoint); add regularization: weight decay 0.01-0.1, "
           "dropout 0.1-0.3, data augmentation; or get more data")
    severity = "warning" if rise >= 0.25 else "info"
    return Finding("overfitting", "Overfitting", min(0.9, 0.65 + rise / 2), severity, evidence, fix, int(v_steps[i_best]))


def underfitting(view: RunView) -> Finding | None:
    """Train and validation losses plateau high and close together."""
    steps, train = view.loss
    v_steps, val = view.val_loss
    if view.n_steps < 200 or len(val) < 3 or not np.isfinite(train).all() or not np.isfinite(val[-3:]).all():
        return None
    start, end = start_level(train, 10), median(recent(train, 0.1))
    tail_drop = loss_drop(train[int(len(train) * 0.6) :])
    val_tail = val[v_steps >= steps[int(len(steps) * 0.6)]]
    val_drop = (val_tail[0] - val_tail[-1]) / abs(val_tail[0]) if len(val_tail) >= 3 and val_tail[0] else 0.0
    if max(tail_drop, val_drop) > FLAT or not start > 0 or not end >= HIGH_SHARE * start:
        return None
    val_now = median(val[-3:])
    gap = abs(val_now - end) / max(abs(end), 1e-12)
    if gap > 0.2:
        return None
    evidence = [f"training loss {fmt(start)} -> {fmt(end)} ({end / start:.0%} of its start), flat over the last 40% of the run ({-tail_drop:+.1%})",
                f"validation loss {fmt(val_now)} is close to training ({gap:.0%} apart): the model is not even fitting the training data"]
    fix = "increase capacity (wider/deeper model), reduce regularization, raise LR; check that labels match inputs"
    return Finding("underfitting", "Underfitting: both losses plateau high", 0.65, "warning", evidence, fix, int(steps[int(len(steps) * 0.6)]))


def frozen_val_metric(view: RunView) -> Finding | None:
    """A validation metric repeats exactly while training changes."""
    names = [n for n in view.run.metric_names if n.startswith(("val", "eval", "valid")) and len(view.series(n)[1]) >= 4]
    steps, train = view.loss
    for name in names:
        v_steps, values = view.series(name)
        tail = values[-4:]
        if not np.isfinite(tail).all() or not (tail == tail[0]).all():
            continue
        span = (steps >= v_steps[-4]) & (steps <= v_steps[-1])
        if any(_changed(view, other, v_steps[-4], v_steps[-1]) for other in names if other != name):
            continue  # a coarse metric (accuracy) can repeat while the others move: the eval is live
        if not _weights_moved(view, int(v_steps[-4]), int(v_steps[-1])):
            continue  # the model itself stood still (LR ~0): an identical metric is right, not frozen
        if span.sum() >= 4 and np.ptp(train[span][np.isfinite(train[span])]) > 0:
            evidence = [f"{name} is exactly {tail[0]!r} at the last {len(tail)} evaluations (steps {v_steps[-4]}-{v_steps[-1]})",
                        "training loss changed over the same steps"]
            fix = "evaluate the current model (not a stale copy or checkpoint), and check the eval loop reads new data and is not cached"
            return Finding("frozen_val_metric", "Validation metric frozen", 0.9, "warning", evidence, fix, int(v_steps[-4]))
    return None


def _weights_moved(view: RunView, first: int, last: int) -> bool:
    """The weights changed measurably between two steps (update/weight ratio above float noise)."""
    ratios = [values[(steps >= first) & (steps <= last)] for name in view.weight_params
              for steps, values in [view.series(UPDATE_RATIO_PREFIX + name)]]
    pooled = np.concatenate(ratios) if ratios else np.empty(0)
    return not len(pooled) or median(pooled) > 1e-7


def _changed(view: RunView, name: str, first: int, last: int) -> bool:
    steps, values = view.series(name)
    window = values[(steps >= first) & (steps <= last)]
    return len(window) >= 2 and bool(np.ptp(window[np.isfinite(window)]) > 0) if np.isfinite(window).any() else False


RULES = [overfitting, underfitting, frozen_val_metric]

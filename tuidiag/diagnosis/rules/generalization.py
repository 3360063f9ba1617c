"""Rules comparing training and validation: overfitting, underfitting, frozen validation metrics."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.rules.common import loss_drop, recent
from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView


def overfitting(view: RunView) -> Finding | None:
    """Training loss keeps falling while validation loss rises."""
    v_steps, val = view.val_loss
    ok = np.isfinite(val)
    v_steps, val = v_steps[ok], val[ok]
    if len(val) < 4:
        return None
    i_best = int(np.argmin(val))
    best, now = float(val[i_best]), float(np.median(val[-min(3, len(val)):]))
    rise = (now - best) / max(abs(best), 1e-12)
    if i_best >= len(val) - 1 or rise < 0.1:
        return None
    steps, train = view.loss
    train_at_best = median(train[(steps <= v_steps[i_best]) & (steps > v_steps[i_best] - 50)])
    train_now = median(recent(train, 0.05, 10))
    if not train_now < train_at_best:
        return None
    evidence = [f"validation loss bottomed at {fmt(best)} (step {v_steps[i_best]}) and is now {fmt(now)} (+{rise:.0%})",
                f"training loss kept falling over the same span: {fmt(train_at_best)} -> {fmt(train_now)}",
                f"train/val gap now {fmt(now - train_now)}"]
    fix = (f"stop early around step {v_steps[i_best]} (keep the best checkpoint); add regularization: weight decay 0.01-0.1, "
           "dropout 0.1-0.3, data augmentation; or get more data")
    severity = "warning" if rise >= 0.25 else "info"
    confidence = min(0.95, 0.6 + rise / 2)
    return Finding("overfitting", "Overfitting", confidence, severity, evidence, fix, int(v_steps[i_best]))


def underfitting(view: RunView) -> Finding | None:
    """Train and validation losses plateau high and close together."""
    steps, train = view.loss
    v_steps, val = view.val_loss
    if view.n_steps < 200 or len(val) < 3 or not np.isfinite(train).all():
        return None
    second_half = train[len(train) // 2 :]
    start, end = median(train[:10]), median(recent(train, 0.1))
    if loss_drop(second_half) > 0.03 or end < 0.6 * start:
        return None
    gap = abs(median(val[-3:]) - end) / max(abs(end), 1e-12)
    if gap > 0.2:
        return None
    evidence = [f"training loss {fmt(start)} -> {fmt(end)}: flat over the second half of the run",
                f"validation loss {fmt(median(val[-3:]))} is close to training ({gap:.0%} apart): the model is not even fitting the training data"]
    fix = "increase capacity (wider/deeper model), reduce regularization, raise LR; check that labels match inputs"
    return Finding("underfitting", "Underfitting: both losses plateau high", 0.5, "warning", evidence, fix, int(steps[len(steps) // 2]))


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
        if span.sum() >= 4 and np.ptp(train[span][np.isfinite(train[span])]) > 0:
            evidence = [f"{name} is exactly {tail[0]!r} at the last {len(tail)} evaluations (steps {v_steps[-4]}-{v_steps[-1]})",
                        "training loss changed over the same steps"]
            fix = "evaluate the current model (not a stale copy or checkpoint), and check the eval loop reads new data and is not cached"
            return Finding("frozen_val_metric", "Validation metric frozen", 0.8, "warning", evidence, fix, int(v_steps[-4]))
    return None


def _changed(view: RunView, name: str, first: int, last: int) -> bool:
    steps, values = view.series(name)
    window = values[(steps >= first) & (steps <= last)]
    return len(window) >= 2 and bool(np.ptp(window[np.isfinite(window)]) > 0) if np.isfinite(window).any() else False


RULES = [overfitting, underfitting, frozen_val_metric]

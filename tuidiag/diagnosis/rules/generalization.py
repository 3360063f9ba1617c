"""Rules comparing training and validation: overfitting, underfitting, frozen validation metrics."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Change, Compare, Evidence, Level, at_step, change_words, direction, measure, quoted
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.fix_edit import lead_with
from tuidiag.diagnosis.lr_target import plain
from tuidiag.diagnosis.moves import CAPACITY_UP, LR_UP, REG_DOWN, REG_UP, fix_text
from tuidiag.diagnosis.rules.measures import drop_of, first_vs_last, start_measure, tail
from tuidiag.diagnosis.stats import median, robust_sigma
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import LOSS, UPDATE_RATIO_PREFIX

HIGH_SHARE = 0.45
"""A plateau above this share of the starting loss is high (chance level for a classifier is ~100%)."""
GAP_SHARE = 0.2
"""Overfitting needs validation loss this share above training loss, and a gap wider than at the best step."""
MEMORISED = 0.01
"""A training loss below this share of its start has memorised the training set (a train loss at ~0)."""
RISE_ALARM, RISE_MEMORISED = 0.25, 0.1
"""Validation loss this far above its best is an alarm; this far suffices when the training set is memorised."""
FLAT = 0.1
"""Losses that improved less than this over the last 40% of the run, and rose less than this, have plateaued."""
ABOVE_START = 1.2
"""A training loss that ends above this multiple of its start diverged: it is not a plateau, whatever its recent slope."""


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
    name = view.val_loss_name
    if turn is None or name is None:
        return None
    v_steps, val, i_best, best, _ = turn
    later = slice(max(i_best + 1, len(val) - 3), len(val))  # the newest evaluations after the best one
    low, now = at_step(name, v_steps, val, i_best), measure(name, v_steps[later], val[later], "median")
    rise = (now.value - best) / max(abs(best), 1e-12)
    steps, train = view.loss
    span = (steps <= v_steps[i_best]) & (steps > v_steps[i_best] - 50)
    after = steps > v_steps[i_best]
    if not span.any() or not after.any():
        return None
    train_at_best = measure(LOSS, steps[span], train[span], "median")
    train_now = measure(LOSS, *tail(steps[after], train[after], 0.05, 10), "median")
    kept_falling = train_now.value < 0.9 * train_at_best.value
    if not kept_falling or not now.value - train_now.value > max(GAP_SHARE * now.value, best - train_at_best.value):
        return None  # training did not keep improving, or the gap did not open: not memorization
    turned = Change(low, now, direction(low.value, now.value))
    above = f" ({change_words(turned)} from that low)" if low.value > 0 else ""
    fell = Change(train_at_best, train_now, "down")
    evidence: list[str] = [
        Evidence(f"validation loss bottomed at {fmt(low.value)} at step {low.first} and is now {fmt(now.value)} over {now.where}"
                 f"{above}", turned),
        Evidence(f"training loss kept falling meanwhile: {change_words(fell)} from {fmt(train_at_best.value)} over "
                 f"{train_at_best.where} to {fmt(train_now.value)} over {train_now.where}", fell),
        Evidence(f"train/val gap now {fmt(now.value - train_now.value)} (validation {fmt(now.value)} over {now.where}, training "
                 f"{fmt(train_now.value)} over {train_now.where})", Compare(now, train_now, "above"))]
    start = start_measure(LOSS, steps, train, 10)
    memorised = start is not None and start.value > 0 and train_now.value < MEMORISED * start.value and rise >= RISE_MEMORISED
    if memorised and start is not None:
        evidence.append(Evidence(f"the training set is memorised: training loss {fmt(train_now.value)} over {train_now.where} is "
                                 f"{train_now.value / start.value:.2%} of its {fmt(start.value)} over {start.where}",
                                 Compare(train_now, start, "below"), refs=(MEMORISED,)))
    severity = "warning" if rise >= RISE_ALARM or memorised else "info"
    # below the alarm level the run is healthy: a note says what to keep, not that the training must stop
    stop = (f"stop early around step {v_steps[i_best]} (keep the best checkpoint)" if severity == "warning" else
            f"if the best validation loss matters, keep the checkpoint of step {v_steps[i_best]} (its best evaluation)")
    fix = fix_text(stop, (REG_UP, "add regularization: weight decay 0.01-0.1, dropout 0.1-0.3, data augmentation"), "or get more data")
    title = "Overfitting" if severity == "warning" else "Slight overfitting"
    return Finding("overfitting", title, min(0.9, 0.65 + rise / 2), severity, evidence, fix, int(v_steps[i_best]))


def underfitting(view: RunView) -> Finding | None:
    """Train and validation losses plateau high and close together."""
    steps, train = view.loss
    v_steps, val = view.val_loss
    name = view.val_loss_name
    if view.n_steps < 200 or len(val) < 3 or name is None or not np.isfinite(train).all() or not np.isfinite(val[-3:]).all():
        return None
    start, end = start_measure(LOSS, steps, train, 10), measure(LOSS, *tail(steps, train, 0.1), "median")
    cut = int(len(train) * 0.6)
    plateau = first_vs_last(LOSS, steps[cut:], train[cut:])
    tail_drop = drop_of(plateau)
    val_tail = val[v_steps >= steps[cut]]
    val_drop = (val_tail[0] - val_tail[-1]) / abs(val_tail[0]) if len(val_tail) >= 3 and val_tail[0] else 0.0
    if start is None or max(tail_drop, val_drop) > FLAT or not start.value > 0 or not end.value >= HIGH_SHARE * start.value:
        return None
    if tail_drop < -FLAT or val_drop < -FLAT or end.value > ABOVE_START * start.value:
        return None  # rising, or far above its start: a divergence (or worse), not a plateau
    val_now = measure(name, v_steps[-3:], val[-3:], "median")
    gap = abs(val_now.value - end.value) / max(abs(end.value), 1e-12)
    if gap > 0.2:
        return None
    evidence: list[str] = [
        Evidence(f"training loss {fmt(start.value)} over {start.where} -> {fmt(end.value)} over {end.where} "
                 f"({end.value / start.value:.0%} of its start)", Change(start, end, "")),
        Evidence("validation loss " + f"{fmt(val_now.value)} over {val_now.where} is close to training's {fmt(end.value)} over "
                 f"{end.where} ({gap:.0%} apart): the model is not even fitting the training data", Compare(val_now, end))]
    if plateau is not None:
        evidence.insert(1, Evidence(f"over the last 40% of the run it {change_words(plateau)}: {fmt(plateau.before.value)} over "
                                    f"{plateau.before.where} -> {fmt(plateau.after.value)} over {plateau.after.where}", plateau,
                                    refs=(0.4,)))
    fix = fix_text((CAPACITY_UP, "increase capacity (wider/deeper model)"), (REG_DOWN, "reduce regularization"),
                   plain(LR_UP, "raise"), "check that labels match inputs")
    return Finding("underfitting", "Underfitting: both losses plateau high", 0.65, "warning", evidence, fix, int(steps[cut]))


def underfitting_explained(underfitting: Finding, cause: Finding) -> Finding:
    """``underfitting`` anew as a symptom of ``cause`` (an LR too low that barely moves the weights, dead ReLU units):
    its fix sends to the cause first, and advises capacity or regularization only if both losses still plateau
    after that. The cause is not named in the words (its title is the heading above): a title such as "gradient
    clipping on most steps" would read as advice to clip."""
    return lead_with(underfitting, "fix the cause it is listed under first, and if both losses still plateau after that: ")


REPEATS, LOSS_REPEATS = 4, 2
"""Evaluations in a row that must be exactly equal: a coarse metric (an accuracy over a small set) can repeat by chance,
a validation loss (a mean of real numbers) cannot, once the weights moved in between."""


def _repeats(name: str) -> int:
    return LOSS_REPEATS if "loss" in name.lower() else REPEATS


def frozen_val_metric(view: RunView) -> Finding | None:
    """A validation metric repeats exactly while training changes."""
    names = [n for n in view.run.metric_names
             if n.startswith(("val", "eval", "valid")) and len(view.series(n)[1]) >= _repeats(n)]
    steps, train = view.loss
    for name in names:
        k = _repeats(name)
        v_steps, values = view.series(name)
        tail_values = values[-k:]
        if not np.isfinite(tail_values).all() or not (tail_values == tail_values[0]).all():
            continue
        span = (steps >= v_steps[-k]) & (steps <= v_steps[-1])
        if any(_changed(view, other, v_steps[-k], v_steps[-1]) for other in names if other != name):
            continue  # a coarse metric (accuracy) can repeat while the others move: the eval is live
        if not _weights_moved(view, int(v_steps[-k]), int(v_steps[-1])):
            continue  # the model itself stood still (LR ~0): an identical metric is right, not frozen
        if span.sum() >= 4 and np.ptp(train[span][np.isfinite(train[span])]) > 0:
            same = measure(name, v_steps[-k:], tail_values, "share_equal", float(tail_values[0]))
            low, high = (measure(LOSS, steps[span], train[span], stat) for stat in ("min", "max"))
            evidence: list[str] = [
                Evidence(f"{quoted(name)} is exactly {float(tail_values[0])!r} at the last {len(tail_values)} evaluations "
                         f"({same.where})", Level(same, equal=1.0)),
                Evidence(f"training loss changed over the same steps: it ranged from {fmt(low.value)} to {fmt(high.value)} over "
                         f"{low.where}", Compare(high, low, "above"))]
            fix = "evaluate the current model (not a stale copy or checkpoint), and check the eval loop reads new data and is not cached"
            return Finding("frozen_val_metric", "Validation metric frozen", 0.9, "warning", evidence, fix, int(v_steps[-k]))
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

"""The rules about the LR schedule: the LR decayed too early, and progress stopped with it; the LR
went near zero and back up, cycle after cycle (a schedule's period shorter than the run)."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import (
    Change, Evidence, Level, Measure, Occurrences, at_step, change_words, measure, signed_percent, stat_of,
)
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.moves import MIN_LR_UP, fix_text
from tuidiag.diagnosis.rules.lr import loss_words
from tuidiag.diagnosis.rules.measures import LR_COLLAPSE, drop_of, first_vs_last, lr_collapse_step, steps_between
from tuidiag.diagnosis.view import RunView
from tuidiag.format import LOSS, LR_GROUP0, UPDATE_RATIO_PREFIX
from tuidiag.text.numbers import fmt

def _stalled_since(view: RunView, t_low: int) -> tuple[Change | None, Change | None]:
    """The loss over the second half of the time since ``t_low`` (first vs last tenth), and the validation loss since a quarter."""
    steps, values = view.loss
    last = int(steps[-1])
    since = steps >= t_low + (last - t_low) // 2
    loss_tail = first_vs_last(LOSS, steps[since], values[since])
    v_steps, val = view.val_loss
    keep = (v_steps >= t_low + (last - t_low) // 4) & np.isfinite(val)
    v_steps, val = v_steps[keep], val[keep]
    if len(val) < 3 or view.val_loss_name is None:
        return loss_tail, None
    first, now = at_step(view.val_loss_name, v_steps, val, 0), at_step(view.val_loss_name, v_steps, val, len(val) - 1)
    return loss_tail, Change(first, now, "")


def _relative(change: Change) -> float:
    return abs(change.after.value - change.before.value) / max(abs(change.before.value), 1e-12)


def lr_decayed_too_early(view: RunView) -> Finding | None:
    """Progress stopped after the schedule drove the LR near zero, long before the run ended."""
    t_low, peak = lr_collapse_step(view)
    steps, values = view.loss
    if t_low is None or t_low == 0 or len(values) < 50 or not np.isfinite(values).all():
        return None
    last = int(steps[-1])
    early = steps < t_low
    before, after = values[early], values[~early]
    if len(before) < 10 or len(after) < max(30, len(values) // 5) or t_low > 0.75 * last:
        return None
    gain = first_vs_last(LOSS, steps[early], before)
    loss_tail, val_since = _stalled_since(view, t_low)
    tail_drop = drop_of(loss_tail)
    val_change = _relative(val_since) if val_since is not None else None
    stalled = updates_stalled(view, t_low)
    learning = gain is not None and (drop_of(gain) >= 0.05 or stalled is not None)
    if not learning or not (tail_drop < 0.03 or (val_change is not None and val_change < 0.01)):
        return None
    assert gain is not None
    only = "only " if gain.says == "down" and drop_of(gain) < 0.05 else ""
    evidence: list[str] = [_collapse_evidence(view, t_low, peak),
                           Evidence(f"loss {only}{loss_words(gain)}, before the LR collapsed", gain)]
    if stalled is not None:
        evidence.insert(1, stalled)
    if loss_tail is not None:
        before, after = loss_tail.before, loss_tail.after
        span = f"from {fmt(before.value)} over {before.where} to {fmt(after.value)} over {after.where}"
        if abs(loss_tail.relative) <= 0.03:
            evidence.append(Evidence(f"since, it is flat: {signed_percent(loss_tail.relative, 1)} {span}",
                                     Change(before, after, "flat", 0.03)))
        else:
            # with the weights all but still (``stalled``), a rise between two windows is the batches they hold, not
            # the model getting worse: said so, so the figure does not read as a run going bad
            still = " while the weights barely moved: the two windows hold different batches" if (
                stalled is not None and loss_tail.says == "up") else ""
            evidence.append(Evidence(f"since, it {change_words(loss_tail)} {span}{still}", loss_tail))
    if val_since is not None:
        before, after = val_since.before, val_since.after
        evidence.append(Evidence(f"validation loss changed {signed_percent(val_since.relative, 2)} from {fmt(before.value)} at "
                                 f"{before.where} to {fmt(after.value)} at {after.where}", val_since))
    fix = fix_text((MIN_LR_UP, "lengthen the schedule or raise its floor (min LR ~10% of peak)"),
                   "check scheduler.step() is called per epoch, not per batch (or vice versa)")
    return Finding("lr_decayed_too_early", "LR decayed too early", 0.85, "warning", evidence, fix, t_low)


def updates_stalled(view: RunView, t_low: int) -> Evidence | None:
    """The update/weight ratio fell 10x or more when the LR collapsed at ``t_low``: the collapse is what stopped the weights.

    Compares the samples before ``t_low`` (after the quiet steps when there are any, else all
    of them) with those since; ``None`` without the ratios, with fewer than 2 samples since, or
    when the fall is smaller. This is what makes the collapse the cause of a stall even when
    the loss had barely improved before it (a schedule stepped per batch collapses within
    a few dozen steps).
    """
    names = tuple(UPDATE_RATIO_PREFIX + n for n in (view.weight_params or view.param_order))
    pooled = [view.series(n) for n in names]
    if not names or not all(len(s) for s, _ in pooled):
        return None
    steps = np.unique(np.concatenate([s for s, _ in pooled]))
    early = steps[steps < t_low]
    judged = early[~view.quiet_mask(early)]
    early = judged if len(judged) else early
    since = steps[steps >= t_low]
    if not len(early) or len(since) < 2:
        return None
    window = lambda first, last: np.concatenate([steps_between(s, v, int(first), int(last))[1] for s, v in pooled])  # noqa: E731
    before = Measure(names, int(early[0]), int(early[-1]), "median", stat_of(window(early[0], early[-1]), "median"))
    after = Measure(names, int(since[0]), int(since[-1]), "median", stat_of(window(since[0], since[-1]), "median"))
    if not (before.value > 0 and after.value < 0.1 * before.value):
        return None
    factor = f" {fmt(before.value / after.value)}x" if after.value > 0 else ""
    return Evidence(f"the update/weight ratio fell{factor} with it, from a median of {fmt(before.value)} over {before.where} "
                    f"to {fmt(after.value)} over {after.where}: the weights all but stopped", Change(before, after, "down"))


def _collapse_evidence(view: RunView, t_low: int, peak: float) -> Evidence:
    """The LR's peak, the step from which it stayed below 5% of it, and its newest value."""
    l_steps, lr = view.series(LR_GROUP0)
    top = measure(LR_GROUP0, l_steps, lr, "max")
    i = int(np.searchsorted(l_steps, t_low))
    low = Occurrences((LR_GROUP0,), t_low, int(l_steps[-1]), "below", (t_low,), len(lr) - i, arg=0.05 * peak)
    high = Occurrences((LR_GROUP0,), int(l_steps[i - 1]), int(l_steps[i - 1]), "below", (), 0, arg=0.05 * peak)
    now = at_step(LR_GROUP0, l_steps, lr, len(lr) - 1)
    return Evidence(f"LR has stayed below 5% of its peak {fmt(top.value)} ({top.where}) since step {t_low}, through step "
                    f"{int(l_steps[-1])}; now {fmt(now.value)}", Level(top), low, high, Level(now), refs=(0.05,))


CYCLE_HIGH = 0.5
"""An LR that was below :data:`~tuidiag.diagnosis.rules.measures.LR_COLLAPSE` of its peak (the bottom of a cycle, the
line :func:`lr_decayed_too_early` draws too) and is back above this share of it has come back."""
MIN_CYCLES = 1
"""Gradual returns needed (a warmup, the LR's first rise, is not one: only a return after the LR was high counts)."""
MIN_RISE_POINTS = 5
"""A return spread over at least this many recorded LR values rises gradually, as a cosine past its period does; a
restart on purpose (SGDR's warm restarts) jumps back in one step and is not counted."""


def lr_schedule_cycles(view: RunView) -> Finding | None:
    """After it had been high, the LR went below 5% of its peak and gradually back above half of it: a schedule whose
    period is shorter than the run, most often ``CosineAnnealingLR(T_max=epochs)`` stepped once per batch."""
    l_steps, lr = view.series(LR_GROUP0)
    keep = np.isfinite(lr)
    l_steps, lr = l_steps[keep], lr[keep]
    if len(lr) < 4 * MIN_RISE_POINTS or not lr.max() > 0:
        return None
    peak = float(lr.max())
    low, high = lr < LR_COLLAPSE * peak, lr > CYCLE_HIGH * peak
    marked = np.flatnonzero(low | high)
    back = np.flatnonzero(low[marked[:-1]] & high[marked[1:]])  # a low value whose next marked one is high: a return
    i_low, i_back = marked[back], marked[back + 1]
    was_high = np.maximum.accumulate(high)  # the LR had been high before: not the warmup's climb from zero
    gradual = ((i_back - i_low) >= MIN_RISE_POINTS) & was_high[i_low]
    i_low, i_back = i_low[gradual], i_back[gradual]
    if len(i_back) < MIN_CYCLES:
        return None
    top = measure(LR_GROUP0, l_steps, lr, "max")
    period = int(np.median(np.diff(l_steps[i_back]))) if len(i_back) > 1 else None
    shown = min(3, len(i_back))
    claims: list[object] = [Level(top)]
    pairs = []
    for a, b in zip(i_low[:shown], i_back[:shown]):
        s_low, s_back = int(l_steps[a]), int(l_steps[b])
        claims += [Occurrences((LR_GROUP0,), s_low, s_low, "below", (s_low,), 1, arg=LR_COLLAPSE * peak),
                   Occurrences((LR_GROUP0,), s_back, s_back, "above", (s_back,), 1, arg=CYCLE_HIGH * peak)]
        pairs.append(f"step {s_low} -> {s_back}")
    more = f" (and {len(i_back) - shown} more)" if len(i_back) > shown else ""
    every = f", every {period:,} steps" if period else ""
    evidence: list[str] = [
        Evidence(f"the LR went below 5% of its peak {fmt(top.value)} ({top.where}) and gradually back above half of it "
                 f"{'once' if len(i_back) == 1 else f'{len(i_back)} times'}{every}: {', '.join(pairs)}{more}", *claims,
                 refs=(LR_COLLAPSE, CYCLE_HIGH, len(i_back), len(i_back) - shown, *((period,) if period else ())))]
    fix = fix_text("if the LR was meant to decay once over the run: a cosine schedule rises again after T_max steps, so "
                   "set T_max to the number of scheduler.step() calls in the whole run (epochs x batches per epoch when "
                   "it is stepped per batch), or step it once per epoch",
                   "cycles on purpose (cyclical LR, warm restarts): nothing to fix")
    return Finding("lr_schedule_cycles", "The LR schedule cycles (its period is shorter than the run)", 0.6, "warning",
                   evidence, fix, int(l_steps[i_low[0]]))


RULES = [lr_decayed_too_early, lr_schedule_cycles]

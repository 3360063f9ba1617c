"""Rules about the learning rate: too high (overshooting, diverging), too low (decayed too early: :mod:`tuidiag.diagnosis.rules.lr_schedule`)."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import (
    Change, Evidence, Level, Measure, Occurrences, at_step, change_words, direction, measure, quoted, signed_percent,
)
from tuidiag.diagnosis.finding import Finding
from tuidiag.diagnosis.lr_target import LRClause, scaled
from tuidiag.diagnosis.moves import CLIP_TIGHTER, LR_DOWN, LR_UP, WARMUP_UP, Move, fix_text
from tuidiag.diagnosis.rules.measures import (
    HUGE_GRAD, after_quiet, drop_of, finite_only, first_vs_last, huge_from_start, lr_collapse_step, start_measure,
    steps_between, tail, update_ratio,
)
from tuidiag.diagnosis.rules.overshoot import (
    FAR_OVERSHOOT, RATIO_HIGH, RATIO_OVERSHOOT, RISE, RISE_MIN, WEIGHT_BLOWUP, died_after, far_overshoot, first_updates_rise,
    ratio_onset, rise_words, sustained_rise, weight_blowup,
)
from tuidiag.diagnosis.rules.precursors import before_nonfinite, calm_loss, first_nonfinite
from tuidiag.diagnosis.stats import block_medians, median, thin
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import GRAD_NORM_PREFIX, GRAD_NORM_TOTAL, LOSS, LR_GROUP0, UPDATE_RATIO_PREFIX, WEIGHT_NORM_PREFIX

NO_PROGRESS = 0.25
"""A loss less than this share below its start has made no real progress."""


def _start_vs_now(view: RunView) -> Change | None:
    """The loss's first 5 finite values against its newest fifth (at least 20; ``None`` below 30 finite values), before
    any runaway that ended in a non-finite loss (:func:`calm_loss`)."""
    steps, values = finite_only(*calm_loss(view)[:2])
    if len(values) < 30:
        return None
    start = start_measure(LOSS, steps, values)
    now = measure(LOSS, *tail(steps, values), "median")
    if start is None or not start.value > 0:
        return None
    return Change(start, now, direction(start.value, now.value))


def loss_words(change: Change) -> str:
    """``fell 30% from 1.5 over steps 0-4 to 1.07 over steps 200-254``."""
    before, after = change.before, change.after
    return f"{change_words(change)} from {fmt(before.value)} over {before.where} to {fmt(after.value)} over {after.where}"


Onset = tuple[int, int]
"""(first step at which a signature held, earliest step at which it may have begun)."""
Part = tuple[float, Evidence | None, Onset | None]
"""What one signature adds to the LR-too-high score: points, its evidence line, its onset."""


def _ratio_points(view: RunView) -> Part:
    """Large updates relative to the weights; worth more when the loss is not improving with them.

    Recent updates are judged first; when they are not overshooting, an earlier sample far above
    the line (units that died since stop updating, so the ratio falls) is worth less.
    """
    ratio = update_ratio(view)
    if ratio is None or not ratio.value > RATIO_HIGH:
        return _far_points(view)
    text = f"update/weight ratio median {fmt(ratio.value)} over {ratio.where}"
    if ratio.value <= RATIO_OVERSHOOT:
        return 0.3, Evidence(text + " (high; healthy ~1e-3)", Level(ratio, above=RATIO_HIGH), refs=(1e-3,)), _onset(view, RATIO_HIGH)
    onset = _onset(view, RATIO_OVERSHOOT)
    text += " (healthy ~1e-3; above 1e-2 overshoots)"
    claims: list = [Level(ratio, above=RATIO_OVERSHOOT)]
    change = _start_vs_now(view)
    if change is None:
        return 1.0, Evidence(text, *claims, refs=(1e-3, 1e-2)), onset
    progress = drop_of(change)
    if progress > NO_PROGRESS:
        stalled = _no_progress_while(view, ratio) if ratio.value > STALL_RATIO else None
        if stalled is not None:
            outcome = "the steps make it worse" if stalled.says == "up" else "the steps no longer make progress"
            return 1.0, Evidence(text + f"; the loss {loss_words(change)}, but over the steps of those updates it "
                                        f"{loss_words(stalled)}: {outcome}",
                                 *claims, change, stalled, refs=(1e-3, 1e-2)), onset
        return 0.5, Evidence(text + f", though the loss {loss_words(change)}", *claims, change, refs=(1e-3, 1e-2)), onset
    if progress >= -NO_PROGRESS:
        flat = Change(change.before, change.after, "flat", NO_PROGRESS)
        return 1.0, Evidence(text + f", while the loss is about where it started ({signed_percent(change.relative)}: "
                                    f"{fmt(change.before.value)} over {change.before.where}, {fmt(change.after.value)} over "
                                    f"{change.after.where})", *claims, flat, refs=(1e-3, 1e-2)), onset
    return 1.0, Evidence(text + f", while the loss {loss_words(change)}", *claims, change, refs=(1e-3, 1e-2)), onset


STALL_SAMPLES = 4
"""The loss is judged over the update ratio's window only when that window holds this many samples of the ratio."""
STALL_RATIO = 1.5e-2
"""...and only when the ratio is this far above the overshoot line: healthy runs of the suite's tune split reached 1.4e-2
after their quiet steps (a residual CNN with BatchNorm under SGD momentum hovers at 1.1e-2 for hundreds of steps while its
loss falls slowly), every LR-too-high run there whose loss stalled stayed above 1.5e-2."""


def _no_progress_while(view: RunView, ratio: Measure) -> Change | None:
    """The loss over the steps the update ratio was measured on (first tenth against last), when it improved less than
    :data:`NO_PROGRESS` there: the updates stay large while the loss no longer improves, so they bounce around instead of
    descending. The whole curve is checked, not only its start: a loss that fell early and then stalled under large
    steps is the overshoot's signature even though it is below where it started. ``None`` when it kept improving,
    or the window holds too few ratio samples to judge."""
    sampled = view.series(UPDATE_RATIO_PREFIX + (view.weight_params or view.param_order)[0])[0]
    if int(((sampled >= ratio.first) & (sampled <= ratio.last)).sum()) < STALL_SAMPLES:
        return None
    change = first_vs_last(LOSS, *steps_between(*finite_only(*calm_loss(view)[:2]), ratio.first, ratio.last))
    return change if change is not None and drop_of(change) < NO_PROGRESS else None


def _onset(view: RunView, threshold: float) -> Onset | None:
    """When the update/weight ratio first went above ``threshold`` after the quiet steps (see :func:`ratio_onset`)."""
    return ratio_onset(view, threshold)


def _far_points(view: RunView) -> Part:
    """Updates far above the overshoot line earlier on, though the recent ones are not overshooting."""
    far = far_overshoot(view)
    if far is None:
        return 0.0, None, None
    text = f"update/weight ratio median {fmt(far.value)} at {far.where} (healthy ~1e-3; above 1e-2 overshoots)"
    return 0.5, Evidence(text, Level(far, above=RATIO_OVERSHOOT), refs=(1e-3, 1e-2)), ratio_onset(view, FAR_OVERSHOOT)


def _grad_growth(view: RunView) -> Change | None:
    """Gradient norm over the newest tenth against its first fifth after the quiet steps (``None`` below 21 values)."""
    steps, g = after_quiet(view, *view.grad_total)
    if len(g) <= 20:
        return None
    k, m = max(10, len(g) // 5), max(10, len(g) // 10)
    before = measure(GRAD_NORM_TOTAL, steps[:k], g[:k], "median")
    after = measure(GRAD_NORM_TOTAL, steps[-m:], g[-m:], "median")
    return Change(before, after, direction(before.value, after.value))


def _divergence_points(view: RunView) -> Part:
    """Non-finite loss after the loss or gradients left their range, or gradient norms that grew >20x;
    not explained by a bad batch, a bad init, or a numerical fault (a NaN out of a calm run)."""
    steps, values = view.loss
    i = first_nonfinite(view)
    at = int(steps[i]) if i is not None else None
    growth = _grad_growth(view)
    grew = growth is not None and growth.after.value > 20 * growth.before.value
    if (at is None and not grew) or _bad_input_before(view, at) or huge_from_start(view):
        return 0.0, None, None
    before = before_nonfinite(view, i) if i is not None else None
    if at is not None and before is not None and not before.grew:
        at = None  # the loss turned non-finite out of a calm run: a numerical fault, not overshooting steps
        if not grew:
            return 0.0, None, None
    if at is not None:
        first: tuple = (Occurrences((LOSS,), int(steps[0]), at, "nonfinite", (at,), 1),)
        g_steps, g = finite_only(*view.grad_total)
        start = measure(GRAD_NORM_TOTAL, g_steps[:3], g[:3], "median") if len(g) else None
        ran = [what for what, did in (("the loss", before is not None and before.loss_grew),
                                       ("the gradient norm", before is not None and before.grad_grew)) if did]
        since = "in the steps before it"
        if before is not None and before.grew_from is not None and len(hit := np.flatnonzero(steps == before.grew_from)):
            since = f"from step {before.grew_from}"
            first = Occurrences((LOSS,), int(steps[0]), at, "nonfinite", (at,), 1), Level(at_step(LOSS, steps, values, int(hit[0])))
        after_run = f", after {' and '.join(ran)} ran away {since}" if ran else ""
        start = start if start is not None and start.value < 100.0 else None  # said only when true: in range at the start
        normal_start = f"; at the start the gradient norm was {fmt(start.value)} over {start.where}, not out of range" if start else ""
        claims = [*first] + ([Level(start, below=100.0)] if start is not None else [])
        onset = before.grew_from if before is not None and before.grew_from is not None else at
        return 1.0, Evidence(f"training diverged: the loss is non-finite from step {at}{after_run}{normal_start}: the steps "
                             "overshoot", *claims), (onset, onset)
    assert growth is not None
    before_g, after_g = growth.before, growth.after
    g_steps, g = view.grad_total
    over = np.flatnonzero(~np.isfinite(g) | (g > min(HUGE_GRAD, 10 * before_g.value)))
    onset = int(g_steps[over[0]]) if len(over) else after_g.first
    return 0.8, Evidence(f"training diverged: the gradient norm rose {fmt(after_g.value / before_g.value)}x, from a median of "
                         f"{fmt(before_g.value)} over {before_g.where} to {fmt(after_g.value)} over {after_g.where}", growth), (onset, onset)


def _above_start_points(view: RunView) -> Part:
    """The loss went well above where it started: the steps made things worse (now: 1.0; for a block of steps earlier: 0.6)."""
    change = _start_vs_now(view)
    if change is None:
        return 0.0, None, None
    start, now = change.before.value, change.after.value
    rise = sustained_rise(view, change.before)
    if now > RISE * start and now - start > RISE_MIN:
        first, earliest = (rise[0].after.first, rise[1]) if rise is not None else (change.after.first, change.after.first)
        return 1.0, Evidence(f"loss rose to {fmt(now)} over {change.after.where}, {fmt(now / start)}x its level of {fmt(start)} "
                             f"over {change.before.where}: the updates make it worse", change), (first, earliest)
    if rise is not None:
        return 0.6, Evidence(f"{rise_words(rise[0])}: the updates made it worse", rise[0]), (rise[0].after.first, rise[1])
    return 0.0, None, None


def _first_updates_points(view: RunView) -> Part:
    """The loss rose over the first steps, above its value before any update: the first updates made it worse."""
    rise = first_updates_rise(view)
    if rise is None or huge_from_start(view):
        return 0.0, None, None
    first, after = rise.before, rise.after
    text = (f"loss rose to {fmt(after.value)} over {after.where}, {fmt(after.value / first.value)}x its first value {fmt(first.value)} "
            f"at {first.where}: the first updates made it worse")
    points = 1.0 if after.value >= DOUBLED * first.value else 0.6
    return points, Evidence(text, rise), (after.first, after.first)


def _weight_blowup_points(view: RunView) -> Part:
    """A weight matrix's norm jumped 10x or more between two samples: the updates threw the weights."""
    found = weight_blowup(view)
    if found is None:
        return 0.0, None, None
    jump, earliest = found
    before, after = jump.before, jump.after
    name = quoted(str(before.metric)[len(WEIGHT_NORM_PREFIX):])
    text = (f"the weight norm of {name} grew {fmt(after.value / before.value)}x, from {fmt(before.value)} at step "
            f"{before.first} to {fmt(after.value)} at step {after.first} ({fmt(WEIGHT_BLOWUP)}x or more between two samples): "
            "the updates throw the weights")
    return 0.6, Evidence(text, jump, refs=(WEIGHT_BLOWUP,)), (after.first, earliest)


def _rising_points(view: RunView) -> Part:
    """The loss rose from its best level and stayed up over the last stretch (before any runaway to a non-finite loss)."""
    steps, values = finite_only(*after_quiet(view, *calm_loss(view)[:2]))
    if len(values) < 100:
        return 0.0, None, None
    sampled = thin(steps)  # the blocks are chosen on the sample block_medians takes; the medians shown are exact
    smooth = block_medians(values, 20)
    size = len(sampled) // 20
    offset = len(sampled) - size * 20
    best_block = int(np.argmin(smooth[:14]))
    inside = (steps >= sampled[offset + best_block * size]) & (steps <= sampled[offset + (best_block + 1) * size - 1])
    best = measure(LOSS, steps[inside], values[inside], "median")
    later = steps >= sampled[offset + 17 * size]
    now = measure(LOSS, steps[later], values[later], "median")
    shared = _start_vs_now(view)  # the finding's other lines quote the loss now over this window: one window, one value
    if shared is not None and shared.after.first > best.last:
        now = shared.after
    floor = float(np.min(smooth[-3:]))
    if now.value > 1.3 * best.value and floor > 1.15 * best.value and now.value - best.value > 0.05:
        change = Change(best, now, "up")
        up = np.flatnonzero(smooth[best_block + 1:] > 1.3 * best.value)
        onset = int(sampled[offset + (best_block + 1 + int(up[0])) * size]) if len(up) else now.first
        return 0.6, Evidence(f"loss {change_words(change)} from its lowest level after the first steps, {fmt(best.value)} over "
                             f"{best.where}, to {fmt(now.value)} over {now.where}", change), (onset, onset)
    return 0.0, None, None


def _clip_points(view: RunView) -> Part:
    steps, clipped = view.series("grad/clipped")
    if len(clipped) < 50:
        return 0.0, None, None
    share = measure("grad/clipped", *tail(steps, clipped, 0.2, 50), "mean")
    if share.value > 0.8:
        return 0.3, Evidence(f"gradient clipping active on {share.value:.0%} of the steps {share.where}", Level(share, above=0.8)), \
            (share.first, share.first)
    return 0.0, None, None


def _bad_input_before(view: RunView, step: int | None) -> bool:
    steps, values = view.series("input/nonfinite")
    if step is None or not len(values):
        return False
    return bool((values[(steps <= step) & (steps >= step - 1)] > 0).any())


DOUBLED = 2.0
"""A loss that doubled over the first updates from its value before any of them was made worse by the steps alone:
enough for the finding (the init and the inputs are ruled out separately, at step 0). A smaller rise needs another sign."""
DIED_AFTER = 0.5
"""Points for ReLU units that were alive and died once the steps overshot (a consequence, never enough alone)."""


def _onset_of(parts: list[Part]) -> tuple[int | None, int | None]:
    """(first step any of ``parts`` that scored held, earliest step any may have begun); ``(None, None)`` when none scored."""
    onsets = [onset for points, _, onset in parts if points > 0 and onset is not None]
    return (min(o[0] for o in onsets), min(o[1] for o in onsets)) if onsets else (None, None)


def lr_too_high(view: RunView) -> Finding | None:
    """Loss oscillates, rises or diverges because steps overshoot.

    Each signature adds points (the update/weight ratio, recent or far above the line earlier; a
    divergence; the loss up over the first steps, or above its start; a rise from its best; a
    weight matrix thrown 10x between two samples; clipping on most steps), and
    ReLU units that died after the first of them add more: the dead units are a consequence
    of the overshooting steps. ``first_step`` is the first step at which any signature held;
    ``onset_from``, for ordering it before its symptoms, comes from its own signatures (the
    updates and the loss), not from the divergence or clipping that restate its symptoms'.
    """
    parts = [_ratio_points(view), _divergence_points(view), _first_updates_points(view), _above_start_points(view),
             _rising_points(view), _weight_blowup_points(view), _clip_points(view)]
    own = [parts[0], *parts[2:6]]  # the divergence and clipping parts restate exploding_gradients, nonfinite_loss, over_clipping
    first, earliest = _onset_of(parts)
    if (mine := _onset_of(own)) != (None, None):
        earliest = mine[1]  # a cause precedes its symptoms by its own signature, not by the symptom it restates
    died = died_after(view, earliest) if earliest is not None else None
    score = sum(points for points, _, _ in parts) + (DIED_AFTER if died is not None else 0.0)
    if score < 1.0:
        return None
    evidence: list[str] = [text for _, text, _ in parts if text] + ([died] if died is not None else [])
    i = first_nonfinite(view)
    before = before_nonfinite(view, i) if i is not None else None
    abrupt = before is not None and not before.grew  # a numerical fault: a warning here, nonfinite_loss says it
    fix = fix_text(scaled(LR_DOWN, "reduce", view.lr_now, 0.1, " (3-10x lower)"),
                   (WARMUP_UP, f"add warmup over the first {max(100, view.n_steps // 20)} steps"),
                   (CLIP_TIGHTER, "clip gradients at 1.0"))
    severity = "critical" if i is not None and not abrupt else "warning"
    finding = Finding("lr_too_high", "Learning rate too high", min(0.95, 0.6 + 0.2 * score), severity, evidence, fix, first)
    finding.onset_from = earliest
    return finding


def _small_steps(ratio: Measure | None, drop: float) -> tuple[float, Evidence | None]:
    """Confidence that updates are too small (0: they are not), with the update-ratio evidence."""
    if ratio is not None and ratio.value < 1e-5:
        return 0.9, Evidence(f"update/weight ratio median {fmt(ratio.value)} over {ratio.where} (healthy ~1e-3; below 1e-5 "
                             "barely moves the weights)", Level(ratio, below=1e-5), refs=(1e-3, 1e-5))
    if ratio is not None and ratio.value < 1e-4:
        return 0.75, Evidence(f"update/weight ratio median {fmt(ratio.value)} over {ratio.where} (low; healthy ~1e-3)",
                              Level(ratio, below=1e-4), refs=(1e-3,))
    if ratio is None and drop < 0.05:
        return 0.5, None
    return 0.0, None


def lr_too_low(view: RunView) -> Finding | None:
    """Loss falls far too slowly while gradients are healthy: steps are too small."""
    steps, values = view.loss
    if view.n_steps < 20 or not np.isfinite(values).all() or lr_collapse_step(view)[0] is not None:
        return None
    ratio = update_ratio(view)
    if ratio is None and view.n_steps < 100:
        return None  # a flat loss alone needs 100 steps to say anything; tiny updates say it as soon as they are measured
    change = first_vs_last(LOSS, steps, values)
    drop = drop_of(change)
    g_steps, g = view.grad_total
    grad = measure(GRAD_NORM_TOTAL, g_steps, g, "median") if len(g) else None
    if drop > 0.2 or grad is None or not (grad.value > 1e-3) or _starved_layer(view) is not None:
        return None
    if change is not None and change.says == "up" and change.relative > ROSE_NOT_LOW:
        return None  # small steps make progress slow, not negative: a loss that climbed is something else's doing
    confidence, ratio_text = _small_steps(ratio, drop)
    if not confidence or change is None:
        return None
    only = "only " if change.says == "down" else ""
    evidence: list[str] = [
        Evidence(f"loss {only}{loss_words(change)}", change),
        Evidence(f"gradient norm median {fmt(grad.value)} over {grad.where} is not small: gradients are there, steps are too "
                 "small", Level(grad, above=1e-3))]
    evidence[:0] = [ratio_text] if ratio_text else []
    fix = fix_text(_raise_clause(view.lr_now, ratio), "confirm with an LR range test")
    return Finding("lr_too_low", "Learning rate too low", confidence, "warning", evidence, fix, int(steps[0]))


HEALTHY_RATIO = 1e-3
"""The update/weight ratio of a training that moves its weights at a healthy pace."""
ROSE_NOT_LOW = 0.25
"""A loss this much above its start is not held back by a small LR: too small a step never makes the loss climb."""
MAX_RAISE = 1000.0
"""The most the fix raises the LR in one go, however far below a healthy pace the updates are."""


def _raise_clause(lr_now: float | None, ratio: Measure | None) -> tuple[Move, LRClause]:
    """How far to raise the LR: 10x (2-10x) without a measured update/weight ratio; with one, by the factor that
    brings it to :data:`HEALTHY_RATIO` (an update grows about in proportion to the LR, for SGD and Adam alike),
    at least 10x and at most :data:`MAX_RAISE`. A ratio of 4e-8 is 25,000x below healthy: a 10x raise left such a
    run as flat as before."""
    if ratio is None or not ratio.value > 0 or HEALTHY_RATIO / ratio.value <= 10:
        return scaled(LR_UP, "raise", lr_now, 10, " (2-10x higher)")
    gap = HEALTHY_RATIO / ratio.value
    factor = min(gap, MAX_RAISE)
    note = (f" ({factor:,.0f}x: the update/weight ratio is {gap:,.0f}x below a healthy {fmt(HEALTHY_RATIO)}, and an update "
            "grows about in proportion to the LR" + (f"; at most {MAX_RAISE:,.0f}x at once" if gap > MAX_RAISE else "") + ")")
    return scaled(LR_UP, "raise", lr_now, factor, note)


STARVED_ORDERS = 3.0
"""A weight layer whose recent gradient norm is this many orders of magnitude below the largest layer's gets
next to nothing (the line :func:`~tuidiag.diagnosis.rules.gradients.vanishing_gradients` draws)."""
STARVED_FLOOR = 1e-8
"""...or whose recent gradient norm is below this: no step size moves a layer with such gradients."""


def _starved_layer(view: RunView) -> tuple[str, float] | None:
    """A weight layer whose recent gradient is zero, vanishingly small, or orders of magnitude below the largest
    layer's (its name and median): updates are small because little flows there, not because of the LR."""
    medians = {}
    for name in view.weight_params:
        values = view.series(GRAD_NORM_PREFIX + name)[1]
        if len(values):
            medians[name] = median(values[-max(10, len(values) // 5):])
    if not medians:
        return None
    name = min(medians, key=lambda n: medians[n])
    low, high = medians[name], max(medians.values())
    if not low > STARVED_FLOOR or not np.isfinite(high) or low * 10**STARVED_ORDERS < high:
        return name, low
    return None


RULES = [lr_too_high, lr_too_low]

"""Signatures of overshooting steps over the whole run, with the step each first held.

The LR rule judged the update/weight ratio on the recent half and the loss at the end
only, so a run whose steps overshot early and then broke (units died, updates
stopped, the loss settled at the chance level) looked calm where it was judged. These
look over the whole run after the quiet first steps:

- a far overshoot: a sample whose update/weight ratio is above 3e-2 (30x healthy);
- a sustained rise: a block of steps whose median loss is well above its start, or a loss
  that rose over the quiet first steps instead of falling;
- a weight blow-up: a weight matrix whose norm grew 10x or more from one sample to the
  next, at any step (the first updates of a far too high LR are in the quiet steps, and
  the units they kill stop every later signature);
- ReLU units that were alive and died after the overshooting began: a consequence
  that points back at the LR rather than at the units themselves.
"""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.evidence import Change, Evidence, Level, Measure, at_step, measure, stat_of
from tuidiag.diagnosis.module_names import DEAD_FAMILY, family, module_label
from tuidiag.diagnosis.rules.activations import DEAD_LIMIT
from tuidiag.diagnosis.rules.measures import after_quiet, finite_only
from tuidiag.diagnosis.rules.precursors import calm_loss
from tuidiag.diagnosis.stats import column_medians, grouped_median
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import ACT_DEAD_PREFIX, LOSS, UPDATE_RATIO_PREFIX, WEIGHT_NORM_PREFIX

DIED_BY = 0.25
"""A layer died when its dead share rose at least this much (25 points) to over the limit, not when it hovered around it."""
RATIO_HIGH, RATIO_OVERSHOOT = 5e-3, 1e-2
"""Update/weight ratios above these are high / overshooting (healthy ~1e-3)."""
FAR_OVERSHOOT = 3e-2
"""An update/weight ratio far above the overshoot line (30x healthy): healthy runs sample up to ~2e-2 right after
their quiet steps, so a sample just above 1e-2 there proves little, one above this does."""
RISE, RISE_MIN = 1.5, 0.1
"""A loss block this many times its start (and this much above it) rose: the updates made it worse."""
WEIGHT_BLOWUP = 10.0
"""A weight matrix's norm this many times its previous sample's: the updates threw the weights. Over the labelled
suite's healthy runs (and its faults other than the LR) weight norms grew at most 6x over their first three samples."""


def _ratio_samples(view: RunView) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(metrics, sampled steps after the quiet ones, the median update/weight ratio over the weight matrices at each)."""
    names = tuple(UPDATE_RATIO_PREFIX + n for n in (view.weight_params or view.param_order))
    kept = []
    for name in names:
        steps, values = view.series(name)
        judged = ~view.quiet_mask(steps)
        kept.append((steps[judged], values[judged]))
    if not kept:
        return names, np.empty(0, np.int64), np.empty(0)
    if all(np.array_equal(s, kept[0][0]) for s, _ in kept):  # sampled together, as the recorder does: a median per column
        return names, kept[0][0].astype(np.int64), column_medians(np.stack([v for _, v in kept]))
    steps, medians = grouped_median(np.concatenate([s for s, _ in kept]).astype(np.int64), np.concatenate([v for _, v in kept]))
    return names, steps, medians


def ratio_onset(view: RunView, threshold: float) -> tuple[int, int] | None:
    """(first sampled step after the quiet ones whose update/weight ratio is above ``threshold``, the earliest step it may have
    begun: the step after the sample before it, or the run's first sample when that one was quiet and not judged)."""
    _, steps, medians = _ratio_samples(view)
    over = np.flatnonzero(medians > threshold)
    if not len(over):
        return None
    i = int(over[0])
    if i > 0:
        return int(steps[i]), int(steps[i - 1]) + 1
    names = [n for n in (view.weight_params or view.param_order)]
    sampled = view.series(UPDATE_RATIO_PREFIX + names[0])[0] if names else steps
    return int(steps[0]), int(sampled[0]) if len(sampled) else int(steps[0])


def far_overshoot(view: RunView) -> Measure | None:
    """The update/weight ratio (pooled over the weight matrices) at the first sample after the quiet steps above 3e-2."""
    names, steps, medians = _ratio_samples(view)
    over = np.flatnonzero(medians > FAR_OVERSHOOT)
    if not len(over):
        return None
    step = int(steps[over[0]])
    values = np.concatenate([v[s == step] for s, v in (view.series(n) for n in names)])
    return Measure(names, step, step, "median", stat_of(values, "median"))


def weight_blowup(view: RunView) -> tuple[Change, int] | None:
    """The first sample at which a weight matrix's norm was 10x or more its previous sample's, with the earliest
    step the jump may have begun (the step after that previous sample)."""
    found: tuple[Change, int] | None = None
    for name in view.weight_params:
        metric = WEIGHT_NORM_PREFIX + name
        steps, values = finite_only(*view.series(metric))
        if len(values) < 2:
            continue
        before, after = values[:-1], values[1:]
        jumps = np.flatnonzero((before > 0) & (after >= WEIGHT_BLOWUP * before))
        if len(jumps) and (found is None or steps[jumps[0] + 1] < found[0].after.first):
            i = int(jumps[0])
            found = Change(at_step(metric, steps, values, i), at_step(metric, steps, values, i + 1), "up"), int(steps[i]) + 1
    return found


def sustained_rise(view: RunView, start: Measure) -> tuple[Change, int] | None:
    """The first block of steps after the quiet ones whose median loss is 1.5x its start and 0.1 above it, with the earliest
    step the rise may have begun: the previous block's first step, or the run's first when it is the first block judged.
    Blocks end before any runaway to a non-finite loss (:func:`calm_loss`), whose median would hide it."""
    steps, values = finite_only(*after_quiet(view, *calm_loss(view)[:2]))
    size = max(5, len(values) // 20)
    for first in range(0, len(values) - size + 1, size):
        block = measure(LOSS, steps[first:first + size], values[first:first + size], "median")
        if block.value > RISE * start.value and block.value - start.value > RISE_MIN:
            return Change(start, block, "up"), int(steps[first - size]) if first else int(view.loss[0][0])
    return None


def first_updates_rise(view: RunView) -> Change | None:
    """The loss over the quiet first steps against its first value (before any update), when 1.5x it and 0.1 above it.

    No rule judges the quiet steps, where the loss legitimately falls fast; a loss that rises
    there instead was made worse by the very first updates."""
    steps, values = finite_only(*view.loss)
    quiet = (steps > steps[0]) & view.quiet_mask(steps) if len(steps) else steps.astype(bool)
    if quiet.sum() < 5:
        return None
    first = at_step(LOSS, steps, values, 0)
    window = measure(LOSS, steps[quiet], values[quiet], "median")
    if window.value > RISE * first.value and window.value - first.value > RISE_MIN and first.value > 0:
        return Change(first, window, "up")
    return None


def rise_words(change: Change) -> str:
    """``loss rose to 2.5 over steps 20-34, 1.8x its level of 1.39 over steps 0-4``."""
    before, after = change.before, change.after
    return (f"loss rose to {fmt(after.value)} over {after.where}, {fmt(after.value / before.value)}x its level of "
            f"{fmt(before.value)} over {before.where}")


def died_after(view: RunView, since: int) -> Evidence | None:
    """ReLU layers with most units dead at a sample at or after step ``since`` that had few before it.

    "Before" is the layer's last sample before ``since`` (or its first, taken before any
    update, when none is); the layer died when a later sample is over half dead and at
    least ``DIED_BY`` above it, so a layer hovering around the limit does not count.
    """
    shown = []
    for name in sorted(n for n in view.run.metric_names if n.startswith(ACT_DEAD_PREFIX)):
        steps, values = view.series(name)
        if len(values) < 2:
            continue
        i = max(int(np.searchsorted(steps, since)) - 1, 0)
        later = np.flatnonzero((np.arange(len(values)) > i) & (values > DEAD_LIMIT) & (values >= values[i] + DIED_BY))
        if values[i] <= DEAD_LIMIT and len(later):
            shown.append((name, at_step(name, steps, values, i), at_step(name, steps, values, int(later[0]))))
    if not shown:
        return None
    kind = family(view.model, DEAD_FAMILY)
    parts = [f"{module_label(view.model, name[len(ACT_DEAD_PREFIX):], kind)} from {was.value:.0%} dead units at step {was.first} to {now.value:.0%} at step "
             f"{now.first}" for name, was, now in shown[:3]]
    claims = [c for _, was, now in shown[:3] for c in (Level(was), Level(now, above=DEAD_LIMIT))]
    return Evidence(f"ReLU units died after the steps began to overshoot: {'; '.join(parts)}", *claims, refs=(DEAD_LIMIT,))

"""Shared helpers for rules: windows of a run, LR advice text, the update/weight ratio, start levels."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tuidiag.diagnosis.evidence import Change, Measure, direction, measure, quoted, stat_of
from tuidiag.diagnosis.stats import median
from tuidiag.text.numbers import fmt
from tuidiag.diagnosis.view import RunView
from tuidiag.format import LR_GROUP0, UPDATE_RATIO_PREFIX

HUGE_GRAD = 100.0
"""A total gradient norm this far above the healthy 0.1-10 range is exploding, whatever the cause."""
MIN_RATIO_SAMPLES = 3
"""Update ratios are judged only once this many optimizer steps were sampled after the first ones."""
LR_COLLAPSE = 0.05
"""An LR below this share of its peak has collapsed (the schedule stopped learning)."""


def after_quiet(view: RunView, steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the first steps of the run, where loss legitimately falls fast, and as many after each resume.

    Without resumes the result is a view, not a copy (steps are in order)."""
    if view.resume_steps:
        keep = ~view.quiet_mask(steps)
        return steps[keep], values[keep]
    first = int(np.searchsorted(steps, view.quiet_steps(), side="left"))
    return steps[first:], values[first:]


def recent(values: np.ndarray, share: float = 0.2, minimum: int = 20) -> np.ndarray:
    """The newest ``share`` of a series (at least ``minimum`` values)."""
    n = max(minimum, int(len(values) * share))
    return values[-n:]


def tail(steps: np.ndarray, values: np.ndarray, share: float = 0.2, minimum: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of the newest ``share`` of a series (at least ``minimum`` values), as :func:`recent`."""
    n = max(minimum, int(len(values) * share))
    return steps[-n:], values[-n:]


def finite_only(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The finite values of a series with their steps (the arrays themselves, uncopied, when all are finite)."""
    ok = np.isfinite(values)
    return (steps, values) if ok.all() else (steps[ok], values[ok])


def steps_between(steps: np.ndarray, values: np.ndarray, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """The points of a series whose steps lie within ``first`` ... ``last`` (both included)."""
    keep = (steps >= first) & (steps <= last)
    return steps[keep], values[keep]


def first_vs_last(metric: str, steps: np.ndarray, values: np.ndarray, share: float = 0.1, minimum: int = 3) -> Change | None:
    """Median of the first ``share`` of the finite values against the last ``share`` (at least ``minimum`` each).

    ``None`` below 10 finite values; the two windows never overlap. The change's
    ``says`` is the direction of the medians.
    """
    steps, values = finite_only(steps, values)
    if len(values) < 10:
        return None
    n = max(minimum, len(values) // int(round(1 / share)))
    before = measure(metric, steps[:n], values[:n], "median")
    after = measure(metric, steps[-n:], values[-n:], "median")
    return Change(before, after, direction(before.value, after.value))


def update_ratio(view: RunView) -> Measure | None:
    """Median update/weight ratio over matrix parameters in the recent half (``None`` when too few samples).

    Samples from the first (quiet) steps are left out: Adam's first updates are
    lr-sized in every coordinate whatever the gradient, so they always look large.
    The recent half starts at the middle step of the longest series after the quiet steps.
    """
    names = view.weight_params or view.param_order
    longest = np.empty(0, np.int64)
    for name in names:
        steps = view.series(UPDATE_RATIO_PREFIX + name)[0]
        steps = steps[~view.quiet_mask(steps)]
        longest = steps if len(steps) > len(longest) else longest
    if len(longest) < MIN_RATIO_SAMPLES:
        return None
    first, last = int(longest[len(longest) // 2]), int(longest[-1])
    pooled = []
    for name in names:
        steps, values = view.series(UPDATE_RATIO_PREFIX + name)
        pooled.append(values[(steps >= first) & (steps <= last) & ~view.quiet_mask(steps)])
    metrics = tuple(UPDATE_RATIO_PREFIX + n for n in names)
    return Measure(metrics, first, last, "median", stat_of(np.concatenate(pooled), "median"))


def listing(measures: Sequence[Measure], names: Sequence[str], show: Callable[[float], str] = fmt) -> str:
    """``'a' 1.2, 'b' 3.4 over steps 0-99`` (each item names its own window when the windows differ)."""
    same = len({(m.first, m.last) for m in measures}) <= 1
    items = [f"{quoted(n)} {show(m.value)}" + ("" if same else f" ({m.where})") for m, n in zip(measures, names)]
    return ", ".join(items) + (f" over {measures[0].where}" if same and measures else "")


def drop_of(change: Change | None) -> float:
    """Relative drop of a change (positive when it fell); 0 without a change or from 0."""
    if change is None or not change.before.value:
        return 0.0
    return (change.before.value - change.after.value) / abs(change.before.value)


def start_level(values: np.ndarray, n: int = 5) -> float:
    """Median of the first ``n`` finite values (NaN when there are none)."""
    good = values[np.isfinite(values)]
    return median(good[:n])


def start_measure(metric: str, steps: np.ndarray, values: np.ndarray, n: int = 5) -> Measure | None:
    """:func:`start_level` as a measure over its window (``None`` without finite values)."""
    steps, values = finite_only(steps, values)
    return measure(metric, steps[:n], values[:n], "median") if len(values) else None


def grad_at_start(view: RunView) -> float:
    """Total gradient norm at the first recorded step, before any update could have inflated it.

    Only that one: the first update is already the LR's doing, so a norm that was healthy
    there and huge one step later was made huge by the steps (a cause precedes its symptoms),
    not by the init or the inputs."""
    return start_level(view.grad_total[1], 1)


def huge_from_start(view: RunView) -> bool:
    """Gradient norms were far outside the healthy range at the first step, before any update: init or input scale, not the LR."""
    return bool(grad_at_start(view) >= HUGE_GRAD)


def lr_collapse_step(view: RunView) -> tuple[int | None, float]:
    """(first step at which LR fell below 5% of its peak and stayed there, the peak); ``None`` if it did not."""
    steps, lr = view.series(LR_GROUP0)
    if len(lr) < 2 or not np.nanmax(lr) > 0:
        return None, float("nan")
    peak = float(np.nanmax(lr))
    low = lr < LR_COLLAPSE * peak
    if not low[-1]:
        return None, peak
    high = np.flatnonzero(~low)
    first = int(high[-1]) + 1 if len(high) else 0
    return int(steps[first]), peak

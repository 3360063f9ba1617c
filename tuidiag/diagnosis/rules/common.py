"""Shared helpers for rules: windows of a run, LR advice text, the update/weight ratio, start levels."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView
from tuidiag.format import UPDATE_RATIO_PREFIX

HUGE_GRAD = 100.0
"""A total gradient norm this far above the healthy 0.1-10 range is exploding, whatever the cause."""
MIN_RATIO_SAMPLES = 3
"""Update ratios are judged only once this many optimizer steps were sampled after the first ones."""
LR_COLLAPSE = 0.05
"""An LR below this share of its peak has collapsed (the schedule stopped learning)."""


def after_quiet(view: RunView, steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the first steps of the run, where loss legitimately falls fast, and as many after each resume."""
    keep = ~view.quiet_mask(steps)
    return steps[keep], values[keep]


def recent(values: np.ndarray, share: float = 0.2, minimum: int = 20) -> np.ndarray:
    """The newest ``share`` of a series (at least ``minimum`` values)."""
    n = max(minimum, int(len(values) * share))
    return values[-n:]


def update_ratio(view: RunView) -> tuple[float, int]:
    """Median update/weight ratio over matrix parameters in the recent half, and sample count.

    Samples from the first (quiet) steps are left out: Adam's first updates are
    lr-sized in every coordinate whatever the gradient, so they always look large.
    """
    names = view.weight_params or view.param_order
    samples, recorded = [], 0
    for name in names:
        steps, values = view.series(UPDATE_RATIO_PREFIX + name)
        values = values[~view.quiet_mask(steps)]
        recorded = max(recorded, len(values))
        samples.append(values[len(values) // 2 :])
    if recorded < MIN_RATIO_SAMPLES:
        return float("nan"), 0
    pooled = np.concatenate(samples)
    return median(pooled), len(pooled)


def lr_change(view: RunView, factor: float) -> str:
    """'from 3e-2 to about 3e-3' for the current LR times ``factor`` (or a relative phrase)."""
    lr = view.lr_now
    if lr is None or lr <= 0:
        return f"by about {1 / factor:.0f}x" if factor < 1 else f"by about {factor:.0f}x"
    return f"from {fmt(lr)} to about {fmt(lr * factor)}"


def loss_drop(values: np.ndarray) -> float:
    """Relative drop of the loss from the first to the last tenth (robust medians); 0 when flat."""
    good = values[np.isfinite(values)]
    if len(good) < 10:
        return 0.0
    tenth = max(3, len(good) // 10)
    start, end = median(good[:tenth]), median(good[-tenth:])
    return (start - end) / abs(start) if start else 0.0


def start_level(values: np.ndarray, n: int = 5) -> float:
    """Median of the first ``n`` finite values (NaN when there are none)."""
    good = values[np.isfinite(values)]
    return median(good[:n])


def grad_at_start(view: RunView) -> float:
    """Total gradient norm over the first recorded steps, before updates could have inflated it."""
    return start_level(view.grad_total[1], 3)


def huge_from_start(view: RunView) -> bool:
    """Gradient norms were far outside the healthy range from the first step: init or input scale, not the LR."""
    return bool(grad_at_start(view) >= HUGE_GRAD)


def lr_collapse_step(view: RunView) -> tuple[int | None, float]:
    """(first step at which LR fell below 5% of its peak and stayed there, the peak); ``None`` if it did not."""
    steps, lr = view.series("lr/group0")
    if len(lr) < 2 or not np.nanmax(lr) > 0:
        return None, float("nan")
    peak = float(np.nanmax(lr))
    low = lr < LR_COLLAPSE * peak
    if not low[-1]:
        return None, peak
    high = np.flatnonzero(~low)
    first = int(high[-1]) + 1 if len(high) else 0
    return int(steps[first]), peak

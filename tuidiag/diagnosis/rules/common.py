"""Shared helpers for rules: windows of a run, LR advice text, the update/weight ratio."""

from __future__ import annotations

import numpy as np

from tuidiag.diagnosis.stats import fmt, median
from tuidiag.diagnosis.view import RunView
from tuidiag.format import UPDATE_RATIO_PREFIX


def after_quiet(view: RunView, steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop the first steps of the run, where loss legitimately falls fast."""
    keep = steps >= view.quiet_steps()
    return steps[keep], values[keep]


def recent(values: np.ndarray, share: float = 0.2, minimum: int = 20) -> np.ndarray:
    """The newest ``share`` of a series (at least ``minimum`` values)."""
    n = max(minimum, int(len(values) * share))
    return values[-n:]


def update_ratio(view: RunView) -> tuple[float, int]:
    """Median update/weight ratio over matrix parameters in the recent half, and sample count.

    Samples from the quiet start of a run are ignored: Adam's first steps move every
    weight by about the LR whatever the gradient, which would read as overshooting.
    """
    names = view.weight_params or view.param_order
    samples = []
    for name in names:
        steps, values = after_quiet(view, *view.series(UPDATE_RATIO_PREFIX + name))
        samples.append(values[len(values) // 2 :])
    pooled = np.concatenate(samples) if samples else np.empty(0)
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

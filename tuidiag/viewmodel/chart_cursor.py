"""The chart cursor: where the keys move it, and what each series recorded nearest to it.

The readout names real recorded points: for each series, the sample whose step is
nearest the cursor (the earlier one on a tie), with its own step and value, and
its smoothed value when the chart smooths. Works on the (steps, values) arrays
the chart draws, whatever produced them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tuidiag.text.numbers import duration, fmt

BIG_MOVE = 10
"""A shifted cursor key moves this many chart columns at once."""


@dataclass(frozen=True)
class Sample:
    """One series' recorded point nearest the cursor."""

    label: str
    step: float
    value: float
    smoothed: float | None = None


def nearest_index(steps: np.ndarray, at: float) -> int | None:
    """Index of the finite step nearest ``at`` (the first such on a tie); None when there is none."""
    x = np.asarray(steps, dtype=np.float64).reshape(-1)
    good = np.isfinite(x)
    if not good.any() or not math.isfinite(at):
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        distance = np.where(good, np.abs(x - at), np.inf)
    if not np.isfinite(distance).any():  # every difference overflowed: compare halves instead
        distance = np.where(good, np.abs(x / 2 - at / 2), np.inf)
    return int(np.argmin(distance))


def readout(lines: tuple[tuple[str, np.ndarray, np.ndarray], ...], at: float,
            smoothed: tuple[np.ndarray | None, ...] = ()) -> tuple[Sample | None, ...]:
    """For each line, its finite point nearest step ``at`` (and the smoothed value there); None for a
    line without one. One entry per line, in order."""
    samples: list[Sample | None] = []
    for i, (label, steps, values) in enumerate(lines):
        x = np.asarray(steps, dtype=np.float64).reshape(-1)
        y = np.asarray(values, dtype=np.float64).reshape(-1)
        n = min(len(x), len(y))
        usable = np.flatnonzero(np.isfinite(x[:n]) & np.isfinite(y[:n]))
        where = nearest_index(x[usable], at)
        if where is None:
            samples.append(None)
            continue
        index = int(usable[where])
        smooth = smoothed[i] if i < len(smoothed) else None
        value = float(smooth[index]) if smooth is not None and index < len(smooth) and math.isfinite(smooth[index]) else None
        samples.append(Sample(label, float(x[index]), float(y[index]), value))
    return tuple(samples)


def readout_text(at: int, samples: tuple[Sample | None, ...], glyphs: tuple[str, ...], elapsed: float | None = None,
                 width: int | None = None) -> str:
    """``step 1200 (12m05s): ⠤ train 0.532 (ema 0.551)  • val 0.61 @1000``: ``glyphs`` go with ``samples``
    in order. A sample recorded at another step than the cursor's says where (``@``); when every
    sample was, the step is said once (``step 1999, nearest 1975:``). Wider than ``width``, the EMA
    values are left out first."""
    shown = [(sample, glyph) for sample, glyph in zip(samples, glyphs) if sample is not None]
    steps = {sample.step for sample, _ in shown}
    shared = steps.pop() if len(steps) == 1 else None
    head = f"step {at}" + (f" ({duration(elapsed)})" if elapsed is not None and math.isfinite(elapsed) else "")
    if shared is not None and shared != at:
        head += f", nearest {_step(shared)}"
    if not shown:
        return head + ": no data"
    text = ""
    for with_ema in (True, False):
        parts = [head + ":"]
        for sample, glyph in shown:
            part = f"{glyph} {sample.label} {fmt(sample.value)}"
            if with_ema and sample.smoothed is not None:
                part += f" (ema {fmt(sample.smoothed)})"
            if shared is None and sample.step != at:
                part += f" @{_step(sample.step)}"
            parts.append(part)
        text = "  ".join(parts)
        if width is None or len(text) <= width:
            break
    return text


def _step(step: float) -> str:
    return f"{step:.0f}" if abs(step) < 1e15 else fmt(step)


def move_cursor(cursor: int | None, first: int, last: int, columns: int, direction: int, big: bool = False) -> int:
    """The cursor after one key: ``direction`` (-1, 1) times one chart column's worth of steps
    (``BIG_MOVE`` columns when ``big``), kept in [first, last]. A hidden cursor appears at ``last``."""
    if last < first:
        first, last = last, first
    if cursor is None:
        return last
    per_column = max(1, round((last - first) / max(1, columns)))
    moved = cursor + direction * per_column * (BIG_MOVE if big else 1)
    return max(first, min(last, moved))

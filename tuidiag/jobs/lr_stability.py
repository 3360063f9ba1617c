"""How far an LR-finder suggestion moves when the sweep's batch noise is drawn again.

A range test sees one batch per LR, so its curve is one noisy sample: when the
descent is small next to the batch-to-batch noise, the steepest point follows a
lucky batch, and batches in another order give another answer. This check
splits the raw losses into a trend (a running median) and residuals (the batch
noise), and builds resampled curves that put back, at each LR, a residual drawn
from the same neighbourhood of the curve: the noise keeps its local size but
lands on other LRs, as with the batches in another order. The suggestion rule
(any function of the raw losses) runs on each resampled curve; when the middle
80% of its suggestions spans more than :data:`SPREAD_LIMIT`, the sweep is not
reliable. Pure numpy: no training is repeated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Rule = Callable[[np.ndarray], "float | None"]
"""``rule(raw_losses) -> suggested LR`` (None when the curve gives none); the LRs are fixed."""

RESAMPLES = 32
"""Resampled curves per check (about 2 ms each for a 100-step sweep)."""
SPREAD_LIMIT = 3.0
"""A sweep whose middle 80% of resampled suggestions spans more than this factor is unreliable."""
QUANTILES = (0.1, 0.9)
"""The share of resampled suggestions whose span is judged (the middle 80%)."""


@dataclass(frozen=True)
class Stability:
    """What the resampled curves suggested: the middle 80% range and how many gave none."""

    resamples: int
    low: float | None
    high: float | None
    missing: int
    """Resampled curves on which the rule gave no suggestion."""

    @property
    def spread(self) -> float:
        """``high / low`` (infinite when the resamples gave too few suggestions)."""
        if self.low is None or self.high is None or self.low <= 0:
            return float("inf")
        return self.high / self.low

    @property
    def stable(self) -> bool:
        """True when the suggestions agree within :data:`SPREAD_LIMIT`."""
        return self.spread <= SPREAD_LIMIT

    def describe(self) -> str:
        """The spread in words: "over 32 resamples of the batch noise the middle 80% of suggestions spans A..B (Nx)"."""
        if self.low is None or self.high is None:
            return f"{self.missing} of {self.resamples} resamples of the batch noise gave no suggestion"
        factor = f"{self.spread:.0f}x" if self.spread >= 10 else f"{self.spread:.1f}x"
        return (f"over {self.resamples} resamples of the batch noise the middle 80% of suggestions "
                f"spans {self.low:.2g}..{self.high:.2g} ({factor})")

    def warning(self) -> str | None:
        """Why the suggestion cannot be trusted, with the spread (None when it is stable)."""
        if self.stable:
            return None
        return f"unreliable: {self.describe()}; stable is at most {SPREAD_LIMIT:g}x"

    def to_json(self) -> dict[str, Any]:
        """The check as stored in the job's result."""
        spread = self.spread
        return {"resamples": self.resamples, "low": self.low, "high": self.high, "missing": self.missing,
                "spread": spread if np.isfinite(spread) else None, "limit": SPREAD_LIMIT}


def running_median(values: np.ndarray, half: int) -> np.ndarray:
    """The median of each point's neighbourhood ``[i - h, i + h]``, ``h = half`` shrunk near the
    ends so the window stays centred (a straight line is its own running median)."""
    n = len(values)
    out = np.empty(n)
    for i in [*range(min(half, n)), *range(max(half, n - half), n)]:
        h = min(half, i, n - 1 - i)
        out[i] = np.median(values[i - h: i + h + 1])
    if n > 2 * half:
        out[half: n - half] = np.median(np.lib.stride_tricks.sliding_window_view(values, 2 * half + 1), axis=1)
    return out


class Resampler:
    """Draws resampled curves of one sweep: its trend plus residuals from each point's neighbourhood.

    Only the finite prefix is resampled; a non-finite tail (the divergence) is kept. When
    every loss is positive the split is made on log(loss): batch noise scales with the
    loss, and a resampled loss stays positive (a cross-entropy never goes below 0).
    """

    def __init__(self, losses: list[float] | np.ndarray) -> None:
        self.losses = np.asarray(losses, dtype=np.float64)
        finite = np.isfinite(self.losses)
        self.m = len(self.losses) if finite.all() else int(np.argmin(finite))
        head = self.losses[: self.m]
        self.positive = bool((head > 0).all())
        values = np.log(head) if self.positive else head
        self.reach = 2 * max(2, self.m // 25)
        self.trend = running_median(values, self.reach // 2) if self.m >= 3 else values
        self.residuals = values - self.trend

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One resampled curve (the curve itself when it is shorter than 3 points)."""
        out = self.losses.copy()
        if self.m < 3:
            return out
        picks = np.clip(np.arange(self.m) + rng.integers(-self.reach, self.reach + 1, self.m), 0, self.m - 1)
        values = self.trend + self.residuals[picks]
        out[: self.m] = np.exp(values) if self.positive else values
        return out


def fall_and_noise(losses: list[float] | np.ndarray, a: int, b: int) -> tuple[float, float]:
    """How far the loss's trend (a running median) falls over the points ``[a, b)``, and the batch
    noise (a robust standard deviation, from neighbouring differences); both 0 on too short a curve."""
    raw = np.asarray(losses, dtype=np.float64)
    finite = np.isfinite(raw)
    m = len(raw) if finite.all() else int(np.argmin(finite))
    b = min(b, m)
    if b - a < 3:
        return 0.0, 0.0
    steps = np.diff(raw[:m])  # the trend cancels out of neighbouring differences; the noise adds up (sqrt 2)
    noise = 1.4826 * float(np.median(np.abs(steps - np.median(steps)))) / np.sqrt(2.0)
    trend = running_median(raw[:m], max(2, (b - a) // 10))
    return float(trend[a] - trend[a:b].min()), noise


def stability(losses: list[float] | np.ndarray, rule: Rule, resamples: int = RESAMPLES, seed: int = 0) -> Stability:
    """Run ``rule`` on ``resamples`` resampled curves of ``losses``; deterministic for a ``seed``."""
    rng, curves = np.random.default_rng(seed), Resampler(losses)
    found: list[float] = []
    for _ in range(resamples):
        value = rule(curves.draw(rng))
        if value is not None and np.isfinite(value) and value > 0:
            found.append(float(value))
    missing = resamples - len(found)
    if len(found) < resamples / 2:
        return Stability(resamples, None, None, missing)
    low, high = np.quantile(np.asarray(found), QUANTILES, method="nearest")  # actual suggestions, not interpolated
    return Stability(resamples, float(low), float(high), missing)

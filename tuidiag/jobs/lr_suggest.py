"""The rules that turn an LR range test's curve into a suggested learning rate.

Each rule reads the part of the sweep used for suggestions (``lrs`` growing
exponentially, ``losses`` the smoothed loss at each, both finite) and returns one
of the swept LRs, or a tenth of one for ``min_div10``:

- ``steepest``: the steepest descent of the loss against log(lr), torch-lr-finder's rule;
- ``valley``: fastai's valley, halfway along the longest decreasing run of the curve;
- ``min_div10``: the LR of the lowest loss, divided by 10;
- ``valley_floor``: fastai's valley when the curve falls clearly (by at least
  :data:`MIN_DESCENT` of its first value); on a flat curve (a model that has not
  started learning within the sweep, or a mid-training checkpoint, whose loss
  only rises once the LR is too high) a tenth of the end of its floor: the
  largest LR at which the loss is still within :data:`MIN_DESCENT` of its minimum.

Every suggestion is clamped to ``[lrs[0], lrs[-1]]``. ``benchmarks/lr_finder_quality.py``
scores each rule by training at its suggestion; docs/lr_finder.md has the table
and why :data:`DEFAULT_RULE` is the default.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Rule = Callable[[np.ndarray, np.ndarray], float]
"""``rule(lrs, losses) -> lr``: both arrays of the same length (at least 3), finite, lrs increasing."""


def steepest_index(lrs: np.ndarray, losses: np.ndarray) -> int:
    """Index of the most negative slope d(loss)/d(log lr)."""
    slopes = np.gradient(losses, np.log(lrs))
    return int(np.argmin(slopes))


def valley_index(losses: np.ndarray) -> int:
    """fastai's valley: halfway along the longest decreasing run (a subsequence) of the curve."""
    n = len(losses)
    lds = np.ones(n, dtype=np.int64)
    max_start, max_end = 0, 0
    for i in range(1, n):
        higher = losses[:i] > losses[i]
        if higher.any():
            lds[i] = int(lds[:i][higher].max()) + 1
        if lds[i] > lds[max_end]:
            max_end, max_start = i, i - int(lds[i])
    sections = (max_end - max_start) / 3
    return max(0, min(n - 1, max_start + int(sections) + int(sections / 2)))


def steepest(lrs: np.ndarray, losses: np.ndarray) -> float:
    """torch-lr-finder's suggestion: the LR of the steepest descent."""
    return float(lrs[steepest_index(lrs, losses)])


def valley(lrs: np.ndarray, losses: np.ndarray) -> float:
    """fastai's suggestion: the LR halfway along the longest decreasing run of the curve."""
    return float(lrs[valley_index(losses)])


def min_div10(lrs: np.ndarray, losses: np.ndarray) -> float:
    """The rule of thumb: the LR of the lowest loss, divided by 10."""
    return float(lrs[int(np.argmin(losses))] / 10.0)


MIN_DESCENT = 0.05
"""A curve whose loss falls less than this share of its first value shows no clear descent."""


def descent(losses: np.ndarray) -> float:
    """How far the loss falls from its first value to its minimum, as a share of the first value."""
    first = float(losses[0])
    fall = first - float(np.min(losses))
    return fall / abs(first) if first != 0 else (np.inf if fall > 0 else 0.0)


def floor_end_index(losses: np.ndarray, tolerance: float = MIN_DESCENT) -> int:
    """The last index at which the loss is within ``tolerance`` (a share of its size) of the minimum."""
    low = float(np.min(losses))
    return int(np.nonzero(losses <= low + tolerance * abs(low))[0][-1])


def valley_floor(lrs: np.ndarray, losses: np.ndarray) -> float:
    """The valley on a curve that falls clearly; a tenth of the end of the floor on a flat one."""
    if descent(losses) >= MIN_DESCENT:
        return valley(lrs, losses)
    return float(lrs[floor_end_index(losses)] / 10.0)


RULES: dict[str, Rule] = {"steepest": steepest, "valley": valley, "min_div10": min_div10, "valley_floor": valley_floor}
"""Every rule by name, in the order they are shown."""

DEFAULT_RULE = "valley_floor"
"""The rule whose LR is ``suggested_lr`` (see docs/lr_finder.md for the measurements)."""


def suggest(lrs: np.ndarray, losses: np.ndarray, rule: str = DEFAULT_RULE) -> float:
    """The LR that ``rule`` picks on the curve, clamped to the swept range (``KeyError`` for an unknown rule)."""
    lrs, losses = np.asarray(lrs, dtype=np.float64), np.asarray(losses, dtype=np.float64)
    return float(min(max(RULES[rule](lrs, losses), lrs[0]), lrs[-1]))


def suggest_all(lrs: np.ndarray, losses: np.ndarray) -> dict[str, float]:
    """The suggestion of every rule, by name."""
    return {name: suggest(lrs, losses, name) for name in RULES}

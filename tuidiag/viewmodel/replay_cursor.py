"""Where replay's cursor goes on left/right: one recorded sample at a time, at any play speed."""

from __future__ import annotations

import numpy as np


def next_sample(samples: np.ndarray | None, at: int, direction: int) -> int:
    """The step after (``direction`` > 0) or before ``at`` with a recorded loss; ``at`` ± 1 without samples,
    ``at`` itself at either end."""
    if samples is None or not len(samples):
        return at + (1 if direction > 0 else -1)
    if direction > 0:
        i = int(np.searchsorted(samples, at, side="right"))
        return int(samples[i]) if i < len(samples) else at
    i = int(np.searchsorted(samples, at, side="left")) - 1
    return int(samples[i]) if i >= 0 else at

"""Whether a live job measured a model that had already diverged.

A job runs on the training's weights as they are. When the loss it measures there is many times
the run's loss at its start (or not finite), the weights have blown up: an LR range test, the
overfit-one-batch test or a sharpness check from them says little about the model or the LR to
train with. The result says so; the diagnosis does not use it.
"""

from __future__ import annotations

import math
from typing import Any

from tuidiag.store.first_losses import FirstLosses
from tuidiag.text.numbers import fmt

DIVERGED_FACTOR = 10.0
"""A job whose starting loss is this many times the run's first losses (their median) measured a diverged model."""


def diverged_note(start_loss: Any, first: FirstLosses | None) -> str | None:
    """Why a job that started at ``start_loss`` measured a diverged model, or ``None`` when it did not (or the
    run's first losses are unknown, or not positive)."""
    if first is None or not first.median > 0 or not isinstance(start_loss, (int, float)) or isinstance(start_loss, bool):
        return None
    if math.isfinite(start_loss) and start_loss <= DIVERGED_FACTOR * first.median:
        return None
    size = f"{fmt(start_loss / first.median)}x" if math.isfinite(start_loss) else "not finite, against"
    return (f"the model had diverged when the job ran: its loss on the recent batches was {fmt(start_loss)}, "
            f"{size} the run's {fmt(first.median)} over {first.where} (the median of its first losses); a job on "
            "weights that blew up says little about the model or the LR to train with. Fix what made it diverge "
            "(the diagnosis), or run the job on fresh weights from the run's factory (--offline)")

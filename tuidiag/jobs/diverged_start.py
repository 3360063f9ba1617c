"""Whether a live job measured a model that had already diverged.

A job runs on the training's weights as they are. When the loss it measures there is many times
the run's loss at its start (or not finite), or a weight's norm is a hundred times what it was
when the run began, the weights have blown up: an LR range test, the overfit-one-batch test or a
sharpness check from them says little about the model or the LR to train with (a loss can fall
back near its start on weights 1e15 times too large). The result says so; the diagnosis does not
use it.
"""

from __future__ import annotations

import math
from typing import Any

from tuidiag.store.run_start import FirstLosses, RunStart
from tuidiag.text.numbers import fmt

DIVERGED_FACTOR = 10.0
"""A job whose starting loss is this many times the run's first losses (their median) measured a diverged model."""
WEIGHT_BLOWN = 100.0
"""...or one with a weight whose norm is this many times its first recorded norm."""
WRAPPER_PREFIXES = ("module.", "_orig_mod.")
"""What a wrapper puts before its model's parameter names: ``DistributedDataParallel`` and ``DataParallel``
(``module.``), ``torch.compile`` (``_orig_mod.``). The recorder names weights through the model it watches; a live job
on a DDP training runs on the local replica (``model.module``), whose names lack the prefix."""
_ADVICE = ("; a job on weights that blew up says little about the model or the LR to train with. Fix what made it diverge "
           "(the diagnosis), or run the job on fresh weights from the run's factory (--offline)")


def diverged_note(start_loss: Any, start: RunStart | None, norms_now: dict[str, float] | None = None) -> str | None:
    """Why a job that started at ``start_loss``, on weights of norms ``norms_now`` (by parameter name), measured a
    diverged model, judged against how the run started (``start``), or ``None`` when it did not (or nothing of the
    run's start is known to compare with)."""
    if start is None:
        return None
    reasons = [reason for reason in (_loss_soared(start_loss, start.losses), _blown_weight(norms_now or {}, start.norms))
               if reason]
    return f"the model had diverged when the job ran: {'; '.join(reasons)}{_ADVICE}" if reasons else None


def _loss_soared(start_loss: Any, first: FirstLosses | None) -> str:
    """The job's starting loss against the run's first losses, said, when it is over :data:`DIVERGED_FACTOR` times them
    or not finite ('' otherwise, or when the run's first losses are unknown or not positive)."""
    if first is None or not first.median > 0 or not isinstance(start_loss, (int, float)) or isinstance(start_loss, bool):
        return ""
    if math.isfinite(start_loss) and start_loss <= DIVERGED_FACTOR * first.median:
        return ""
    size = f"{fmt(start_loss / first.median)}x" if math.isfinite(start_loss) else "not finite, against"
    return (f"its loss on the recent batches was {fmt(start_loss)}, {size} the run's {fmt(first.median)} over "
            f"{first.where} (the median of its first losses)")


def _blown_weight(now: dict[str, float], first: dict[str, tuple[int, float]]) -> str:
    """The weight that grew most since the run's first record of it, said (by its recorded name), when it grew
    :data:`WEIGHT_BLOWN` times or more or is not finite ('' otherwise). Names are matched without the prefixes of
    :data:`WRAPPER_PREFIXES`."""
    recorded = {unwrapped_name(name): name for name in first}
    worst, name, latest = 0.0, "", 0.0
    for param, value in now.items():
        key = recorded.get(unwrapped_name(param))
        if key is None or not first[key][1] > 0:
            continue
        growth = value / first[key][1] if math.isfinite(value) else math.inf
        if growth > worst:
            worst, name, latest = growth, key, value
    if worst < WEIGHT_BLOWN:
        return ""
    step, start = first[name]
    size = f"{fmt(worst)}x" if math.isfinite(worst) else "not finite, against"
    return f"the norm of '{name}' was {fmt(latest)}, {size} its {fmt(start)} at step {step}"


def unwrapped_name(name: str) -> str:
    """``name`` without the wrapper prefixes it starts with (``module._orig_mod.fc.weight`` -> ``fc.weight``)."""
    while name.startswith(WRAPPER_PREFIXES):
        name = name.split(".", 1)[1]
    return name

"""The runner of each built-in job kind: ``runner(parts, device, config, handle, context) -> result``.

Named by :data:`tuidiag.job_kinds.JobKind.runner` and called by :func:`tuidiag.jobs.run_kind.run`,
for a live training and for a factory alike.
"""

from __future__ import annotations

from typing import Any

import torch

from tuidiag.job_kinds.configs import LRFindConfig, NanHuntConfig, OverfitConfig, SharpnessConfig
from tuidiag.jobs.diverged_start import diverged_note
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.job_handle import JobHandle
from tuidiag.jobs.run_kind import JobContext

MIN_LIVE_BATCHES = 8
"""A live LR sweep on fewer distinct recent batches is marked unreliable: a few batches cycled
over a hundred steps are memorised, and one lucky batch moves the suggestion."""


def _diverged(start_loss: Any, parts: Parts, context: JobContext) -> str | None:
    """Why the job, which started at ``start_loss`` on ``parts`` (their weights restored since: the training's), measured
    a diverged model, against how the run started (:func:`tuidiag.jobs.diverged_start.diverged_note`); ``None`` when it
    did not, or for a job from a factory (fresh weights, no run start in its context)."""
    if context.start is None:
        return None
    norms = {}
    if context.start.norms:
        with torch.no_grad():
            norms = {name: float(param.detach().float().norm()) for name, param in parts.model.named_parameters()}
    return diverged_note(start_loss, context.start, norms)


def lr_find(parts: Parts, device: torch.device, config: LRFindConfig, handle: JobHandle, context: JobContext) -> dict[str, Any]:
    """The LR range test, compared with the LR the training was using at the job's step."""
    from tuidiag.jobs.lr_find import compare_lr, lr_find as sweep, mark_unreliable
    from tuidiag.recorder.recent_batches import FOR_JOBS, MAX_BYTES

    result = sweep(parts, device, config, handle)
    if context.live and result["batches"] < MIN_LIVE_BATCHES:
        mark_unreliable(result, f"the sweep saw only {result['batches']} distinct recent batches (at least {MIN_LIVE_BATCHES} "
                                f"needed; the recorder keeps the last {FOR_JOBS} given to rec.batch() while they total at most "
                                f"{MAX_BYTES >> 20} MiB)")
    losses = result.get("losses") or [None]
    diverged = _diverged(losses[0], parts, context)
    if diverged:
        result["diverged"] = diverged
        mark_unreliable(result, diverged, first=True)  # the state of the weights outweighs the batch noise
    result["run_lr"] = context.run_lr
    result["run_lr_step"] = context.step
    label = "the run's LR" + (f" at step {context.step}" if context.step is not None else "")
    comparison = compare_lr(context.run_lr, result["suggested_lr"], label)
    if comparison and not result.get("reliable"):
        comparison += " (not reliable: see the warning)"
    result["run_comparison"] = comparison
    return result


def nan_hunt(parts: Parts, device: torch.device, config: NanHuntConfig, handle: JobHandle, context: JobContext) -> dict[str, Any]:
    """The NaN hunt on the context's capture (a result saying so when there is none)."""
    from tuidiag.jobs.nan_hunt import load_capture, nan_hunt as hunt, no_capture

    if context.capture is None:
        return no_capture(context.run_dir or ".")
    capture = context.capture_data if context.capture_data is not None else load_capture(context.capture)
    result = hunt(parts, capture, device, training=context.training)
    result["capture"] = str(context.capture)
    return result


def overfit_batch(parts: Parts, device: torch.device, config: OverfitConfig, handle: JobHandle,
                  context: JobContext) -> dict[str, Any]:
    """Can the model memorise one batch?"""
    from tuidiag.jobs.overfit import overfit_batch as overfit

    result = overfit(parts, device, config, handle)
    diverged = _diverged(result.get("initial_loss"), parts, context)
    if diverged and not result.get("blocked"):
        # a diverged model that fails to fit says nothing about the loss function or the data; one that passes, little
        result.update(diverged=diverged, informative=False, uninformative_reason=diverged, advice=None)
    return result


def sharpness(parts: Parts, device: torch.device, config: SharpnessConfig, handle: JobHandle,
              context: JobContext) -> dict[str, Any]:
    """Flat or sharp minimum."""
    from tuidiag.jobs.sharpness import sharpness as measure

    result = measure(parts, device, config, handle)
    diverged = _diverged(result.get("base_loss"), parts, context)
    if diverged:
        result["diverged"] = diverged
    return result

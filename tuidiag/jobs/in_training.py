"""Running a job from a control request inside the live training process.

The recorder calls :func:`run_request` at a step boundary with the live model,
optimizer and loss (``rec.watch(model, optimizer, loss_fn=...)``) and the recent
batches it kept. Each job restores model, optimizer and RNG exactly
(:func:`tuidiag.jobs.isolation.isolated`); the training's data loader is never
touched, so the training continues as if the job had not run.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from tuidiag.jobs.job_handle import JobError, JobHandle
from tuidiag.jobs.factory import Parts


def _config(cls: type, args: dict[str, Any]) -> Any:
    """``cls(**args)`` keeping only its fields, then checked."""
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(args) - names)
    if unknown:
        raise JobError(f"unknown argument(s) {', '.join(unknown)}; expected some of {', '.join(sorted(names))}")
    config = cls(**args)
    config.check()
    return config


MIN_LIVE_BATCHES = 8
"""A live LR sweep on fewer distinct recent batches is marked unreliable: a few batches cycled
over a hundred steps are memorised, and one lucky batch moves the suggestion."""


def _lr_find(parts: Parts, args: dict[str, Any], device: torch.device, control: JobHandle) -> dict[str, Any]:
    from tuidiag.jobs.lr_find import LRFindConfig, lr_find, mark_unreliable
    from tuidiag.recorder.recent_batches import FOR_JOBS, MAX_BYTES

    result = lr_find(parts, device, _config(LRFindConfig, args), control)
    if result["batches"] < MIN_LIVE_BATCHES:
        mark_unreliable(result, f"the sweep saw only {result['batches']} distinct recent batches (at least {MIN_LIVE_BATCHES} "
                                f"needed; the recorder keeps the last {FOR_JOBS} given to rec.batch() while they total at most "
                                f"{MAX_BYTES >> 20} MiB)")
    result["run_lr"] = result["optimizer_lr"]  # live, the run's LR is the optimizer's: its comparison says it already
    return result


def _overfit(parts: Parts, args: dict[str, Any], device: torch.device, control: JobHandle) -> dict[str, Any]:
    from tuidiag.jobs.overfit import OverfitConfig, overfit_batch

    return overfit_batch(parts, device, _config(OverfitConfig, args), control)


def _sharpness(parts: Parts, args: dict[str, Any], device: torch.device, control: JobHandle) -> dict[str, Any]:
    from tuidiag.jobs.sharpness import SharpnessConfig, sharpness

    return sharpness(parts, device, _config(SharpnessConfig, args), control)


RUNNERS = {"lr_find": _lr_find, "overfit_batch": _overfit, "sharpness": _sharpness}


def run_request(job: str, args: dict[str, Any], parts: Parts, device: torch.device, control: JobHandle) -> dict[str, Any]:
    """Run ``job`` (not the NaN hunt: see :func:`hunt_capture`) on the live ``parts``."""
    if job not in RUNNERS:
        raise JobError(f"{job!r} cannot run from a request; one of {', '.join(RUNNERS)}")
    if parts.loss_fn is None:
        raise JobError("the training gave no loss: call rec.watch(model, optimizer, loss_fn=criterion)")
    if not parts.batches:
        raise JobError("no recent batches: call rec.batch(x, y) in the training loop so the recorder keeps the last few")
    return RUNNERS[job](parts, args, device, control)


def hunt_capture(parts: Parts, capture_path: Path, device: torch.device, training: bool) -> dict[str, Any]:
    """The NaN hunt on the capture at ``capture_path``, with the live model restored afterwards."""
    from tuidiag.jobs.nan_hunt import load_capture, nan_hunt

    result = nan_hunt(parts, load_capture(capture_path), device, training=training)
    result["capture"] = str(capture_path)
    return result


def nothing_found(steps: int, first: int, last: int) -> dict[str, Any]:
    """The NaN hunt's result when an armed window passed without a non-finite step."""
    summary = f"armed for {steps} steps ({first}-{last}): no non-finite loss or gradient appeared"
    return {"verdict": "no_nonfinite", "summary": summary, "armed_steps": [first, last]}

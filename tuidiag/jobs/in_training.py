"""Running a job from a control request inside the live training process.

The recorder calls :func:`run_request` at a step boundary with the live model,
optimizer and loss (``rec.watch(model, optimizer, loss_fn=...)``) and the recent
batches it kept; the job runs through the same :func:`tuidiag.jobs.run_kind.run`
as a job on a factory. Each job restores model, optimizer and RNG exactly
(:func:`tuidiag.jobs.isolation.isolated`); the training's data loader is never
touched, so the training continues as if the job had not run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tuidiag import job_kinds
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.job_handle import JobError, JobHandle
from tuidiag.jobs.kind_runners import MIN_LIVE_BATCHES  # noqa: F401  (re-exported: where tests and docs look for it)
from tuidiag.jobs.run_kind import JobContext, run
from tuidiag.jobs.tensors import first_lr
from tuidiag.store.run_start import run_start


def run_request(request: dict[str, Any], parts: Parts, device: torch.device, control: JobHandle,
                training: bool = True, run_dir: Path | None = None) -> dict[str, Any]:
    """Run the job a request names on the live ``parts``.

    ``request`` carries ``job``, ``args`` (config fields), ``step`` (the step the job runs after) and,
    for a NaN hunt, ``capture`` (the captured step to replay); ``training`` is the model's mode then;
    ``run_dir`` the run's directory (how the run started tells a job whether the model had diverged)."""
    kind = job_kinds.find(str(request.get("job")))
    if kind is None or not kind.live:
        raise JobError(f"{request.get('job')!r} cannot run from a request; one of {', '.join(job_kinds.live_names())}")
    if parts.loss_fn is None:
        raise JobError(f"{kind.title} needs the loss: call rec.watch(model, optimizer, loss_fn=criterion)")
    if not kind.needs_capture and not parts.batches:
        raise JobError("no recent batches: call rec.batch(x, y) in the training loop so the recorder keeps the last few")
    config = kind.config_from(dict(request.get("args", {})))
    capture = request.get("capture")
    context = JobContext(live=True, run_dir=run_dir, run_lr=first_lr(parts.optimizer), step=request.get("step"),
                         capture=Path(capture) if capture else None, training=training,
                         start=run_start(run_dir) if run_dir is not None else None)
    return run(kind, parts, device, config, control, context)


def nothing_found(steps: int, first: int, last: int) -> dict[str, Any]:
    """The NaN hunt's result when an armed window passed without a non-finite step."""
    summary = f"armed for {steps} steps ({first}-{last}): no non-finite loss or gradient appeared"
    return {"verdict": "no_nonfinite", "summary": summary, "armed_steps": [first, last]}

"""One way to run any job: :func:`run` takes a :class:`~tuidiag.job_kinds.JobKind` and the parts,
from the live training (:mod:`tuidiag.jobs.in_training`) or from a factory (``tuidiag <job> RUN``).

What differs between the two is data, in :class:`JobContext`: the LR the training was
using, the capture to replay, whether it runs live. Every job restores model,
optimizer and RNG when it ends (:func:`tuidiag.jobs.isolation.isolated`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tuidiag.job_kinds import JobError, JobKind, load
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.job_handle import JobHandle
from tuidiag.store.run_start import RunStart


@dataclass
class JobContext:
    """What a job knows of the run beyond its parts."""

    live: bool
    """It runs inside the live training, on its recent batches."""
    run_dir: Path | None = None
    run_lr: float | None = None
    """The LR the training was using at ``step`` (the current LR the LR finder compares with)."""
    step: int | None = None
    """The training step the job counts from: the step it ran after (live), the run's last step (factory)."""
    capture: Path | None = None
    """The NaN hunt's capture file (None: there is none)."""
    capture_data: dict[str, Any] | None = None
    """The capture already loaded (the CLI loads it before any user code runs)."""
    training: bool = True
    """Whether the model was in training mode at the captured step."""
    start: RunStart | None = None
    """How the run started, its first losses and weight norms (live jobs): a job whose starting loss is many times those,
    or whose weights are a hundred times theirs, measured a diverged model (:mod:`tuidiag.jobs.diverged_start`)."""


def run(kind: JobKind, parts: Parts, device: torch.device, config: Any, handle: JobHandle | None = None,
        context: JobContext | None = None) -> dict[str, Any]:
    """Run ``kind`` with ``config`` (one of ``kind.config``) on ``parts`` (the model on ``device``); its result."""
    if not isinstance(config, kind.config):
        raise JobError(f"{kind.name} needs a {kind.config.__name__}, got {type(config).__name__}")
    config.check()
    runner = load(kind.runner)
    return runner(parts, device, config, handle or JobHandle(), context or JobContext(live=False))

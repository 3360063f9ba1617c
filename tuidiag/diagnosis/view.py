"""A run as the rules see it: series cut at a step, layers in model order, config lookups, job results."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from tuidiag.diagnosis.evidence import Fact, Measure, at_step
from tuidiag.format import EVENT_RESUMED, GRAD_MAX_NORM, GRAD_NORM_PREFIX, GRAD_NORM_TOTAL, LOSS, LR_GROUP0, MODEL_TRAINING
from tuidiag.store import Event, Run
from tuidiag.store.job_results import JobRecord, newest_counting

VAL_LOSS_NAMES = ("val/loss", "val_loss", "valid/loss", "validation/loss", "eval/loss")
VAL_ACC_NAMES = ("val/acc", "val/accuracy", "val_accuracy", "val_acc", "eval/accuracy", "valid/acc")
TRAIN_ACC_NAMES = ("train/acc", "train/accuracy", "accuracy", "acc")


def natural_key(name: str) -> list[Any]:
    """Sort key that puts ``layer.2`` before ``layer.10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


class RunView:
    """Read-only access to a run's series as of step ``at`` (inclusive; ``None``: all), and to the job
    results it was given (:func:`tuidiag.store.job_results.job_records`; it reads no file itself)."""

    def __init__(self, run: Run, at: int | None = None, jobs: Sequence[JobRecord] = ()) -> None:
        self.run = run
        self.at = at
        self.jobs = tuple(jobs)
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def can_run_jobs(self) -> bool:
        """Whether a job (the NaN hunt, the LR finder) can run on this run: its ``run.json`` names a factory that
        rebuilds the model, or its recorder is running and takes requests. Never for another tracker's log."""
        manifest = self.run.manifest
        if isinstance(manifest.get("source"), dict):  # another tracker's log, watched or imported
            return False
        live = manifest.get("status") == "running" and isinstance(manifest.get("control"), dict)
        return bool(manifest.get("factory")) or live

    def job_result(self, job: str) -> Mapping[str, Any] | None:
        """The ``result`` object of ``job``'s newest result that counts at ``at`` (none made after it), or None
        (no such result, or the newest holds no object)."""
        found = newest_counting(self.jobs, job, self.at)
        result = found.record.get("result") if found is not None else None
        return result if isinstance(result, Mapping) else None

    def series(self, name: str, rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of a metric, up to ``at``."""
        key = f"{rank}:{name}"
        if key not in self._cache:
            s = self.run.series(name, rank)
            steps, values = s.steps, s.values
            if self.at is not None and len(steps) and steps[-1] > self.at:
                cut = int(np.searchsorted(steps, self.at, side="right"))
                steps, values = steps[:cut], values[:cut]
            self._cache[key] = (steps, values)
        return self._cache[key]

    def first_present(self, names: tuple[str, ...]) -> str | None:
        """The first of ``names`` that the run recorded, if any."""
        return next((n for n in names if self.run.has(n) and len(self.series(n)[0])), None)

    @cached_property
    def loss(self) -> tuple[np.ndarray, np.ndarray]:
        """Training loss."""
        return self.series(LOSS)

    @cached_property
    def val_loss_name(self) -> str | None:
        """The name the run logged its validation loss under, if any."""
        return self.first_present(VAL_LOSS_NAMES)

    @cached_property
    def val_loss(self) -> tuple[np.ndarray, np.ndarray]:
        """Validation loss (empty when never logged)."""
        name = self.val_loss_name
        return self.series(name) if name else (np.empty(0, np.int64), np.empty(0))

    @cached_property
    def grad_total(self) -> tuple[np.ndarray, np.ndarray]:
        """Total gradient norm before clipping."""
        return self.series(GRAD_NORM_TOTAL)

    @cached_property
    def clip_threshold(self) -> Measure | Fact | None:
        """The gradient-clipping ``max_norm`` in force at the newest step considered (``None``: no clipping known).

        The recorder writes ``grad/max_norm`` at every step that clips, the tightest of the
        training's own ``max_grad_norm`` and a live ``clip_grad`` action, so the newest
        recorded value is what the training clips at now; a median or the manifest could
        name a limit no longer in force after a live change. Once clipping is turned off the
        steps after it (``model/training`` is recorded at every step) carry no value: no
        clipping. A run without the series (older, imported, or synthetic) falls back to the
        manifest's ``max_grad_norm``. Values that are not finite and positive are skipped."""
        steps, values = self.series(GRAD_MAX_NORM)
        good = np.flatnonzero(np.isfinite(values) & (values > 0))
        if len(good):
            newest = self.series(MODEL_TRAINING)[0]
            if len(newest) and newest[-1] > steps[good[-1]]:
                return None
            return at_step(GRAD_MAX_NORM, steps, values, int(good[-1]))
        declared = self.manifest.get("max_grad_norm")
        if isinstance(declared, (int, float)) and not isinstance(declared, bool) and math.isfinite(declared) and declared > 0:
            return Fact("manifest", "max_grad_norm", float(declared))
        return None

    @cached_property
    def last_step(self) -> int | None:
        """The newest step considered."""
        step = self.run.last_step
        return step if self.at is None or step is None else min(step, self.at)

    @cached_property
    def n_steps(self) -> int:
        """Number of training steps with a recorded loss."""
        return len(self.loss[0])

    @cached_property
    def param_order(self) -> list[str]:
        """Parameter names in model order (manifest), else in natural order."""
        recorded = [m[len(GRAD_NORM_PREFIX):] for m in self.run.metric_names if m.startswith(GRAD_NORM_PREFIX) and m != GRAD_NORM_TOTAL]
        declared = [p.get("name") for p in self.model.get("params", []) if isinstance(p, dict)]
        ordered = [n for n in declared if n in set(recorded)]
        return ordered + sorted(set(recorded) - set(ordered), key=natural_key)

    @cached_property
    def weight_params(self) -> list[str]:
        """Parameters that are matrices or kernels (not biases or norm scales), in model order."""
        shapes = {p.get("name"): p.get("shape") for p in self.model.get("params", []) if isinstance(p, dict)}
        result = [n for n in self.param_order if len(shapes.get(n) or []) >= 2]
        return result or [n for n in self.param_order if n.endswith("weight")]

    @property
    def manifest(self) -> dict[str, Any]:
        """The run's manifest."""
        return self.run.manifest

    @cached_property
    def model(self) -> dict[str, Any]:
        """The model summary the recorder stored, or ``{}``."""
        model = self.manifest.get("model")
        return model if isinstance(model, dict) else {}

    @cached_property
    def lr_now(self) -> float | None:
        """The newest learning rate of group 0 (recorded, else from the config)."""
        steps, values = self.series(LR_GROUP0)
        if len(values):
            return float(values[-1])
        lr = self.manifest.get("config", {}).get("lr") if isinstance(self.manifest.get("config"), dict) else None
        return float(lr) if isinstance(lr, (int, float)) else None

    def events(self, kind: str | None = None) -> list[Event]:
        """Events up to ``at``, optionally of one kind."""
        return [e for e in self.run.events if (kind is None or e.kind == kind) and (self.at is None or e.step <= self.at)]

    def quiet_steps(self) -> int:
        """Steps at the start of a run in which rules stay quiet (loss legitimately falls fast)."""
        return max(20, min(500, self.n_steps // 20))

    @cached_property
    def resume_steps(self) -> tuple[int, ...]:
        """Steps at which a later session continued the run (``resumed`` events), up to ``at``."""
        return tuple(sorted({e.step for e in self.events(EVENT_RESUMED)}))

    def quiet_mask(self, steps: np.ndarray) -> np.ndarray:
        """True for steps in a quiet stretch: the run's first :meth:`quiet_steps`, and as many after each resume.

        A restart reloads the data order and often the warmup and optimizer moments,
        so its first steps are as unrepresentative as a fresh run's.
        """
        quiet = self.quiet_steps()
        mask = steps < quiet
        for start in self.resume_steps:
            mask |= (steps >= start) & (steps < start + quiet)
        return mask

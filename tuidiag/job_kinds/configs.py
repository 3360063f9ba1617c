"""The settings of each built-in job, with their defaults: torch-free, so that the CLI, the monitor
and the registry can read them (the expected length of a job is computed from these defaults)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from tuidiag.job_kinds.kind import JobError


@dataclass
class LRFindConfig:
    """Settings of the LR range test."""

    steps: int = 100
    start: float = 1e-7
    end: float = 10.0
    smooth: float = 0.05
    diverge: float = 4.0
    skip_start: int = 10
    skip_end: int = 5

    def check(self) -> None:
        """Raise :class:`JobError` for settings the test cannot use."""
        if self.steps < 5:
            raise JobError(f"--steps must be at least 5, got {self.steps}")
        if not (0 < self.start < self.end) or not math.isfinite(self.end):
            raise JobError(f"need 0 < --start < --end, got start={self.start:g} end={self.end:g}")
        if not 0 < self.smooth < 1:
            raise JobError(f"smoothing weight must be in (0, 1), got {self.smooth}")
        if self.diverge <= 1:
            raise JobError(f"divergence factor must exceed 1, got {self.diverge}")

    def schedule(self) -> Any:
        """The LR of each step (a numpy array): ``start * (end / start) ** (i / (steps - 1))``."""
        import numpy as np

        return self.start * (self.end / self.start) ** (np.arange(self.steps) / (self.steps - 1))


OPTIMIZERS = ("adam", "run")
ADAM_LR = 1e-3
"""The overfit test's LR for its fresh Adam when none is given."""


@dataclass
class OverfitConfig:
    """Settings of the overfit-one-batch test."""

    steps: int = 500
    lr: float | None = ADAM_LR
    target: float = 0.01
    optimizer: str = "adam"

    def check(self) -> None:
        """Raise :class:`JobError` for settings the test cannot use."""
        if self.steps < 1:
            raise JobError(f"--steps must be at least 1, got {self.steps}")
        if self.lr is not None and not (self.lr > 0 and math.isfinite(self.lr)):
            raise JobError(f"--lr must be a positive number, got {self.lr}")
        if self.optimizer not in OPTIMIZERS:
            raise JobError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if not math.isfinite(self.target):
            raise JobError(f"--target must be a number, got {self.target}")


MIN_DROP = 100.0
"""How many times the overfit test's loss must fall from its start to count as memorising: a model whose loss
already starts near the target (a trained one) would otherwise pass in a step or two, which says nothing."""


def overfit_target(target: float, initial: float) -> float:
    """The loss the test must reach: the set ``target``, or 1/:data:`MIN_DROP` of a positive starting loss when
    that is lower, so that a pass always means the loss fell at least :data:`MIN_DROP` times."""
    if math.isfinite(initial) and initial > 0:
        return min(target, initial / MIN_DROP)
    return target


def overfit_informative(result: Mapping[str, Any]) -> bool:
    """Whether an overfit result says anything about fitting: not when the loss started at or below the target
    (it passed without training), nor, for results saved before :func:`overfit_target`, a pass whose starting
    loss was within :data:`MIN_DROP` times of the target."""
    if "informative" in result:
        return bool(result["informative"])
    initial, target = result.get("initial_loss"), (result.get("config") or {}).get("target")
    if not result.get("passed") or not isinstance(initial, (int, float)) or not isinstance(target, (int, float)):
        return True
    return initial > target * MIN_DROP if target > 0 else initial > target


def overfit_from_options(values: dict[str, Any]) -> OverfitConfig:
    """The CLI's ``--lr`` defaults to 1e-3 for a fresh Adam and to the run's own LR for ``--optimizer run``."""
    values = dict(values)
    if values.get("lr") is None:
        values["lr"] = ADAM_LR if values.get("optimizer", "adam") == "adam" else None
    return OverfitConfig(**values)


@dataclass
class SharpnessConfig:
    """Settings of the sharpness test."""

    epsilon: float = 0.05
    samples: int = 10
    batches: int = 4
    seed: int = 0
    threshold: float = 0.1

    def check(self) -> None:
        """Raise :class:`JobError` for settings the test cannot use."""
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise JobError(f"--epsilon must be a positive number, got {self.epsilon}")
        if self.samples < 1 or self.batches < 1:
            raise JobError(f"--samples and --batches must be at least 1, got {self.samples} and {self.batches}")
        if not (self.threshold > 0 and math.isfinite(self.threshold)):
            raise JobError(f"threshold must be a positive number, got {self.threshold}")


ARM_STEPS = 200
"""Default steps an armed NaN hunt waits for a non-finite one in a live training."""


@dataclass
class NanHuntConfig:
    """Settings of the NaN hunt: how long a live run without a capture stays armed."""

    steps: int = ARM_STEPS

    def check(self) -> None:
        """Raise :class:`JobError` for settings the hunt cannot use."""
        if self.steps < 1:
            raise JobError(f"--arm-steps must be at least 1, got {self.steps}")

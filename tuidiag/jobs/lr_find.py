"""Leslie Smith's learning-rate range test (Smith 2015, "Cyclical Learning Rates").

The LR grows exponentially from ``start`` to ``end`` over ``steps`` training steps
on the factory's batches; the loss is smoothed with a bias-corrected exponential
moving average; the sweep stops when the smoothed loss exceeds ``diverge`` times
the best one (or a loss is not finite). Every rule of :mod:`tuidiag.jobs.lr_suggest`
suggests an LR on the smoothed curve without its first ``skip_start`` and last
``skip_end`` points; ``suggested_lr`` is the one of its ``DEFAULT_RULE``, named in
the result's ``rule``.

Model, optimizer and RNG are restored exactly afterwards.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from tuidiag.jobs.common import BatchSource, Control, JobError, first_lr, set_lr, to_device
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.isolation import isolated
from tuidiag.jobs.trainability import optimizer_blocker
from tuidiag.jobs.lr_suggest import DEFAULT_RULE, MIN_DESCENT, RULES, suggest_all
from tuidiag.jobs.lr_suggest import steepest_index, valley_index  # noqa: F401  (re-exported, as before the rules moved)


@dataclass
class LRFindConfig:
    """Settings of the range test."""

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

    def schedule(self) -> np.ndarray:
        """The LR of each step: ``start * (end / start) ** (i / (steps - 1))``."""
        return self.start * (self.end / self.start) ** (np.arange(self.steps) / (self.steps - 1))


@dataclass
class Sweep:
    """The losses recorded along the sweep and why it stopped."""

    lrs: list[float]
    losses: list[float]
    smoothed: list[float]
    stopped: str


def _diverged(smoothed: float, best: float, factor: float) -> bool:
    """``smoothed > factor * best``, generalised to losses that may be negative."""
    return smoothed > best + (factor - 1.0) * abs(best)


def _train_step(parts: Parts, batch: tuple[Any, Any], device: torch.device) -> float:
    x, y = to_device(batch, device)
    parts.optimizer.zero_grad(set_to_none=True)
    loss = parts.loss(x, y)
    loss.backward()
    parts.optimizer.step()
    return float(loss.detach())


class Smoother:
    """Bias-corrected exponential moving average (new values weigh ``weight``)."""

    def __init__(self, weight: float) -> None:
        self.beta, self.avg, self.count = 1.0 - weight, 0.0, 0

    def add(self, value: float) -> float:
        """Add ``value``; return the corrected average (exactly ``value`` for the first one)."""
        self.count += 1
        self.avg = self.beta * self.avg + (1.0 - self.beta) * value
        return self.avg / (1.0 - self.beta**self.count)


def sweep(parts: Parts, device: torch.device, cfg: LRFindConfig, control: Control) -> Sweep:
    """Train with the exponentially growing LR; stop on divergence, NaN or the end of the data."""
    source, smoother, best = BatchSource(parts.batches), Smoother(cfg.smooth), math.inf
    out = Sweep([], [], [], "completed")
    parts.model.train()
    for i, lr in enumerate(cfg.schedule()):
        batch = source.next()
        if batch is None:
            out.stopped = "data exhausted"
            break
        set_lr(parts.optimizer, float(lr))
        loss = _train_step(parts, batch, device)
        smoothed = smoother.add(loss) if math.isfinite(loss) else loss
        out.lrs.append(float(lr))
        out.losses.append(loss)
        out.smoothed.append(smoothed)
        best = min(best, smoothed)
        control.tick(i + 1, cfg.steps)
        if not math.isfinite(smoothed) or _diverged(smoothed, best, cfg.diverge):
            out.stopped = "diverged"
            break
    return out


def window(n: int, skip_start: int, skip_end: int) -> tuple[int, int]:
    """The ``[a, b)`` range of points used for suggestions, shrinking the skips on short curves."""
    if n >= skip_start + skip_end + 3:
        return skip_start, n - skip_end
    a, b = n // 10, n - max(1, n // 20)
    return (a, b) if b - a >= 3 else (0, n)


def suggest(result: Sweep, cfg: LRFindConfig) -> dict[str, Any]:
    """Every rule's suggestion by name (None when the curve is too short or not finite), and the window."""
    finite = [i for i, v in enumerate(result.smoothed) if math.isfinite(v)]
    n = finite[-1] + 1 if finite else 0
    a, b = window(n, cfg.skip_start, cfg.skip_end)
    if b - a < 3:
        return {**dict.fromkeys(RULES), "window": [a, b]}
    return {**suggest_all(np.asarray(result.lrs[a:b]), np.asarray(result.smoothed[a:b])), "window": [a, b]}


def descent_warning(result: Sweep, window_range: list[int]) -> str | None:
    """Why the suggestion cannot be trusted, when the loss barely fell along the sweep (None otherwise)."""
    a, b = window_range
    losses = np.asarray(result.smoothed[a:b], dtype=np.float64)
    losses = losses[np.isfinite(losses)]
    if len(losses) < 3 or losses[0] == 0:
        return None
    drop = (losses[0] - losses.min()) / abs(losses[0])
    if drop >= MIN_DESCENT:
        return None
    return (f"the loss fell only {drop:.1%} along the sweep: no clear descent, so the suggestion is not reliable "
            "(the model may be stuck: dead units, a bug, or data it cannot learn; try overfit-batch)")


def compare_lr(current: float | None, suggested: float | None, label: str = "current LR") -> str | None:
    """A sentence placing ``current`` against the suggestion (for the diagnosis), or None."""
    if not current or not suggested or current <= 0:
        return None
    ratio = current / suggested
    if 1 / 3 <= ratio <= 3:
        return f"{label} {current:.3g} is within 3x of the suggested {suggested:.3g}"
    side = "above" if ratio > 1 else "below"
    factor = ratio if ratio > 1 else 1 / ratio
    return f"{label} {current:.3g} is {factor:.0f}x {side} the suggested {suggested:.3g}"


def lr_find(
    parts: Parts, device: torch.device, cfg: LRFindConfig | None = None, control: Control | None = None
) -> dict[str, Any]:
    """Run the range test on ``parts`` (already on ``device``); return the result as JSON-ready data."""
    cfg = cfg or LRFindConfig()
    cfg.check()
    control = control or Control()
    optimizer_lr = first_lr(parts.optimizer)
    with isolated(parts.model, parts.optimizer):
        blocked = optimizer_blocker(parts, device)
        result = sweep(parts, device, cfg, control) if blocked is None else Sweep([], [], [], f"not run: {blocked.code}")
    suggestions = suggest(result, cfg)
    suggested = suggestions[DEFAULT_RULE]
    warning = blocked.explanation if blocked else descent_warning(result, suggestions["window"])
    return {
        "suggested_lr": suggested,
        "rule": DEFAULT_RULE,
        "reliable": suggested is not None and warning is None,
        "warning": warning,
        "suggestions": suggestions,
        "optimizer_lr": optimizer_lr,
        "comparison": compare_lr(optimizer_lr, suggested, "the optimizer's LR"),
        "stopped": result.stopped,
        "steps_run": len(result.lrs),
        "lrs": result.lrs,
        "losses": result.losses,
        "smoothed": result.smoothed,
        "config": asdict(cfg),
        "device": str(device),
    }

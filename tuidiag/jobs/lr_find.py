"""Leslie Smith's learning-rate range test (Smith 2015, "Cyclical Learning Rates").

The LR grows exponentially from ``start`` to ``end`` over ``steps`` training steps
on the factory's batches; the loss is smoothed with a bias-corrected exponential
moving average; the sweep stops when the smoothed loss exceeds ``diverge`` times
the best one (or a loss is not finite). Every rule of :mod:`tuidiag.jobs.lr_suggest`
suggests an LR on the smoothed curve without its first ``skip_start`` and last
``skip_end`` points; ``suggested_lr`` is the one of its ``DEFAULT_RULE``, named in
the result's ``rule``.

The main suggestion (:func:`main_suggestion`) is reliable only when at least
:data:`MIN_POINTS` points were usable, the loss clearly fell along the sweep (5%,
and twice its batch-to-batch noise), and the suggestion stays within 3x when the
batch noise is drawn again (:mod:`tuidiag.jobs.lr_stability`); :func:`assess`
applies these checks to any curve. The result says how many distinct batches the
sweep saw. Model, optimizer and RNG are restored exactly afterwards.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from tuidiag.job_kinds.configs import LRFindConfig
from tuidiag.jobs.job_handle import JobHandle
from tuidiag.jobs.tensors import BatchSource, first_lr, set_lr, to_device
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.isolation import isolated
from tuidiag.jobs.trainability import optimizer_blocker
from tuidiag.jobs.lr_suggest import DEFAULT_RULE, MIN_DESCENT, RULES, suggest_all
from tuidiag.jobs.lr_suggest import steepest_index, valley_index  # noqa: F401  (re-exported, as before the rules moved)
from tuidiag.jobs.lr_stability import Stability, fall_and_noise, stability


@dataclass
class Sweep:
    """The losses recorded along the sweep and why it stopped."""

    lrs: list[float]
    losses: list[float]
    smoothed: list[float]
    stopped: str
    batches: int = 0
    """Distinct batches the sweep trained on."""


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


def sweep(parts: Parts, device: torch.device, cfg: LRFindConfig, control: JobHandle) -> Sweep:
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
    out.batches = source.distinct
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


def main_suggestion(result: Sweep, cfg: LRFindConfig) -> float | None:
    """The suggestion the job reports (its default rule); the one the stability check tests."""
    return suggest(result, cfg)[DEFAULT_RULE]


def smoothed_sweep(result: Sweep, losses: np.ndarray, cfg: LRFindConfig) -> Sweep:
    """``result``'s LRs with other raw ``losses``, smoothed as the sweep smooths them."""
    smoother = Smoother(cfg.smooth)
    smoothed = [smoother.add(float(v)) if math.isfinite(v) else float(v) for v in losses]
    return Sweep(result.lrs, [float(v) for v in losses], smoothed, result.stopped, result.batches)


def stability_of(result: Sweep, cfg: LRFindConfig) -> Stability:
    """How far the main suggestion moves over resampled curves of ``result``."""
    return stability(result.losses, lambda losses: main_suggestion(smoothed_sweep(result, losses, cfg), cfg))


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


MIN_FALL_TO_NOISE = 2.0
"""A sweep whose loss trend falls less than this many times its batch noise shows no clear descent."""


def noise_warning(result: Sweep, window_range: list[int]) -> str | None:
    """Why the suggestion cannot be trusted, when the descent is small next to the batch noise (None otherwise)."""
    fall, noise = fall_and_noise(result.losses, *window_range)
    if noise <= 0 or fall >= MIN_FALL_TO_NOISE * noise:
        return None
    return (f"the loss fell by {fall:.3g} along the sweep, less than {MIN_FALL_TO_NOISE:g}x its batch-to-batch noise "
            f"({noise:.3g}): the descent may be noise, so the suggestion is not reliable")


MIN_POINTS = 8
"""A sweep with fewer usable points (after the skips, before divergence) is too short to judge."""


def exhausted_warning(result: Sweep, cfg: LRFindConfig) -> str | None:
    """Why the suggestion cannot be trusted, when the batches ran out before the sweep reached its last LR (None
    otherwise): the curve stops at low LRs, and any 'descent' on it says nothing of the model."""
    if result.stopped != "data exhausted" or len(result.lrs) >= cfg.steps:
        return None
    last = f", LR {result.lrs[-1]:.3g} of {cfg.end:g}" if result.lrs else ""
    return (f"the batches ran out after {len(result.lrs)} of {cfg.steps} steps{last}: the sweep never reached the higher "
            "LRs, so the suggestion is not reliable (a factory's one-shot iterator or generator is not restarted: return "
            "a list or a DataLoader)")


def length_warning(result: Sweep, window_range: list[int]) -> str | None:
    """Why the suggestion cannot be trusted, when too few points of the curve were usable (None otherwise)."""
    a, b = window_range
    if b - a >= MIN_POINTS:
        return None
    return (f"only {max(0, b - a)} points of the {len(result.lrs)}-step sweep ({result.stopped}) were usable "
            f"(at least {MIN_POINTS} needed), so the suggestion is not reliable; sweep more steps")


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


def assess(result: Sweep, cfg: LRFindConfig, optimizer_lr: float | None = None) -> dict[str, Any]:
    """The suggestions on a sweep's curve and whether the main one is reliable: the loss clearly
    fell, and the suggestion is stable over resamples of the batch noise (no training needed)."""
    suggestions = suggest(result, cfg)
    suggested = main_suggestion(result, cfg)
    checked = stability_of(result, cfg)
    found = {
        "suggested_lr": suggested,
        "rule": DEFAULT_RULE,
        "reliable": suggested is not None,
        "warning": None,
        "suggestions": suggestions,
        "stability": checked.to_json(),
        "batches": result.batches,
        "comparison": compare_lr(optimizer_lr, suggested, "the optimizer's LR"),
    }
    window_range = suggestions["window"]
    first = (exhausted_warning(result, cfg) or length_warning(result, window_range) or descent_warning(result, window_range)
             or noise_warning(result, window_range))
    if first and checked.stable:
        first += f"; {checked.describe()}"
    for warning in (first, checked.warning()):
        if warning:
            mark_unreliable(found, warning)
    return found


def lr_find(
    parts: Parts, device: torch.device, cfg: LRFindConfig | None = None, control: JobHandle | None = None
) -> dict[str, Any]:
    """Run the range test on ``parts`` (already on ``device``); return the result as JSON-ready data."""
    cfg = cfg or LRFindConfig()
    cfg.check()
    control = control or JobHandle()
    optimizer_lr = first_lr(parts.optimizer)
    with isolated(parts.model, parts.optimizer):
        blocked = optimizer_blocker(parts, device)
        result = sweep(parts, device, cfg, control) if blocked is None else Sweep([], [], [], f"not run: {blocked.code}")
    found = assess(result, cfg, optimizer_lr)
    if blocked is not None:  # the model cannot train: that is the one warning worth reading
        found.update(reliable=False, warning=blocked.explanation)
    return {
        **found,
        "optimizer_lr": optimizer_lr,
        "stopped": result.stopped,
        "steps_run": len(result.lrs),
        "lrs": result.lrs,
        "losses": result.losses,
        "smoothed": result.smoothed,
        "config": asdict(cfg),
        "device": str(device),
    }


def mark_unreliable(result: dict[str, Any], reason: str, first: bool = False) -> dict[str, Any]:
    """``result`` with its suggestion marked unreliable for ``reason`` (added to its warning: after what it says
    already, or before it with ``first``, for a reason that outweighs the others)."""
    if result.get("reliable") and result.get("comparison"):
        result["comparison"] += " (not reliable: see the warning)"
    result["reliable"] = False
    parts = (reason, result.get("warning")) if first else (result.get("warning"), reason)
    result["warning"] = "; ".join(w for w in parts if w)
    return result

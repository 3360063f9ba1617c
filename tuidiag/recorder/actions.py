"""Live actions: changes a user applies to the running training from the monitor (the seeds' Step 5).

Each runs in the training thread at a step boundary, after the user confirmed it,
and is recorded as an ``action`` event (the monitor marks it on the charts):

- ``scale_lr`` (``factor``): multiply every param group's LR, and the scheduler's
  base LRs when the recorder was given the scheduler (``rec.watch(..., scheduler=s)``),
  so the schedule does not undo the change at its next step;
- ``clip_grad`` (``max_norm``; 0 turns it off): from the next step on, the recorder
  clips the gradients by global norm inside ``rec.step()``, before the training's own clipping and
  ``optimizer.step()`` (the recorded norms stay the pre-clip ones);
- ``checkpoint``: save model and optimizer state now to ``RUN/checkpoints/step<N>.pt``
  (written atomically; loadable with ``torch.load(weights_only=True)``).

torch is imported only when an action needs it: the recorder works without torch.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

LR_KEYS = ("lr", "initial_lr", "max_lr", "min_lr")
"""Param-group keys that hold learning rates (schedulers such as OneCycleLR keep their own)."""
MAX_FACTOR = 100.0


class ActionError(Exception):
    """An action's arguments or the training's parts do not allow it (a message a user can act on)."""


def _positive(value: Any, name: str, allow_zero: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ActionError(f"{name} must be a number, got {value!r}") from exc
    if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        raise ActionError(f"{name} must be a positive number, got {value!r}")
    return number


def scale_lr(optimizer: Any, scheduler: Any, factor: Any) -> str:
    """Multiply the LRs by ``factor``; returns what changed."""
    factor = _positive(factor, "factor")
    if not 1 / MAX_FACTOR <= factor <= MAX_FACTOR:
        raise ActionError(f"factor must be between {1 / MAX_FACTOR:g} and {MAX_FACTOR:g}, got {factor:g}")
    if optimizer is None:
        raise ActionError("no optimizer: rec.watch(model, optimizer)")
    changes = []
    for i, group in enumerate(optimizer.param_groups):
        before = float(group["lr"])
        for key in LR_KEYS:
            if hasattr(group.get(key), "mul_"):  # a tensor LR (capturable optimizers)
                group[key].mul_(factor)
            elif isinstance(group.get(key), (int, float)):
                group[key] = group[key] * factor
        changes.append(f"group{i} {before:.3g} -> {float(group['lr']):.3g}")
    if scheduler is not None and hasattr(scheduler, "base_lrs"):
        scheduler.base_lrs = [lr * factor for lr in scheduler.base_lrs]
        changes.append("scheduler base LRs scaled too")
    return f"LR x{factor:g}: " + ", ".join(changes)


def clip_threshold(max_norm: Any) -> float | None:
    """The clipping threshold to apply from now on (None: off)."""
    value = _positive(max_norm, "max_norm", allow_zero=True)
    return value or None


def save_checkpoint(run_dir: Path, step: int, model: Any, optimizer: Any) -> Path:
    """Write model and optimizer state to ``RUN/checkpoints/step<step>.pt`` atomically."""
    import torch

    if model is None:
        raise ActionError("no model: rec.watch(model, optimizer)")
    directory = run_dir / "checkpoints"
    directory.mkdir(exist_ok=True)
    path = directory / f"step{step}.pt"
    tmp = directory / f".{path.name}.{os.getpid()}.partial"
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict() if optimizer is not None else {}, "step": step}
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


class LiveChanges:
    """What live actions changed in this training, and applying them."""

    def __init__(self) -> None:
        self.clip: float | None = None
        self.scheduler: Any = None

    def apply(self, request: dict[str, Any], step: int, watch: Any, run_dir: Path) -> str:
        """Carry out one action request; returns a sentence saying what changed."""
        action, args = request["job"], request.get("args", {})
        optimizer = watch.optimizer if watch is not None else None
        if action == "scale_lr":
            return scale_lr(optimizer, self.scheduler, args.get("factor"))
        if action == "clip_grad":
            if watch is None:
                raise ActionError("no watched model: rec.watch(model, optimizer)")
            self.clip = clip_threshold(args.get("max_norm"))
            return f"gradients clipped at global norm {self.clip:g} from now on (in rec.step)" if self.clip else "clipping by tuidiag off"
        path = save_checkpoint(run_dir, step, watch.model if watch is not None else None, optimizer)
        return f"checkpoint of step {step} saved to {path.relative_to(run_dir)}"

    def clip_now(self, watch: Any) -> None:
        """Clip the watched parameters' gradients when a ``clip_grad`` action asked for it (no host sync)."""
        if self.clip is not None and watch is not None:
            params = [p for _, p in watch.named_params if p.grad is not None]
            if params:
                import torch

                torch.nn.utils.clip_grad_norm_(params, self.clip, foreach=True)

"""Live actions: changes a user applies to the running training from the monitor, to try a diagnosis's fix without a restart.

Each runs in the training thread at a step boundary, after the user confirmed it,
and is recorded as an ``action`` event (the monitor marks it on the charts):

- ``scale_lr`` (``factor``): multiply every param group's LR, and the LR numbers of the
  scheduler when the recorder was given it (``rec.watch(..., scheduler=s)``, see
  :mod:`tuidiag.recorder.schedulers`), so the schedule does not undo the change at its
  next step; a scheduler tuidiag cannot scale is refused before anything changes;
- ``clip_grad`` (``max_norm``; 0 turns it off): from the next step on, the recorder
  clips the gradients by global norm inside ``rec.step()``, before the training's own clipping and
  ``optimizer.step()`` (the recorded norms stay the pre-clip ones);
- ``checkpoint``: save model and optimizer state now to ``RUN/checkpoints/step<N>.pt``
  (written atomically; loadable with ``torch.load(weights_only=True)``).

An LR change or clipping is reported applied only once the next steps show it
(:mod:`tuidiag.recorder.action_checks`); one that would have no effect (clipping looser
than the training's own, a change on rank 0 of a distributed training) is refused.

torch is imported only when an action needs it: the recorder works without torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuidiag import action_kinds
from tuidiag.recorder import schedulers
from tuidiag.recorder.action_checks import Check, ClipCheck, LrCheck, lr_value
from tuidiag.store.safe_write import write_atomic

LR_KEYS = ("lr", "initial_lr", "max_lr", "min_lr")
"""Param-group keys that hold learning rates (schedulers such as OneCycleLR keep their own)."""
MAX_FACTOR = action_kinds.MAX_LR_FACTOR


class ActionError(Exception):
    """An action's arguments or the training's parts do not allow it (a message a user can act on)."""


@dataclass(frozen=True)
class Applied:
    """What an action changed, and what the next steps must show for it to count (None: nothing to check)."""

    message: str
    check: Check | None = None


def _positive(value: Any, name: str, allow_zero: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ActionError(f"{name} must be a number, got {value!r}") from exc
    if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        raise ActionError(f"{name} must be a positive number, got {value!r}")
    return number


def scale_lr(optimizer: Any, scheduler: Any, factor: Any, step: int = 0, previous: list[float | None] | None = None) -> Applied:
    """Multiply the LRs by ``factor`` (and the scheduler's own LR numbers); returns what changed and its check.

    ``previous`` are the group LRs recorded at the step before ``step``: the schedule's trend."""
    factor = _positive(factor, "factor")
    if not 1 / MAX_FACTOR <= factor <= MAX_FACTOR:
        raise ActionError(f"factor must be between {1 / MAX_FACTOR:g} and {MAX_FACTOR:g}, got {factor:g}")
    if factor == 1:
        raise ActionError("factor 1 changes nothing")
    if optimizer is None:
        raise ActionError("no optimizer: rec.watch(model, optimizer)")
    problem = schedulers.problem(scheduler, optimizer) if scheduler is not None else None
    if problem is not None:
        raise ActionError(f"{problem}; nothing was changed")
    groups = optimizer.param_groups
    before = [lr_value(g["lr"]) for g in groups]
    changes = []
    for i, group in enumerate(groups):
        for key in LR_KEYS:
            if hasattr(group.get(key), "mul_"):  # a tensor LR (capturable optimizers)
                group[key].mul_(factor)
            elif isinstance(group.get(key), (int, float)):
                group[key] = group[key] * factor
        changes.append(f"group{i} {float(before[i] or 0):.3g} -> {float(group['lr']):.3g}")
    if scheduler is not None:
        scaled = schedulers.scale(scheduler, factor)
        changes.append(f"{schedulers.name(scheduler)} scaled too ({', '.join(scaled)})" if scaled
                       else f"{schedulers.name(scheduler)} keeps no LR of its own")
    previous = list(previous or [])
    trend = [b / p if b and p and b > 0 and p > 0 else 1.0 for b, p in zip(before, previous + [None] * len(before))]
    check = LrCheck(optimizer, scheduler, factor, step, [lr_value(g["lr"]) for g in groups], trend)
    return Applied(f"LR x{factor:g}: " + ", ".join(changes), check)


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
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict() if optimizer is not None else {}, "step": step}
    return write_atomic(directory / f"step{step}.pt", lambda handle: torch.save(state, handle), root=run_dir)


class LiveChanges:
    """What live actions changed in this training, and applying them."""

    def __init__(self, world_size: int = 1) -> None:
        self.clip: float | None = None
        self.scheduler: Any = None
        self.own_clip: float | None = None
        """The training's own clipping threshold (``rec.watch(max_grad_norm=...)``)."""
        self.world_size = world_size
        self.lrs: list[float | None] = []
        """Group LRs recorded at the current step (None for a tensor LR, left on its device)."""
        self.previous_lrs: list[float | None] = []
        self._clip_checks: list[ClipCheck] = []

    def note_lrs(self, lrs: list[float | None]) -> None:
        """The group LRs ``rec.step()`` recorded: the schedule's trend for an LR change's check."""
        self.previous_lrs, self.lrs = self.lrs, lrs

    def apply(self, request: dict[str, Any], step: int, watch: Any, run_dir: Path) -> Applied:
        """Carry out one action request; returns what changed and what the next steps must show."""
        action, args = request["job"], request.get("args", {})
        optimizer = watch.optimizer if watch is not None else None
        if action_kinds.get(action).drifts_replicas and self.world_size > 1:
            raise ActionError(f"this training runs on {self.world_size} ranks and actions reach rank 0 only: "
                              "its replica would drift from the others; nothing was changed")
        if action == action_kinds.SCALE_LR.name:
            return scale_lr(optimizer, self.scheduler, args.get("factor"), step, self.previous_lrs)
        if action == action_kinds.CLIP_GRAD.name:
            return self._clip(clip_threshold(args.get("max_norm")), step, watch)
        path = save_checkpoint(run_dir, step, watch.model if watch is not None else None, optimizer)
        return Applied(f"checkpoint of step {step} saved to {path.relative_to(run_dir)}")

    def _clip(self, threshold: float | None, step: int, watch: Any) -> Applied:
        if watch is None:
            raise ActionError("no watched model: rec.watch(model, optimizer)")
        if threshold is None:
            if self.clip is None:
                raise ActionError("tuidiag is not clipping the gradients: nothing to turn off")
            self.clip = None
            own = f"; the training's own clipping at {self.own_clip:g} stays" if self.own_clip is not None else ""
            return Applied(f"clipping by tuidiag off{own}")
        if self.own_clip is not None and self.own_clip <= threshold:
            raise ActionError(f"no effect: the training already clips at {self.own_clip:g} (rec.watch max_grad_norm), "
                              f"which is tighter than {threshold:g}; nothing was changed")
        self.clip = threshold
        check = ClipCheck(watch.optimizer, threshold, step, lambda: [p for _, p in watch.named_params], lambda: bool(watch.paused))
        self._clip_checks = [c for c in self._clip_checks if not c.done] + [check]
        return Applied(f"gradients clipped at global norm {threshold:g} from the next step on (in rec.step)", check)

    def clip_now(self, watch: Any) -> None:
        """Clip the watched parameters' gradients when a ``clip_grad`` action asked for it (no host sync)."""
        if self.clip is not None and watch is not None:
            params = [p for _, p in watch.named_params if p.grad is not None]
            if params:
                import torch

                torch.nn.utils.clip_grad_norm_(params, self.clip, foreach=True)
                for check in self._clip_checks:
                    if not check.done:
                        check.clipped(params[0])

"""Whether a live action's effect shows in the next steps, checked inside the training process.

A live action is applied at the end of ``rec.step()`` of step ``s``; what it changed
must still be there when the next steps run. Two things undo one silently:

- ``scale_lr``: a scheduler that computes the LR from its own numbers and was not passed
  to ``rec.watch`` (``LambdaLR``, ``CosineAnnealingWarmRestarts``, ``SequentialLR`` at a
  milestone), or training code that sets ``group["lr"]`` every step, puts the old LR back
  at its next step. :class:`LrCheck` reads the param groups at each of the next
  :data:`VERIFY_STEPS` ``rec.step()`` calls, after ``optimizer.step()`` and
  ``scheduler.step()`` ran, which is the LR the recorder records there.
- ``clip_grad``: the recorder clips inside ``rec.step()``; when that runs after
  ``optimizer.step()``, or the gradients are computed again in between, the optimizer
  never sees the clipped ones. :class:`ClipCheck` looks at the next ``optimizer.step()``
  (a pre-hook) for the gradient tensors it clipped.

How an undone LR change is told from the schedule's own moves: from one step to the next a
schedule moves the LR by a ratio close to the one before (``r``). A kept change keeps
that; an undone one jumps by ``1/factor`` on top of it. A step whose change is within
:data:`TOLERANCE` of ``r / factor`` (in log) is an undo; one closer to ``r`` than to
``r / factor`` keeps the change; anything else (a warm restart, the peak of a cyclic
schedule) is a jump that would hide an undo, and the action is reported not confirmed.
Only the step where the LR is first set again tells: after it, a kept and an undone
change move the same way.
An LR that a ``torch.optim.lr_scheduler`` scheduler passed to ``rec.watch`` (so scaled)
set itself is never an undo: its jumps are the scaled schedule's. The one case this
cannot tell apart: a scheduler not passed to ``rec.watch`` whose own jump, within the
checked steps, is close to ``1/factor`` (a StepLR with ``gamma=0.5`` after an LR x2).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from tuidiag.recorder import schedulers

VERIFY_STEPS = 3
"""Recorded steps after an action that must show its effect before it is reported applied."""
TOLERANCE = 0.3
"""How close, as a fraction of ``|log factor|``, a step's LR change must be to an undo to count as one."""


@dataclass(frozen=True)
class Verdict:
    """The end of a check: did the change hold, and what the next steps showed."""

    held: bool
    message: str


class Check(Protocol):
    """What a live action leaves behind to be checked at the next steps."""

    def observe(self, step: int) -> Verdict | None:
        """Called in ``rec.step(step)``; a verdict once the steps tell, else None."""

    def end(self, step: int) -> Verdict:
        """The training ends before the check could finish."""


def lr_value(lr: Any) -> float | None:
    """A param group's LR as a float (a tensor LR is read from its device)."""
    try:
        value = float(lr)
    except (TypeError, ValueError, RuntimeError):
        return None
    return value if math.isfinite(value) else None


class LrCheck:
    """Checks that a ``scale_lr`` still shows in the LR of the next recorded steps."""

    def __init__(self, optimizer: Any, scheduler: Any, factor: float, step: int, after: list[float | None],
                 trend: list[float]) -> None:
        self.optimizer, self.scheduler, self.step = optimizer, scheduler, step
        self.log_factor = math.log(factor)
        self.last, self.trend = list(after), list(trend)
        self.seen = self.compared = 0
        self.scheduler_visible = schedulers.visible(optimizer)
        self.trusted = scheduler is not None and schedulers.known(scheduler)

    def observe(self, step: int) -> Verdict | None:
        """Compare each group's LR with the last one seen; an undo, or a jump that hides one, fails the action."""
        if step <= self.step:
            return None
        self.seen += 1
        now = [lr_value(g.get("lr")) for g in self.optimizer.param_groups]
        for i, (before, lr) in enumerate(zip(self.last, now)):
            if before is None or lr is None or before <= 0 or lr <= 0:
                continue
            self.compared += 1
            if self.trusted and self._set_by_scheduler(i, lr):
                continue  # the scaled schedule's own move
            move = math.log(lr / before) - math.log(self.trend[i])
            expected = before * self.trend[i]
            if abs(move + self.log_factor) <= TOLERANCE * abs(self.log_factor):
                return Verdict(False, f"{self._undoer(i, lr)} (at step {step} group{i}'s LR is {lr:.3g} again, "
                                      f"about {expected:.3g} expected with the change)")
            if abs(move) > abs(self.log_factor) / 2:
                return Verdict(False, f"not confirmed: at step {step} group{i}'s LR jumped to {lr:.3g} (about {expected:.3g} "
                                      f"expected), which does not tell whether the change was kept; {self._remedy()}")
            self.trend[i] = lr / before
        self.last = now[: len(self.last)]
        if self.seen < VERIFY_STEPS:
            return None
        if not self.compared:
            return Verdict(True, "not checked: the LR was 0")
        return Verdict(True, f"held through step {step}{self._caveat()}")

    def end(self, step: int) -> Verdict:
        """The training ended within the check."""
        if not self.seen:
            return Verdict(True, f"not checked: the training ended at step {step}, before a later step ran")
        return Verdict(True, f"held through step {step}, where the training ended{self._caveat()}")

    def _caveat(self) -> str:
        if self.scheduler is None and self.scheduler_visible:
            return ("; your LR scheduler was not passed to rec.watch: if it resets the LR later "
                    "(a SequentialLR milestone, a warm restart) the change is lost, so pass scheduler= to rec.watch")
        return ""

    def _remedy(self) -> str:
        if self.scheduler is None and self.scheduler_visible:
            return "pass scheduler= to rec.watch, so tuidiag scales the schedule itself"
        if self.scheduler is None:
            return "if a scheduler sets the LR, pass it to rec.watch(scheduler=...); if your training code does, change the LR there"
        if self.trusted:
            return "your training code sets the LR too: change it there"
        return f"tuidiag cannot scale {schedulers.name(self.scheduler)} for sure: change the LR in your training code"

    def _set_by_scheduler(self, group: int, lr: float) -> bool:
        try:
            return abs(float(self.scheduler.get_last_lr()[group]) - lr) <= 1e-9 * lr
        except Exception:  # a scheduler without get_last_lr: not known to have set it
            return False

    def _undoer(self, group: int, lr: float) -> str:
        if self.scheduler is not None:
            if self._set_by_scheduler(group, lr):
                return (f"undone by your LR scheduler ({schedulers.name(self.scheduler)}), which keeps its LR "
                        "somewhere tuidiag does not scale: change the LR in your training code")
            return "undone by your training code, which sets the LR each step"
        if self.scheduler_visible:
            return "undone by your LR scheduler: pass scheduler= to rec.watch"
        return "undone by your training code, which sets the LR each step"


class ClipCheck:
    """Checks that the gradients the recorder clips in ``rec.step()`` are the ones the next ``optimizer.step()`` uses.

    At each ``optimizer.step()`` after a clip (a pre-hook): the same gradient tensor, not
    changed since, was used clipped; a new tensor (``zero_grad(set_to_none=True)`` and a
    backward pass after ``rec.step()``) was not; one changed in place since (a GradScaler's
    unscale, or ``zero_grad()`` and a backward pass) counts as clipped only if its global
    norm is within the threshold (one device sync)."""

    def __init__(self, optimizer: Any, threshold: float, step: int, params: Callable[[], list[Any]],
                 paused: Callable[[], bool]) -> None:
        self.threshold, self.step, self.params, self.paused = threshold, step, params, paused
        self.seen = self.used = self.missed = 0
        self.done = False
        self._clipped: tuple[Any, weakref.ref[Any], int] | None = None
        self._any_clipped = False
        self._handle = optimizer.register_step_pre_hook(self._before_optimizer_step) if optimizer is not None else None

    def clipped(self, param: Any) -> None:
        """``rec.step()`` just clipped the gradients; ``param`` is the first one clipped."""
        self._clipped = (param, weakref.ref(param.grad), param.grad._version)
        self._any_clipped = True

    def _before_optimizer_step(self, *_: Any) -> None:
        if self.paused() or self._clipped is None:
            return
        param, grad, version = self._clipped
        self._clipped = None
        if param.grad is None or param.grad is not grad():
            self.missed += 1
        elif param.grad._version == version or self._norm() <= self.threshold * (1 + 1e-3):
            self.used += 1
        else:
            self.missed += 1

    def _norm(self) -> float:
        import torch

        grads = [p.grad for p in self.params() if p.grad is not None]
        return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.detach().float()) for g in grads]))) if grads else 0.0

    def observe(self, step: int) -> Verdict | None:
        """A verdict once an ``optimizer.step()`` missed the clipped gradients, or after :data:`VERIFY_STEPS` steps."""
        if step <= self.step:
            return None
        self.seen += 1
        if self.missed:
            return self._close(self._missed())
        if self.seen <= VERIFY_STEPS:
            return None
        if not self._any_clipped:
            return self._close(Verdict(False, "no effect: no watched parameter had a gradient at rec.step(): "
                                              "call rec.step(loss) after backward()"))
        if self.used:
            return self._close(Verdict(True, f"optimizer.step() used the clipped gradients through step {step}"))
        if self._handle is None:
            return self._close(Verdict(True, "not checked: rec.watch was given no optimizer"))
        return self._close(Verdict(True, f"not checked: no optimizer.step() ran up to step {step}"))

    def end(self, step: int) -> Verdict:
        """The training ended within the check."""
        if self.missed:
            return self._close(self._missed())
        if self.used:
            return self._close(Verdict(True, f"optimizer.step() used the clipped gradients through step {step}, where the training ended"))
        return self._close(Verdict(True, f"not checked: the training ended at step {step}"))

    @staticmethod
    def _missed() -> Verdict:
        return Verdict(False, "no effect: optimizer.step() did not use the gradients rec.step() clipped (rec.step() runs "
                              "after optimizer.step(), or the gradients are computed again in between): "
                              "call rec.step(loss) after backward() and before optimizer.step()")

    def _close(self, verdict: Verdict) -> Verdict:
        self.done = True
        self._clipped = None
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        return verdict

"""What a ``Trainer`` step looks like from hooks on the model (no ``transformers`` import).

The Trainer's callbacks see neither the batch, nor the loss, nor the gradients
before clipping. :class:`TrainerStepProbe` gets them from a forward pre-hook
(batch, at the step's first micro-batch), a forward hook (the model output's loss) and :class:`BackwardEnd`
(the gradients, once the step's last backward pass is done, before clipping),
and records one recorder step per optimizer step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from tuidiag.integrations.backward_end import BackwardEnd
from tuidiag.integrations.callback_base import split_batch, take_activations


def sync_gradients() -> bool:
    """Accelerate's flag: true on the micro-batch after which the optimizer steps."""
    try:
        from accelerate.state import GradientState
    except ImportError:
        return True
    return bool(GradientState().sync_gradients)


def output_loss(output: Any) -> torch.Tensor | None:
    """The 0-d ``loss`` of a model output (``ModelOutput`` or dict), else ``None``."""
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    return loss if isinstance(loss, torch.Tensor) and loss.dim() == 0 else None


class TrainerStepProbe:
    """Hooks on the model that record one recorder step per Trainer optimizer step.

    Args:
        recorder: the run's recorder.
        model: the model the Trainer trains (hooks go on it).
        optimizer: the torch optimizer (watched for LRs and updates).
        max_norm: the Trainer's ``max_grad_norm`` (``None``: no clipping).
        loss_world: factor for a loss normalised over all ranks' items (1 or the world size).
        state: the Trainer's ``TrainerState`` (its ``global_step`` is the step index).
        scheduler: the Trainer's LR scheduler (a live LR change scales it, so it does not put the old LR back).
    """

    def __init__(self, recorder: Any, model: torch.nn.Module, optimizer: Any, max_norm: float | None,
                 loss_world: int, state: Any, scheduler: Any = None) -> None:
        self.recorder, self.model, self.optimizer, self.scheduler = recorder, model, optimizer, scheduler
        self.max_norm, self.loss_world, self.state = max_norm, loss_world, state
        self.in_step = self.recorded = self.watched = self.batch_marked = False
        self.saw_model_loss = False
        """True once the model returned a loss inside a training step."""
        self._losses: list[torch.Tensor] = []
        self._activations: dict[str, Any] | None = None
        self._items_normalised = False
        self._handles = [
            model.register_forward_pre_hook(self._before_forward, with_kwargs=True),
            model.register_forward_hook(self._after_forward, with_kwargs=True),
        ]
        self._backward = BackwardEnd(model, self._wanted, self.record, recorder.errors.report)

    def begin_step(self) -> None:
        """The first micro-batch of an optimizer step is next."""
        self.in_step, self.recorded, self.batch_marked = True, False, False
        self._backward.reset()
        self._losses, self._activations = [], None

    def end_step(self) -> None:
        """The optimizer step is over."""
        self.in_step = False

    def ensure_recorded(self) -> None:
        """Record the step now if its backward end was missed (gradients may be clipped by now)."""
        if self.in_step and not self.recorded:
            self.record()

    def record(self) -> None:
        """One recorder step: loss, LRs, pre-clip gradients, timing, activations."""
        self.recorded = True
        self._ensure_watch()
        step = self.recorder.step(self._step_loss(), step=self.state.global_step)
        activations, self._activations = self._activations, None
        if activations:
            self.recorder.log(activations, step=step)

    def remove(self) -> None:
        """Remove every hook from the model."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._backward.remove()

    def _ensure_watch(self) -> None:
        """Watch late, right before the first recorded forward, so no evaluation pass is hooked."""
        if not self.watched:
            self.watched = True
            self.recorder.watch(self.model, self.optimizer, max_grad_norm=self.max_norm, scheduler=self.scheduler)

    def _training_forward(self) -> bool:
        return self.in_step and self.model.training

    def _wanted(self) -> bool:
        return self._training_forward() and not self.recorded and sync_gradients()

    def _before_forward(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            if not self._training_forward():
                return
            self._items_normalised = kwargs.get("num_items_in_batch") is not None
            if not self.batch_marked:  # the step's first micro-batch: data wait ends here
                self.batch_marked = True
                self._ensure_watch()
                self.recorder.batch(*split_batch(kwargs if kwargs else (args[0] if args else None)))
        except Exception as exc:
            self.recorder.errors.report("forward_pre_hook", exc)

    def _after_forward(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                       output: Any) -> None:
        try:
            if not self._training_forward():
                return
            loss = output_loss(output)
            if loss is not None:
                self._losses.append(loss.detach())
                self.saw_model_loss = True
            if self._activations is None and not sync_gradients():  # accumulating: keep the first micro-batch's
                self._activations = take_activations(self.recorder)
        except Exception as exc:
            self.recorder.errors.report("forward_hook", exc)

    def _step_loss(self) -> torch.Tensor | None:
        """The step's loss as the Trainer computes it from the micro-batches' model losses."""
        if not self._losses:
            return None
        losses, self._losses = self._losses, []
        total = torch.stack([loss.float() for loss in losses]).sum()
        return total * self.loss_world if self._items_normalised else total / len(losses)

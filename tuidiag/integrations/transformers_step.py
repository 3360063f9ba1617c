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
from tuidiag.integrations.job_loss import WholeBatches, input_of, job_loss, transformers_forward


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
        self.in_job = False
        """True while a live job calls the model: its forward passes are not the training's."""
        self._whole = WholeBatches()
        """The keyword arguments of the batches given to ``rec.batch``: live jobs call the model with them."""
        self.saw_model_loss = False
        """True once the model returned a loss inside a training step."""
        self._losses: list[torch.Tensor] = []
        self._activations: dict[str, Any] | None = None
        self._items_normalised = False
        self.honours_items: bool | None = None
        """Whether the model divides its loss by the ``num_items_in_batch`` it is given (probed once; ``None``: not yet)."""
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
            self.recorder.watch(self.model, self.optimizer, max_grad_norm=self.max_norm, scheduler=self.scheduler,
                                loss_fn=job_loss, forward=self._job_forward)

    def _job_forward(self, model: torch.nn.Module, x: Any) -> Any:
        """``forward(model, x)`` of live jobs: the model's output (its ``loss`` included) for the whole batch of ``x``."""
        self.in_job = True
        try:
            with torch.enable_grad():  # the step is recorded at the end of backward, where autograd turned it off
                return transformers_forward(self._whole)(model, x)
        finally:
            self.in_job = False

    def _training_forward(self) -> bool:
        return self.in_step and self.model.training and not self.in_job

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
                batch = kwargs if kwargs else (args[0] if args else None)
                x, y = split_batch(batch)
                x = input_of(x, batch)
                self._whole.keep(x, batch)
                self.recorder.batch(x, y)
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
            if self.honours_items is None and loss is not None and kwargs.get("num_items_in_batch") is not None:
                self._probe_items(module, args, kwargs)
        except Exception as exc:
            self.recorder.errors.report("forward_hook", exc)

    def _probe_items(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Find out once whether the model's loss is divided by ``num_items_in_batch``.

        The Trainer passes it to any model whose ``forward`` takes ``**kwargs`` and then
        sums the micro-batches' losses, trusting the model to divide by the step's item
        count. A model that ignores it returns per-micro-batch means, and the Trainer's
        logged loss (and gradient) is ``gradient_accumulation_steps`` times the mean.
        Two forward passes of this micro-batch, without gradients, in eval mode, with
        the RNG state restored after, tell the two apart: the loss halves when the item
        count doubles only if the model divides by it.
        """
        self.honours_items = True  # the Trainer's assumption, kept if the probe cannot run
        items = kwargs["num_items_in_batch"]
        was_training = module.training
        try:
            module.eval()  # also keeps this probe's forward passes out of the hooks above
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                once = output_loss(module(*args, **kwargs))
                twice = output_loss(module(*args, **{**kwargs, "num_items_in_batch": items * 2}))
            if once is not None and twice is not None and float(once) != 0.0:
                self.honours_items = abs(float(twice) / float(once) - 0.5) < 0.25
        except Exception as exc:
            self.recorder.errors.report("num_items_probe", exc)
        finally:
            module.train(was_training)
        if not self.honours_items:
            self.recorder.event(
                "loss_normalisation",
                "the model ignores num_items_in_batch: the Trainer's logged loss is the sum of the micro-batch "
                "means (gradient_accumulation_steps times the mean, and so is its gradient); train/loss is the mean, "
                "the Trainer's value is train/loss_trainer", severity="warning")

    def _step_loss(self) -> torch.Tensor | None:
        """The step's mean loss: the micro-batches' model losses summed when the model divides them by the
        step's item count, else averaged."""
        if not self._losses:
            return None
        losses, self._losses = self._losses, []
        total = torch.stack([loss.float() for loss in losses]).sum()
        normalised = self._items_normalised and self.honours_items is not False
        return total * self.loss_world if normalised else total / len(losses)

"""PyTorch Lightning callback: ``Trainer(callbacks=[TuidiagCallback("runs/x")])``.

It owns a :class:`tuidiag.Recorder` per ``fit`` and records what the recorder
records (see the README) on every rank; under DDP each rank writes its own shards
into the same run directory and rank 0 writes ``run.json``.

Where each value comes from (checked against Lightning 2.6's source):

- One recorder step per optimizer step, in ``on_before_optimizer_step``, which
  Lightning calls after the closure's backward (and after unscaling AMP
  gradients) but *before* ``gradient_clip_val`` clips: gradient norms and
  ``grad/clipped`` are pre-clip. Step index: ``trainer.global_step`` (automatic
  optimization), so a resumed fit continues its numbering.
- ``train/loss``: the sum of the losses given to ``backward`` since the previous
  optimizer step (``on_before_backward``). Lightning divides each by
  ``accumulate_grad_batches``, so with accumulation this is the mean over the
  micro-batches of the step.
- ``lr/group<i>`` of the first optimizer; further optimizers (manual optimization)
  as ``lr/opt<j>/group<i>``. Gradients and weight updates are those of the
  LightningModule's parameters; with several optimizers, the step is recorded at
  the first optimizer's step.
- Input health, activation health and the data-wait/compute split come from
  the step's first micro-batch (``on_train_batch_start``; see
  :func:`tuidiag.integrations.callback_base.take_activations`).
- Validation metrics: the entries of ``trainer.callback_metrics`` that the
  validation loop set, at ``on_validation_end`` (sanity checks skipped), under
  the names they were logged with (``val_loss``, ``val/loss``, ...).
- Config: the module's (and datamodule's) ``hparams``, your ``config``, and the
  trainer's settings under ``trainer``; values JSON cannot hold are dropped.
- Re-running: a ``fit`` resumed from a checkpoint (``ckpt_path=...``, so
  ``trainer.global_step > 0`` at ``on_train_start``) continues the run in
  ``run_dir`` from that step (``resume="allow"``, ``start_step=global_step``);
  a new ``fit`` never mixes with a run already there: it goes to ``run_dir-N``
  (``resume="never"``). Pass ``resume=`` to decide yourself.
- The recorder closes as ``finished`` at ``on_fit_end`` and ``failed`` at
  ``on_exception``, ``interrupted`` there after Ctrl-C or SIGTERM. Only ``fit`` is recorded: a later
  ``trainer.validate()`` or ``test()`` writes nothing.
- Weight norms and update ratios come from the recorder's optimizer hooks;
  Lightning runs the closure (and so the recorded step) inside
  ``optimizer.step()``, after the pre-step hook, so they are sampled on steps
  ``s`` with ``(s - 1) % weights_every == 0`` (and labelled with ``s``, the step
  whose update they measure).
- Live jobs (the monitor's ``l``, ``o``, ``s``, or ``tuidiag lr-find RUN``) compute the loss of a
  kept batch as the training does: ``training_step(batch, 0)`` of the whole batch, with
  ``self.log`` silenced meanwhile (:mod:`tuidiag.integrations.job_loss`). Not with manual
  optimization (``automatic_optimization = False``): its ``training_step`` steps the
  optimizers itself, so there every job fails at once and says why.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from tuidiag.format import STATUS_FINISHED, STATUS_INTERRUPTED
from tuidiag.integrations.callback_base import (
    GuardedCallback, base_optimizer, guarded_hook, json_safe_dict, recorder_arguments, split_batch, take_activations,
)
from tuidiag.integrations.job_loss import WholeBatches, input_of, job_loss, lightning_forward, unavailable_forward

try:
    from lightning.pytorch import Callback
except ImportError as exc:  # pragma: no cover - exercised only without lightning
    raise ImportError(
        "tuidiag.integrations.lightning needs PyTorch Lightning 2.x: pip install lightning"
    ) from exc

__all__ = ["TuidiagCallback", "TuidiagLogger"]


class TuidiagCallback(GuardedCallback, Callback):
    """Records a Lightning ``fit`` into ``run_dir`` with :class:`tuidiag.Recorder`.

    Args:
        run_dir: the run directory (shared by all ranks; see the module docstring for re-runs).
        config: extra entries for the manifest's config (merged over ``hparams``).
        name: display name of the run.
        **recorder_kwargs: passed to :class:`tuidiag.Recorder` (``grads_every``,
            ``weights_every``, ``activations_every``, ``flush_interval``, ``resume``, ...).
    """

    def __init__(self, run_dir: str | os.PathLike[str], config: Mapping[str, Any] | None = None,
                 *, name: str | None = None, **recorder_kwargs: Any) -> None:
        GuardedCallback.__init__(self)
        self.run_dir = run_dir
        self.config = dict(config or {})
        self.name = name
        self.recorder_kwargs = recorder_kwargs
        self._loss: Any = None
        self._watched = self._step_open = self._accumulating = False
        self._activations: dict[str, Any] | None = None
        self._before_validation: dict[str, Any] = {}
        self._logger: Any = None
        self._whole = WholeBatches()
        """The whole batches behind those given to ``rec.batch``: live jobs run ``training_step`` on them."""

    @property
    def logger(self) -> Any:
        """A Lightning logger writing what ``self.log(...)`` logs into this callback's run:
        ``Trainer(callbacks=[cb], logger=cb.logger)`` (see :mod:`tuidiag.integrations.lightning_logger`)."""
        if self._logger is None:
            from tuidiag.integrations.lightning_logger import TuidiagLogger

            self._logger = TuidiagLogger(callback=self)
        return self._logger

    def _logger_in(self, trainer: Any) -> bool:
        """Whether this callback's logger is one of the trainer's (it then records the logged metrics)."""
        return self._logger is not None and any(logger is self._logger for logger in getattr(trainer, "loggers", []) or [])

    @guarded_hook
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Open the recorder (after the sanity check, so its forward passes are not recorded)."""
        from tuidiag.recorder import Recorder

        self._close(STATUS_FINISHED)
        config = lightning_config(trainer, pl_module, self.config)
        kwargs = recorder_arguments(self.recorder_kwargs, trainer.global_step)
        self.recorder = Recorder(self.run_dir, config=config, name=self.name, **kwargs)
        self._watched = self._step_open = False
        self._loss = self._activations = None

    @guarded_hook
    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        """Mark the start of an optimizer step's first micro-batch, with its input health."""
        if self.recorder is None:
            return
        self._accumulating = not steps_after_batch(trainer, batch_idx)
        if not self._step_open:
            self._step_open = True
            self._ensure_watch(trainer, pl_module)
            x, y = split_batch(batch)
            x = input_of(x, batch)
            self._whole.keep(x, batch)  # live jobs compute training_step's loss of the whole batch
            self.recorder.batch(x, y)

    @guarded_hook
    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        """Add the micro-batch's loss to the step's loss (no host-device synchronisation)."""
        if self.recorder is None:
            return
        loss = loss.detach()
        self._loss = loss if self._loss is None else self._loss + loss
        if self._accumulating and self._activations is None:
            self._activations = take_activations(self.recorder)  # first micro-batch's forward is done

    @guarded_hook
    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        """Record the step: loss, LRs and the gradients before Lightning clips them."""
        optimizers = list(trainer.optimizers)
        if self.recorder is None or (optimizers and base_optimizer(optimizer) is not optimizers[0]):
            return
        self._ensure_watch(trainer, pl_module)
        loss, self._loss = self._loss, None
        activations, self._activations = self._activations, None
        self._step_open = False
        step = self.recorder.step(loss, step=trainer.global_step if pl_module.automatic_optimization else None)
        if activations:
            self.recorder.log(activations, step=step)
        if len(optimizers) > 1:
            self.recorder.log(other_optimizer_lrs(optimizers))

    @guarded_hook
    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        """Remember the metrics as they were, to tell which ones validation sets."""
        self._before_validation = dict(trainer.callback_metrics)

    @guarded_hook
    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        """Record the metrics the validation loop set, at the last training step."""
        if self.recorder is None or trainer.sanity_checking or self._logger_in(trainer):
            return  # with the logger in the trainer, Lightning sends these to it
        before = self._before_validation
        metrics = {k: v for k, v in trainer.callback_metrics.items() if before.get(k) is not v}
        if metrics:
            self.recorder.log(metrics)

    @guarded_hook
    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        """Close the run as finished."""
        self._close(STATUS_FINISHED)

    @guarded_hook
    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Close the run as failed, or interrupted after Ctrl-C or SIGTERM (Lightning's ``SIGTERMException``)."""
        from tuidiag.recorder.process import end_status

        sigterm = type(exception).__name__ == "SIGTERMException"
        self._close(STATUS_INTERRUPTED if sigterm else end_status(type(exception)))

    def _ensure_watch(self, trainer: Any, pl_module: Any) -> None:
        """Watch the module and first optimizer, late: no forward pass runs between this and ``batch``."""
        if self._watched:
            return
        self._watched = True
        optimizers = list(trainer.optimizers)
        optimizer = optimizers[0] if optimizers else None
        schedulers = [getattr(c, "scheduler", None) for c in getattr(trainer, "lr_scheduler_configs", None) or []]
        scheduler = next((s for s in schedulers if optimizer is not None and getattr(s, "optimizer", None) is optimizer), None)
        # the scheduler too: a live LR change scales the schedule instead of being put back at its next step
        # live jobs (l, o, s) compute the loss as training_step does; with manual optimization they fail saying why
        forward = lightning_forward(self._whole) if pl_module.automatic_optimization else unavailable_forward
        self.recorder.watch(pl_module, optimizer, max_grad_norm=clip_norm(trainer), scheduler=scheduler, loss_fn=job_loss,
                            forward=forward)

    def _close(self, status: str) -> None:
        """Close the recorder; hooks after this (``trainer.validate()`` later) record nothing."""
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            recorder.close(status)


def steps_after_batch(trainer: Any, batch_idx: int) -> bool:
    """Whether the optimizer steps after this training batch (not accumulating).

    Uses the epoch loop's own decision when it has one (Lightning 2.x), which
    also knows that the last batch of an epoch always steps.
    """
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    should_accumulate = getattr(loop, "_should_accumulate", None)
    if callable(should_accumulate):
        return not should_accumulate()
    return (batch_idx + 1) % max(1, int(trainer.accumulate_grad_batches)) == 0


def clip_norm(trainer: Any) -> float | None:
    """``gradient_clip_val`` when the trainer clips by norm, else ``None``."""
    value = trainer.gradient_clip_val
    algorithm = trainer.gradient_clip_algorithm
    algorithm = str(getattr(algorithm, "value", algorithm) or "norm")
    return float(value) if value and algorithm == "norm" else None


def other_optimizer_lrs(optimizers: list[Any]) -> dict[str, Any]:
    """``lr/opt<j>/group<i>`` of every optimizer after the first."""
    return {
        f"lr/opt{j}/group{i}": group["lr"]
        for j, opt in enumerate(optimizers[1:], start=1)
        for i, group in enumerate(opt.param_groups)
    }


def lightning_config(trainer: Any, pl_module: Any, user: Mapping[str, Any]) -> dict[str, Any]:
    """The run's config: hparams, the user's entries, and the trainer's settings under ``trainer``."""
    config = json_safe_dict(getattr(pl_module, "hparams", None))
    datamodule = getattr(trainer, "datamodule", None)
    if datamodule is not None:
        config.update(json_safe_dict(getattr(datamodule, "hparams", None)))
    config.update(user)
    algorithm = trainer.gradient_clip_algorithm
    config["trainer"] = json_safe_dict({
        "max_epochs": trainer.max_epochs,
        "max_steps": trainer.max_steps,
        "accumulate_grad_batches": trainer.accumulate_grad_batches,
        "gradient_clip_val": trainer.gradient_clip_val,
        "gradient_clip_algorithm": str(getattr(algorithm, "value", algorithm)),
        "precision": str(trainer.precision),
        "strategy": type(trainer.strategy).__name__,
        "world_size": trainer.world_size,
    })
    return config


def __getattr__(name: str) -> Any:
    if name == "TuidiagLogger":  # imported on use: the logger module subclasses Lightning's Logger
        from tuidiag.integrations.lightning_logger import TuidiagLogger

        return TuidiagLogger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

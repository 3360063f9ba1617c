"""Hugging Face Transformers callback: ``Trainer(..., callbacks=[TuidiagCallback("runs/x")])``.

It owns a :class:`tuidiag.Recorder` per ``train()`` call and records what the
recorder records, on every rank (each rank writes its own shards; rank 0 writes
``run.json``).

Where each value comes from (checked against Transformers 5.x's ``Trainer``,
which clips with ``max_grad_norm`` *before* ``on_pre_optimizer_step``):

- Gradients are **pre-clip**: the step is recorded at the end of the backward
  pass of the micro-batch that completes the optimizer step (Accelerate's
  ``sync_gradients``), after DDP's all-reduce and before the Trainer clips (see
  :mod:`tuidiag.integrations.backward_end`). So ``grad_norm/total`` equals the
  ``grad_norm`` the Trainer logs, and ``grad/clipped`` compares it with
  ``args.max_grad_norm``. Only if that moment is missed (no trainable parameter
  got a gradient) is the step recorded at ``on_pre_optimizer_step``, whose
  gradients are post-clip.
- ``train/loss``: the model output's ``loss`` of the step's micro-batches,
  combined as the Trainer does: summed when the model got ``num_items_in_batch``
  (its loss is then already normalised over the whole step; times the world size
  with ``average_tokens_across_devices``), else averaged. That is the loss the
  Trainer logs for the step. A loss the model does not return (``compute_loss``
  overridden to compute it outside the model, label smoothing) is not seen: then
  the Trainer's logged ``loss`` is recorded at each logging step instead.
  The Trainer sums the micro-batch losses of any model whose ``forward`` takes
  ``**kwargs``, trusting it to divide by ``num_items_in_batch``; a model that
  ignores it gets a logged loss ``gradient_accumulation_steps`` times its mean.
  One probe at the first step (two forward passes without gradients) tells, and
  then ``train/loss`` is the mean of the micro-batch losses, with a
  ``loss_normalisation`` warning event. The charts and the diagnosis read
  ``train/loss``; the Trainer's own logged value is kept as
  ``train/loss_trainer`` at each logging step.
- ``lr/group<i>``: the optimizer's param groups at that moment (the LR the step uses).
- Step index: ``state.global_step`` before the step (0-based), so a resumed
  training continues its numbering.
- Input health, activation health and the data-wait/compute split: the
  ``input_ids`` (or ``pixel_values``, ...) and ``labels`` of the step's first
  micro-batch, from a forward pre-hook. The Trainer fetches all micro-batches of
  a step before the first forward, so ``time/data_wait`` covers all of them.
- Evaluation: ``on_evaluate`` metrics, ``eval_loss`` as ``eval/loss``,
  ``eval_accuracy`` as ``eval/accuracy`` (any ``<prefix>_<name>`` as
  ``<prefix>/<name>``), at the last training step; runtime and throughput
  entries are skipped.
- Config: ``lr``, ``batch_size`` (samples per optimizer step: per-device batch
  times accumulation steps times ranks, what the diagnosis counts), your ``config``, ``TrainingArguments`` under
  ``training_args`` and the model config under ``model_config`` (JSON-safe values only).
- Re-running: ``train(resume_from_checkpoint=...)`` (``state.global_step > 0`` at
  ``on_train_begin``) continues the run in ``run_dir`` from that step
  (``resume="allow"``, ``start_step=global_step``); a new training never mixes
  with a run already there: it goes to ``run_dir-N`` (``resume="never"``).
  Pass ``resume=`` to decide yourself.
- Live jobs (the monitor's ``l``, ``o``, ``s``, or ``tuidiag lr-find RUN``) call the model with
  the whole keyword arguments of a kept batch, ``labels`` included, and take its output's
  ``loss`` (:mod:`tuidiag.integrations.job_loss`): a dataset without labels gives no loss,
  and the job fails saying so.
- Closed as ``finished`` at ``on_train_end``; a later ``trainer.evaluate()``
  writes nothing. The Trainer has no exception hook:
  a training that dies of an exception is marked ``failed`` when the process
  exits (the recorder's ``atexit`` hook).
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from tuidiag.format import LOSS, STATUS_FINISHED

LOSS_TRAINER = "train/loss_trainer"
"""The loss the Trainer logs, kept as it is beside ``train/loss`` (see the module docstring)."""
from tuidiag.integrations.callback_base import (
    GuardedCallback, base_optimizer, base_scheduler, guarded_hook, json_safe_dict, recorder_arguments,
)

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised only without transformers
    raise ImportError(
        "tuidiag.integrations.transformers needs Hugging Face Transformers: pip install transformers accelerate"
    ) from exc

__all__ = ["TuidiagCallback", "eval_metric_name"]

SKIPPED_EVAL_SUFFIXES = ("_runtime", "_per_second")


class TuidiagCallback(GuardedCallback, TrainerCallback):
    """Records a ``Trainer.train()`` into ``run_dir`` with :class:`tuidiag.Recorder`.

    Args:
        run_dir: the run directory (shared by all ranks).
        config: extra entries for the manifest's config.
        name: display name of the run.
        **recorder_kwargs: passed to :class:`tuidiag.Recorder`.
    """

    def __init__(self, run_dir: str | os.PathLike[str], config: Mapping[str, Any] | None = None,
                 *, name: str | None = None, **recorder_kwargs: Any) -> None:
        GuardedCallback.__init__(self)
        self.run_dir, self.config, self.name = run_dir, dict(config or {}), name
        self.recorder_kwargs = recorder_kwargs
        self._probe: Any = None

    @guarded_hook
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       **kwargs: Any) -> None:
        """Open the recorder and hook the model."""
        from tuidiag.integrations.transformers_step import TrainerStepProbe
        from tuidiag.recorder import Recorder

        self._close()
        config = transformers_config(args, model, self.config)
        self.recorder = Recorder(self.run_dir, config=config, name=self.name,
                                 **recorder_arguments(self.recorder_kwargs, state.global_step))
        max_norm = float(args.max_grad_norm) if args.max_grad_norm and args.max_grad_norm > 0 else None
        world = args.world_size if getattr(args, "average_tokens_across_devices", False) else 1
        scheduler = kwargs.get("lr_scheduler")
        self._probe = TrainerStepProbe(self.recorder, model, base_optimizer(optimizer), max_norm, world, state,
                                       base_scheduler(scheduler) if scheduler is not None else None)

    @guarded_hook
    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """A new optimizer step starts (its first micro-batch)."""
        if self._probe is not None:
            self._probe.begin_step()

    @guarded_hook
    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Record the step here only if the end of its backward pass was missed."""
        if self._probe is not None:
            self._probe.ensure_recorded()

    @guarded_hook
    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The optimizer step is done: forward passes from now on (evaluation) are not training."""
        if self._probe is not None:
            self._probe.end_step()

    @guarded_hook
    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Mapping[str, Any] | None = None,
                    **kwargs: Any) -> None:
        """Record the evaluation metrics at the last training step."""
        if self.recorder is None or not metrics:
            return
        kept = {k: v for k, v in metrics.items() if not k.endswith(SKIPPED_EVAL_SUFFIXES) and k != "epoch"}
        self.recorder.log({eval_metric_name(k): v for k, v in kept.items()})

    @guarded_hook
    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Record the Trainer's logged loss as ``train/loss_trainer``, and as ``train/loss`` when the model's own loss is not seen."""
        if self._probe is None or not logs or "loss" not in logs:
            return
        step = max(state.global_step - 1, 0)
        self.recorder.log({LOSS_TRAINER: logs["loss"]}, step=step)
        if not self._probe.saw_model_loss:
            self.recorder.log({LOSS: logs["loss"]}, step=step)

    @guarded_hook
    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Close the run as finished."""
        self._close()

    def _close(self) -> None:
        if self._probe is not None:
            self._probe.remove()
            self._probe = None
        recorder, self.recorder = self.recorder, None  # a later trainer.evaluate() records nothing
        if recorder is not None:
            recorder.close(STATUS_FINISHED)


def eval_metric_name(key: str) -> str:
    """``eval_loss`` -> ``eval/loss`` (the name the diagnosis reads); other keys unchanged."""
    prefix, sep, rest = key.partition("_")
    return f"{prefix}/{rest}" if sep and rest and prefix in ("eval", "test", "val", "validation") else key


def transformers_config(args: Any, model: Any, user: Mapping[str, Any]) -> dict[str, Any]:
    """The run's config: LR and batch size, the user's entries, TrainingArguments and the model config."""
    samples_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * max(1, args.world_size)
    config: dict[str, Any] = {"lr": args.learning_rate, "batch_size": samples_per_step}
    config.update(user)
    config["training_args"] = json_safe_dict(args.to_dict())
    model_config = getattr(model, "config", None)
    if model_config is not None and hasattr(model_config, "to_dict"):
        config["model_config"] = json_safe_dict(model_config.to_dict())
    return config

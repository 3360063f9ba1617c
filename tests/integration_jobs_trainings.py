"""The trainings of ``tests/test_integration_jobs.py``: Lightning and Transformers, each with a job asked for mid-run.

Imported by that file's fixture when a test needs it, so collecting the file imports neither framework.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import lightning.pytorch as pl
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

from tests.lightning_helpers import TinyRegressor, loaders
from tests.transformers_helpers import SEQ, VOCAB, TokenDataset
from tuidiag.integrations.lightning import TuidiagCallback as LightningCallback
from tuidiag.integrations.transformers import TuidiagCallback as TransformersCallback
from tuidiag.store import control_channel as ctl

ASK_AT = 3
"""The optimizer step before which the request is written."""


class LoggingRegressor(TinyRegressor):
    """Logs its loss with ``self.log`` at every step (the logger must not see a job's losses)."""

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.log("train_mse", loss, on_step=True, on_epoch=True)
        return loss


class ManualRegressor(TinyRegressor):
    """Manual optimization: ``training_step`` steps the optimizer itself."""

    def __init__(self) -> None:
        super().__init__(lr=0.01)
        self.automatic_optimization = False

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        optimizer = self.optimizers()
        loss = super().training_step(batch, batch_idx)
        optimizer.zero_grad()
        self.manual_backward(loss)
        optimizer.step()


class _AskLightning(pl.Callback):
    def __init__(self, recording: Any, run_dir: Path, job: tuple[str, dict[str, Any]]) -> None:
        self.recording, self.run_dir, self.job, self.request_id = recording, run_dir, job, None

    def on_train_batch_start(self, trainer: pl.Trainer, module: Any, batch: Any, batch_idx: int) -> None:
        if trainer.global_step == ASK_AT and self.request_id is None:
            self.request_id = ctl.write_request(self.run_dir, *self.job)
            self.recording.recorder.flush()  # the writer polls RUN/control at each flush


class _AskTransformers(TrainerCallback):
    def __init__(self, recording: Any, run_dir: Path, job: tuple[str, dict[str, Any]]) -> None:
        self.recording, self.run_dir, self.job, self.request_id = recording, run_dir, job, None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == ASK_AT and self.request_id is None:
            self.request_id = ctl.write_request(self.run_dir, *self.job)
            self.recording.recorder.flush()


def lightning(run_dir: Path, make: Callable[[], TinyRegressor], job: tuple[str, dict[str, Any]] | None) -> tuple[nn.Module, str | None]:
    """One epoch of ``make()`` recorded into ``run_dir``, with ``job`` asked for at step :data:`ASK_AT`; the module and the request's id."""
    torch.manual_seed(0)
    module = make()
    recording = LightningCallback(run_dir, flush_interval=30.0)
    ask = [_AskLightning(recording, run_dir, job)] if job else []
    trainer = pl.Trainer(callbacks=[recording, *ask], logger=recording.logger, accelerator="cpu", devices=1, max_epochs=1, log_every_n_steps=1,
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    train, _ = loaders()
    trainer.fit(module, train)
    return module, ask[0].request_id if ask else None


def transformers(tmp: Path, run_dir: Path, job: tuple[str, dict[str, Any]] | None) -> tuple[nn.Module, str | None]:
    """Six steps of a tiny GPT-2 recorded into ``run_dir``, with ``job`` asked for at step :data:`ASK_AT`; the model and the request's id."""
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=2))
    args = TrainingArguments(output_dir=str(tmp), use_cpu=True, report_to=[], max_steps=6, learning_rate=5e-3,
                             per_device_train_batch_size=4, gradient_accumulation_steps=2, max_grad_norm=1.0,
                             logging_steps=1, save_strategy="no", disable_tqdm=True, seed=0)
    recording = TransformersCallback(run_dir, flush_interval=30.0)
    ask = [_AskTransformers(recording, run_dir, job)] if job else []
    trainer = Trainer(model=model, args=args, train_dataset=TokenDataset(64, 1), callbacks=[recording, *ask])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)
    return model, ask[0].request_id if ask else None

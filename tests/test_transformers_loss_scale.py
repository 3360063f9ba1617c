"""The Transformers loss per optimizer step is the mean the model saw, whatever its loss normalisation.

The Trainer sums micro-batch losses for any model whose ``forward`` takes ``**kwargs``
and trusts it to divide by ``num_items_in_batch``; a model that ignores it is logged
``gradient_accumulation_steps`` times too large. A matrix of models (no kwargs, kwargs
ignored, kwargs honoured) and accumulation counts, at LR 0 so every variant sees the
same weights and batches: ``train/loss`` must equal the plain model's logged loss (the
Trainer divides that one itself), and ``train/loss_trainer`` what the Trainer logged.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import torch

import tuidiag
from tests.lazy_module import LazyModule, installed

pytestmark = pytest.mark.skipif(not installed("transformers", "accelerate"), reason="needs transformers and accelerate")
transformers = LazyModule("transformers")
"""Imported when a test first trains, not when this file is collected."""
callbacks = LazyModule("tuidiag.integrations.transformers")


class Plain(torch.nn.Module):
    """No ``**kwargs``: the Trainer divides each micro-batch loss by the accumulation count itself."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict:
        return {"loss": ((self.lin(x) - labels) ** 2).mean()}


class Ignores(Plain):
    """Takes ``**kwargs`` (so the Trainer passes ``num_items_in_batch``) and ignores it."""

    def forward(self, x: torch.Tensor, labels: torch.Tensor, **kwargs: object) -> dict:
        return {"loss": ((self.lin(x) - labels) ** 2).mean()}


class Honours(Plain):
    """Divides the summed error by the step's item count, as Transformers' own models do."""

    def forward(self, x: torch.Tensor, labels: torch.Tensor, num_items_in_batch: object = None, **kwargs: object) -> dict:
        err = ((self.lin(x) - labels) ** 2).sum()
        return {"loss": err / num_items_in_batch if num_items_in_batch is not None else err / labels.numel()}


class Rows(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(48, 4, generator=g)
        self.y = self.x.sum(1, keepdim=True) + torch.randn(48, 1, generator=g)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict:
        return {"x": self.x[i], "labels": self.y[i]}


def _train(tmp_path: Path, model: torch.nn.Module, accumulation: int) -> tuple[list[float], Path]:
    run_dir = tmp_path / f"{type(model).__name__}-{accumulation}"
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to=[], max_steps=3, learning_rate=0.0,
                             per_device_train_batch_size=4, gradient_accumulation_steps=accumulation, logging_steps=1,
                             disable_tqdm=True, save_strategy="no", seed=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Rows(), callbacks=[callbacks.TuidiagCallback(run_dir, flush_interval=0.2)])
    trainer.train()
    return [row["loss"] for row in trainer.state.log_history if "loss" in row], run_dir


@pytest.mark.parametrize("accumulation", [1, 3])
def test_train_loss_is_the_step_mean_for_every_normalisation(tmp_path: Path, accumulation: int) -> None:
    reference: list[float] = []  # what the Trainer logs for the plain model: it divides that loss itself
    for model in (Plain(), Ignores(), Honours()):
        logged, run_dir = _train(tmp_path, model, accumulation)
        reference = reference or logged
        run = tuidiag.open_run(run_dir)
        assert np.allclose(run.series("train/loss").values, reference, rtol=1e-4), type(model).__name__
        assert np.allclose(run.series(callbacks.LOSS_TRAINER).values, logged, rtol=1e-4)
        warned = [e for e in run.events if e.kind == "loss_normalisation"]
        assert bool(warned) == isinstance(model, Ignores)
        if isinstance(model, Ignores):  # the Trainer's value is the sum of the micro-batch means
            assert np.allclose(logged, np.asarray(reference) * accumulation, rtol=1e-4)

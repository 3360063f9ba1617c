"""Tiny real trainings used by several tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

import tuidiag


def tiny_model(seed: int = 0) -> nn.Module:
    """A two-layer ReLU MLP with a sigmoid head (so both activation probes fire)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1), nn.Sigmoid())


def train(run_dir: Path, steps: int = 30, lr: float = 1e-2, poison_at: int | None = None, **recorder_kwargs: Any) -> nn.Module:
    """Train ``tiny_model`` for ``steps`` steps with the recorder; optionally feed a NaN batch."""
    model = tiny_model()
    optimizer = torch.optim.SGD(model.parameters(), lr)
    gen = torch.Generator().manual_seed(1)
    with tuidiag.Recorder(run_dir, config={"lr": lr}, **recorder_kwargs) as rec:
        rec.watch(model, optimizer, max_grad_norm=0.5)
        for step in range(steps):
            x = torch.randn(16, 8, generator=gen)
            if step == poison_at:
                x[0, 0] = float("nan")
            y = (x[:, :1] > 0).float()
            rec.batch(x, y)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            rec.step(loss)
            optimizer.step()
            optimizer.zero_grad()
            if step % 10 == 0:
                rec.log({"val/loss": float(step), "val/acc": torch.tensor(0.5)})
    return model

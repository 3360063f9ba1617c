"""Tiny real CPU trainings, recorded through the public ``tuidiag.Recorder``, for the root-cause tests.

Three kinds of fault whose symptom used to outrank their cause, and healthy controls:

- ``lr_high``: a far too high LR (Adam 0.1, SGD momentum at 0.5 or more): the loss
  oscillates and ReLUs die; the LR is the cause, the dead units its consequence.
- ``loss_nan``: a Poisson loss taking ``log`` of a ReLU output at a normal LR: the
  loss is finite and stable, then turns non-finite at once, with nothing growing first.
- ``lr_collapse``: an epoch schedule stepped per batch (``StepLR(30, 0.1)``) or
  ``ExponentialLR(0.95)`` per step: the LR falls 1000x before the loss improved much.
- ``healthy``: the same models at sane LRs and schedules.

Models and data come from ``benchmarks/suite`` (MLP on vectors, CNN on 8x8 images, GRU
on sequences); every training is a few hundred steps of a small model on one thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

import tuidiag
from benchmarks.suite import data
from benchmarks.suite.models import TASK_OF, build

RATE_SLOPE, RATE_SHIFT, HEAD_BIAS = 1.0, 1.0, 3.0
ARCH_SIZE: dict[str, dict[str, Any]] = {"mlp": {"width": 32}, "cnn": {"channels": 6}, "rnn": {"hidden": 16}}


@dataclass(frozen=True)
class Training:
    """One tiny training: model, optimizer, LR, schedule, loss and length."""

    kind: str
    """``lr_high``, ``loss_nan``, ``lr_collapse`` or ``healthy`` (what the test expects on top)."""
    arch: str = "mlp"
    optim: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    steps: int = 300
    seed: int = 0
    schedule: str | None = None
    """``step30`` (StepLR(30, 0.1) per batch), ``exp95`` (ExponentialLR(0.95) per batch), ``cosine``, ``step_late``."""
    loss: str = "ce"
    """``ce`` (cross-entropy classification) or ``poisson`` (log of a ReLU output, the numerical fault)."""
    batch_size: int = 32
    full: bool = False
    """Trained only by the full run (``TUIDIAG_FULL_TESTS=1``): a repeat of what its kind already covers."""

    @property
    def name(self) -> str:
        sched = f"-{self.schedule}" if self.schedule else ""
        return f"{self.kind}-{self.arch}-{self.optim}{self.lr:g}{sched}-{self.loss}-n{self.steps}-s{self.seed}"


def optimizer_of(t: Training, model: nn.Module) -> torch.optim.Optimizer:
    """Adam, AdamW, RMSprop or SGD with momentum at the training's LR."""
    params = model.parameters()
    if t.optim == "sgd":
        return torch.optim.SGD(params, t.lr, momentum=t.momentum)
    if t.optim == "adamw":
        return torch.optim.AdamW(params, t.lr, weight_decay=0.01)
    if t.optim == "rmsprop":
        return torch.optim.RMSprop(params, t.lr)
    return torch.optim.Adam(params, t.lr)


def schedule_of(t: Training, optimizer: torch.optim.Optimizer) -> Any:
    """The training's scheduler (stepped once per batch by the loop), or ``None``."""
    if t.schedule == "step30":
        return torch.optim.lr_scheduler.StepLR(optimizer, 30, 0.1)
    if t.schedule == "exp95":
        return torch.optim.lr_scheduler.ExponentialLR(optimizer, 0.95)
    if t.schedule == "cosine":
        n = t.steps
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, n) / n)))
    if t.schedule == "step_late":
        return torch.optim.lr_scheduler.StepLR(optimizer, (2 * t.steps) // 3, 0.1)
    return None


def _counts(x: torch.Tensor, seed: int) -> torch.Tensor:
    """Poisson counts whose rate depends on the inputs (some rates near zero, so the fit pushes outputs to 0)."""
    gen = torch.Generator().manual_seed(seed + 17)
    flat = x.reshape(len(x), -1)
    w = torch.randn(flat.shape[1], generator=gen) / math.sqrt(flat.shape[1])
    rate = torch.exp(RATE_SLOPE * flat @ w + RATE_SHIFT)
    return torch.poisson(rate, generator=gen).unsqueeze(1)


def _poisson_loss(output: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """A hand-written Poisson NLL on ``relu`` of the first output: ``log(0)`` is -inf once a rate reaches 0."""
    rate = torch.relu(output[:, :1])
    return (rate - y * torch.log(rate) + torch.lgamma(y + 1)).mean()


def _positive_start(model: nn.Module) -> None:
    """Start the output head at a positive rate, so the loss starts finite."""
    head = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    with torch.no_grad():
        head.bias.fill_(HEAD_BIAS)


def record(t: Training, run_dir: Path) -> Path:
    """Train ``t`` on the CPU through the recorder; a non-finite loss ends the training (status ``failed``)."""
    torch.manual_seed(t.seed)
    x, y, xv, yv = data.make(TASK_OF[t.arch], 1024, 256, t.seed)
    if t.loss == "poisson":
        y, yv = _counts(x, t.seed), _counts(xv, t.seed + 1)
    model = build(t.arch, **ARCH_SIZE[t.arch])
    if t.loss == "poisson":
        _positive_start(model)
    loss_fn = _poisson_loss if t.loss == "poisson" else nn.functional.cross_entropy
    optimizer = optimizer_of(t, model)
    scheduler = schedule_of(t, optimizer)
    gen = torch.Generator().manual_seed(t.seed)
    config = {"lr": t.lr, "optimizer": t.optim, "batch_size": t.batch_size}
    try:
        with tuidiag.Recorder(run_dir, config=config, name=t.name, control=False) as rec:
            rec.watch(model, optimizer, loss_fn=loss_fn, scheduler=scheduler)
            for step in range(t.steps):
                idx = torch.randint(0, len(x), (t.batch_size,), generator=gen)
                xb, yb = x[idx], y[idx]
                rec.batch(xb, yb)
                model.train()
                loss = loss_fn(model(xb), yb)
                optimizer.zero_grad()
                loss.backward()
                rec.step(loss)
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                if step % 20 == 0 or step == t.steps - 1:
                    with torch.no_grad():
                        model.eval()
                        rec.log({"val/loss": loss_fn(model(xv), yv).item()})
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"loss is {loss.item()} at step {step}")
    except FloatingPointError:
        pass
    return run_dir

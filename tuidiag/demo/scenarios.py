"""The demo runs: each one a real training through ``tuidiag.Recorder`` on the CPU.

Every scenario is a recipe (model, optimizer, data, steps) fed to one shared
training loop, so the only difference between the healthy run and a pathology
is the cause itself: an LR too high or too low, too little data, a deep sigmoid
stack.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

import tuidiag
from tuidiag.demo.data import batches, blobs, noisy_labels

DIM, CLASSES = 20, 4


@dataclass
class Scenario:
    """One demo training: what it shows, and how to build it."""

    name: str
    shows: str
    steps: int
    build_model: Callable[[], nn.Module]
    build_optimizer: Callable[[nn.Module], torch.optim.Optimizer]
    train_size: int = 4096
    label_noise: float = 0.0
    batch_size: int = 64
    max_grad_norm: float | None = None
    val_every: int = 50
    stop_on_nonfinite: bool = True
    config: dict = field(default_factory=dict)

    @property
    def factory(self) -> str:
        """The packaged factory that rebuilds this training for jobs (:mod:`tuidiag.demo.factory`)."""
        return f"tuidiag.demo.factory:{self.name.replace('-', '_')}"


@dataclass
class Built:
    """One scenario's model, optimizer, loss and data, as its training starts."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    criterion: nn.Module
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor


def mlp(width: int = 128, depth: int = 3, act: type[nn.Module] = nn.ReLU, dropout: float = 0.0) -> nn.Module:
    """A plain MLP classifier for the demo data."""
    layers: list[nn.Module] = []
    size = DIM
    for _ in range(depth):
        layers += [nn.Linear(size, width), act()] + ([nn.Dropout(dropout)] if dropout else [])
        size = width
    layers.append(nn.Linear(size, CLASSES))
    return nn.Sequential(*layers)


SCENARIOS = [
    Scenario("healthy", "Adam 1e-3, cosine decay: loss falls and validation follows", 1500,
             lambda: mlp(dropout=0.1), lambda m: torch.optim.AdamW(m.parameters(), 1e-3, weight_decay=0.01),
             max_grad_norm=1.0, config={"optimizer": "AdamW", "lr": 1e-3, "schedule": "cosine"}),
    Scenario("lr-too-high", "SGD at lr=0.3, momentum 0.9, no clipping: loss oscillates, gradients explode, then NaN", 600,
             lambda: mlp(), lambda m: torch.optim.SGD(m.parameters(), 0.3, momentum=0.9),
             config={"optimizer": "SGD", "lr": 0.3, "momentum": 0.9}),
    Scenario("lr-too-low", "SGD at lr=1e-5: healthy gradients, loss barely moves (plateau)", 1200,
             lambda: mlp(), lambda m: torch.optim.SGD(m.parameters(), 1e-5),
             config={"optimizer": "SGD", "lr": 1e-5}),
    Scenario("overfitting", "256 noisy samples, wide MLP, no regularisation: train falls, validation turns up", 2000,
             lambda: mlp(width=512), lambda m: torch.optim.Adam(m.parameters(), 2e-3),
             train_size=256, label_noise=0.3, batch_size=32, config={"optimizer": "Adam", "lr": 2e-3, "train_samples": 256}),
    Scenario("vanishing-gradients", "12 sigmoid layers, SGD: early layers get almost no gradient, loss stays flat", 1200,
             lambda: mlp(width=64, depth=12, act=nn.Sigmoid), lambda m: torch.optim.SGD(m.parameters(), 0.05),
             config={"optimizer": "SGD", "lr": 0.05, "depth": 12, "activation": "sigmoid"}),
]


def by_name(name: str) -> Scenario:
    """Look a scenario up by name; raises ``KeyError`` listing the known names."""
    for scenario in SCENARIOS:
        if scenario.name == name:
            return scenario
    raise KeyError(f"unknown scenario {name!r}; known: {', '.join(s.name for s in SCENARIOS)}")


def build(scenario: Scenario, seed: int = 0) -> Built:
    """The scenario's data, model (initial weights from the global torch RNG, seeded with ``seed``),
    loss and optimizer: what :func:`train` starts from and what the demo factory returns."""
    torch.manual_seed(seed)
    x, y = blobs(scenario.train_size + 1024, DIM, CLASSES, seed=seed)
    x_train, y_train = x[: scenario.train_size], noisy_labels(y[: scenario.train_size], scenario.label_noise, CLASSES)
    x_val, y_val = x[scenario.train_size :], y[scenario.train_size :]
    model = scenario.build_model()
    return Built(model, scenario.build_optimizer(model), nn.CrossEntropyLoss(), x_train, y_train, x_val, y_val)


def train(scenario: Scenario, run_dir: Path, steps: int | None = None, pace: float = 0.0, seed: int = 0) -> Path:
    """Train ``scenario`` for ``steps`` (default: its own; <= 0 means forever) and record it."""
    steps = scenario.steps if steps is None else steps
    built = build(scenario, seed)
    model, criterion, optimizer = built.model, built.criterion, built.optimizer
    x_train, y_train, x_val, y_val = built.x_train, built.y_train, built.x_val, built.y_val
    horizon = steps if steps > 0 else 10_000
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, horizon) / horizon)) * 0.9 + 0.1)
    config = {"scenario": scenario.name, "shows": scenario.shows, "batch_size": scenario.batch_size, **scenario.config}
    with tuidiag.Recorder(run_dir, config=config, name=Path(run_dir).name, factory=scenario.factory) as rec:
        # the scheduler too: a live LR change (the monitor's `a`, `tuidiag act --scale-lr`) scales the schedule
        rec.watch(model, optimizer, max_grad_norm=scenario.max_grad_norm, loss_fn=criterion, scheduler=schedule)
        loader = batches(x_train, y_train, scenario.batch_size, seed=seed)
        step = 0
        while steps <= 0 or step < steps:
            xb, yb = next(loader)
            rec.batch(xb, yb)
            if pace:
                time.sleep(pace)  # stands in for a bigger model's compute (not for data loading)
            model.train()
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            rec.step(loss)
            if scenario.max_grad_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), scenario.max_grad_norm)
            optimizer.step()
            if scenario.name == "healthy":
                schedule.step()
            if step % scenario.val_every == 0 or step == steps - 1:
                rec.log(evaluate(model, criterion, x_val, y_val))
            if scenario.stop_on_nonfinite and not torch.isfinite(loss):
                raise FloatingPointError(f"loss is {loss.item()} at step {step}")
            step += 1
    return run_dir


@torch.no_grad()
def evaluate(model: nn.Module, criterion: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Validation loss and accuracy, in eval mode, restoring train mode afterwards."""
    was_training = model.training
    model.eval()
    logits = model(x)
    result = {"val/loss": criterion(logits, y).item(), "val/acc": (logits.argmax(1) == y).float().mean().item()}
    model.train(was_training)
    return result

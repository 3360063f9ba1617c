"""One shared training loop for every suite scenario, recorded through the real ``tuidiag.Recorder``.

A scenario is a ``Spec``: the model, optimizer, schedule and data, plus the fault to
plant (``Spec.fault``) and its labels. The loop is the same for faulty and healthy
runs, so a run differs from a healthy one only by its planted cause.

Fault keys understood by the loop (all optional):

- ``input_scale``: multiply every input batch (unnormalized data);
- ``nan_at``: put a NaN into one sample of the batch at that step;
- ``corrupt_every`` / ``corrupt_from`` / ``corrupt``: every N steps from a step on, a corrupted
  batch, ``"labels"`` (shuffled) or ``"inputs"`` (scaled x25);
- ``stale_eval``: validate a copy of the model taken at the start (never updated);
- ``eval_mode_bug``: validation calls ``model.eval()`` and training never calls ``model.train()``;
- ``imbalance``: share of class 0 in the data;
- ``loader_sleep``: seconds the data loader sleeps per batch;
- ``label_noise``: share of training labels replaced with random ones;
- ``no_zero_grad``: ``optimizer.zero_grad()`` is never called (gradients pile up);
- ``softmax_output``: the model's output goes through a softmax before the cross-entropy;
- ``mse_flat``: the loss is MSE of the first output, shape (N, 1), against the class index as a float of shape (N,);
- ``misaligned_labels``: the training labels are shuffled on their own, apart from the inputs;
- ``unshuffled``: the training data is sorted by class and never shuffled.

The loss is an ``nn.Module`` given to ``rec.watch(..., loss_fn=...)``, so the recorder checks its inputs.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

import tuidiag
from benchmarks.suite import data
from benchmarks.suite.models import TASK_OF, build


@dataclass
class Spec:
    """One labelled scenario of the suite."""

    name: str
    family: str
    """The planted fault (a diagnosis code) or ``healthy``."""
    split: str
    """``tune`` (thresholds may be tuned on it) or ``held_out`` (reported only)."""
    acceptable: tuple[str, ...]
    """Codes that count as a correct top finding."""
    false_alarm: tuple[str, ...]
    """Codes that would be wrong to raise at warning or critical level."""
    arch: str = "mlp"
    model: dict[str, Any] = field(default_factory=dict)
    optim: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.0
    weight_decay: float = 0.0
    batch_size: int = 64
    steps: int = 400
    train_size: int = 2048
    task: str | None = None
    max_grad_norm: float | None = None
    schedule: str | None = None
    fault: dict[str, Any] = field(default_factory=dict)
    onset: int = 0
    """The step at which the fault starts acting (for the detection delay)."""
    val_every: int = 25
    seed: int = 0


def make_optimizer(spec: Spec, model: nn.Module) -> torch.optim.Optimizer:
    """SGD (with ``momentum``), Adam or AdamW at ``spec.lr``."""
    params = model.parameters()
    if spec.optim == "sgd":
        return torch.optim.SGD(params, spec.lr, momentum=spec.momentum, weight_decay=spec.weight_decay)
    if spec.optim == "adamw":
        return torch.optim.AdamW(params, spec.lr, weight_decay=spec.weight_decay or 0.01)
    return torch.optim.Adam(params, spec.lr, weight_decay=spec.weight_decay)


def make_schedule(spec: Spec, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler | None:
    """``cosine`` (to 10% at the end), ``warmup_cosine``, or ``per_batch_decay`` (an epoch schedule stepped per batch)."""
    n = spec.steps
    if spec.schedule == "cosine":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, n) / n)))
    if spec.schedule == "warmup_cosine":
        warm = max(1, n // 10)
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min(1.0, (s + 1) / warm) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(s, n) / n))))
    if spec.schedule == "per_batch_decay":
        return torch.optim.lr_scheduler.ExponentialLR(optimizer, spec.fault.get("gamma", 0.95))
    if spec.schedule == "step_per_batch":
        return torch.optim.lr_scheduler.StepLR(optimizer, spec.fault.get("step_size", 30), 0.1)
    return None


def make_data(spec: Spec) -> tuple[torch.Tensor, ...]:
    """Train/validation tensors for the spec, with label noise and class imbalance applied."""
    task = spec.task or TASK_OF[spec.arch]
    x, y, xv, yv = data.make(task, spec.train_size, 1024, spec.seed)
    if spec.fault.get("label_noise"):
        y = data.noisy_labels(y, spec.fault["label_noise"])
    if spec.fault.get("imbalance"):
        x, y = data.imbalance(x, y, spec.fault["imbalance"])
        xv, yv = data.imbalance(xv, yv, spec.fault["imbalance"], seed=3)
    if spec.fault.get("misaligned_labels"):
        y = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(spec.seed + 7))]
    if spec.fault.get("unshuffled"):
        order = torch.argsort(y, stable=True)
        x, y = x[order], y[order]
    return x, y, xv, yv


def loader(spec: Spec, x: torch.Tensor, y: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches, with the spec's data faults applied."""
    gen = torch.Generator().manual_seed(spec.seed)
    fault, step = spec.fault, 0
    batch = min(spec.batch_size, len(x))
    while True:
        order = torch.arange(len(x)) if fault.get("unshuffled") else torch.randperm(len(x), generator=gen)
        for start in range(0, len(x) - batch + 1, batch):
            idx = order[start : start + batch]
            xb, yb = _faulty(fault, step, x[idx].clone(), y[idx].clone())
            if fault.get("loader_sleep"):
                time.sleep(fault["loader_sleep"])
            yield xb, yb
            step += 1


def _faulty(fault: dict[str, Any], step: int, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if fault.get("input_scale") and xb.is_floating_point():
        xb = xb * fault["input_scale"]
    if fault.get("nan_at") is not None and step >= fault["nan_at"] and xb.is_floating_point():
        xb.view(len(xb), -1)[0, 0] = float("nan")
    every = fault.get("corrupt_every")
    if every and step >= fault.get("corrupt_from", 0) and (step - fault.get("corrupt_from", 0)) % every == 0:
        if fault.get("corrupt", "labels") == "labels":
            yb = (yb + 1 + torch.randint(0, data.CLASSES - 1, yb.shape)) % data.CLASSES
        else:
            xb = xb * 25.0
    return xb, yb


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, restore: bool = True) -> dict[str, float]:
    """Validation loss and accuracy in eval mode; ``restore=False`` leaves the model in eval mode (the bug)."""
    was_training = model.training
    model.eval()
    logits = model(x)
    result = {"val/loss": nn.functional.cross_entropy(logits, y).item(), "val/acc": (logits.argmax(1) == y).float().mean().item()}
    if restore:
        model.train(was_training)
    return result


def record(spec: Spec, run_dir: Path) -> Path:
    """Train ``spec`` on the CPU and record it into ``run_dir`` (a diverged run ends early, as ``failed``)."""
    torch.manual_seed(spec.seed)
    x, y, xv, yv = make_data(spec)
    model = build(spec.arch, **spec.model)
    optimizer = make_optimizer(spec, model)
    schedule = make_schedule(spec, optimizer)
    evaluated = copy.deepcopy(model) if spec.fault.get("stale_eval") else model
    config = {"scenario": spec.name, "family": spec.family, "arch": spec.arch, "optimizer": spec.optim, "lr": spec.lr, "batch_size": spec.batch_size}
    try:
        with tuidiag.Recorder(run_dir, config=config, name=spec.name) as rec:
            criterion = nn.MSELoss() if spec.fault.get("mse_flat") else nn.CrossEntropyLoss()
            rec.watch(model, optimizer, max_grad_norm=spec.max_grad_norm, loss_fn=criterion)
            _loop(spec, rec, model, optimizer, schedule, loader(spec, x, y), (evaluated, xv, yv), criterion)
    except FloatingPointError:
        pass
    return run_dir


def _loss(spec: Spec, criterion: nn.Module, out: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
    """The training loss, with the loss faults planted."""
    if spec.fault.get("mse_flat"):
        return criterion(out[:, :1], yb.float())
    return criterion(torch.softmax(out, dim=1) if spec.fault.get("softmax_output") else out, yb)


def _loop(spec: Spec, rec: tuidiag.Recorder, model: nn.Module, optimizer: torch.optim.Optimizer, schedule: Any,
          batches: Iterator[tuple[torch.Tensor, torch.Tensor]], val: tuple[nn.Module, torch.Tensor, torch.Tensor],
          criterion: nn.Module) -> None:
    eval_bug = bool(spec.fault.get("eval_mode_bug"))
    model.train()
    for step in range(spec.steps):
        xb, yb = next(batches)
        rec.batch(xb, yb)
        if not eval_bug:
            model.train()
        loss = _loss(spec, criterion, model(xb), yb)
        if not spec.fault.get("no_zero_grad"):
            optimizer.zero_grad()
        loss.backward()
        rec.step(loss)
        if spec.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), spec.max_grad_norm)
        optimizer.step()
        if schedule is not None:
            schedule.step()
        if step % spec.val_every == 0 or step == spec.steps - 1:
            rec.log(evaluate(val[0], val[1], val[2], restore=not eval_bug))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss is {loss.item()} at step {step}")

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
- ``poisson``: the targets are counts and the loss a hand-written Poisson NLL taking ``log`` of a ReLU
  output (finite until a rate reaches 0, then non-finite at once: a numerical fault, not the LR);
- ``frozen``: every parameter has ``requires_grad=False`` (the loop, like many generic ones, calls
  ``backward`` only when the loss requires a gradient): nothing trains;
- ``orphan_optimizer``: the optimizer was built over the parameters of another copy of the model
  (the model was re-created after the optimizer), so the watched model never changes;
- ``resume_lr``: the LR is multiplied by this on resume (a changed config that overshoots);
- ``resume_fresh_optimizer``: the resumed session does not restore the optimizer's state.

A scenario with ``resume_at`` trains in two sessions: the first records steps up to
``resume_at``; the second loads the checkpoint taken at ``resume_from`` (default: ``resume_at``)
and continues the same run directory (``resume="allow"``, ``start_step`` = the checkpoint's step,
so an older checkpoint replays steps). ``accumulate`` > 1 steps the optimizer every that many
batches (gradient accumulation done right: ``zero_grad`` after each optimizer step).

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
from benchmarks.suite.models import TASK_OF, architecture, build


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
    """The step at which the fault starts acting (for the detection delay); negative: the run's last step
    (a fault that acts once and ends the run)."""
    val_every: int = 25
    seed: int = 0
    resume_at: int | None = None
    """Train the first ``resume_at`` steps in one recorder session, the rest in a second one."""
    resume_from: int | None = None
    """The step of the checkpoint the second session starts from (``None``: ``resume_at``)."""
    accumulate: int = 1
    """Batches per optimizer step."""

    @property
    def architecture(self) -> str:
        """The architecture a scenario is held out by (``gru``, ``lstm`` and ``rnn`` apart)."""
        return architecture(self.arch, self.model)


def make_optimizer(spec: Spec, model: nn.Module) -> torch.optim.Optimizer:
    """SGD (with ``momentum``), Adam, AdamW or RMSprop at ``spec.lr`` (over another copy's parameters: ``orphan_optimizer``)."""
    params = (build(spec.arch, **spec.model) if spec.fault.get("orphan_optimizer") else model).parameters()
    if spec.optim == "rmsprop":
        return torch.optim.RMSprop(params, spec.lr, momentum=spec.momentum)
    if spec.optim == "sgd":
        return torch.optim.SGD(params, spec.lr, momentum=spec.momentum, weight_decay=spec.weight_decay)
    if spec.optim == "adamw":
        return torch.optim.AdamW(params, spec.lr, weight_decay=spec.weight_decay or 0.01)
    return torch.optim.Adam(params, spec.lr, weight_decay=spec.weight_decay)


def make_schedule(spec: Spec, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler | None:
    """``cosine`` (to 10% at the end), ``warmup_cosine``, ``warmup_slow`` (3000 steps), or ``per_batch_decay`` /
    ``step_per_batch`` (an epoch schedule stepped per batch)."""
    n = spec.steps
    if spec.schedule == "cosine":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, n) / n)))
    if spec.schedule == "warmup_cosine":
        warm = max(1, n // 10)
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min(1.0, (s + 1) / warm) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(s, n) / n))))
    if spec.schedule == "warmup_slow":  # a linear warmup over 3000 steps, whatever the run's length
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 3000))
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
    if spec.fault.get("poisson"):
        y, yv = poisson_counts(x, spec.seed), poisson_counts(xv, spec.seed + 1)
    return x, y, xv, yv


def poisson_counts(x: torch.Tensor, seed: int) -> torch.Tensor:
    """Poisson counts, shape (N, 1), whose rate depends on the inputs (some near 0, so the fit pushes rates to 0)."""
    gen = torch.Generator().manual_seed(seed + 17)
    flat = x.reshape(len(x), -1).float()
    w = torch.randn(flat.shape[1], generator=gen) / math.sqrt(flat.shape[1])
    return torch.poisson(torch.exp(flat @ w + 1.0), generator=gen).unsqueeze(1)


class PoissonFromRelu(nn.Module):
    """A hand-written Poisson NLL on ``relu`` of the first output: ``log(0)`` is -inf once a rate reaches 0."""

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The mean negative log-likelihood of the counts ``target`` at rates ``relu(output[:, :1])``."""
        rate = torch.relu(output[:, :1])
        return (rate - target * torch.log(rate) + torch.lgamma(target + 1)).mean()


def loader(spec: Spec, x: torch.Tensor, y: torch.Tensor, skip: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless shuffled batches, with the spec's data faults applied, from batch ``skip`` on (a resumed session's data)."""
    batches = _batches(spec, x, y)
    for _ in range(skip):
        next(batches)
    return batches


def _batches(spec: Spec, x: torch.Tensor, y: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
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
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, restore: bool = True,
             criterion: nn.Module | None = None) -> dict[str, float]:
    """Validation loss (and accuracy for classes) in eval mode; ``restore=False`` leaves the model in eval mode (the bug)."""
    was_training = model.training
    model.eval()
    out = model(x)
    if isinstance(criterion, PoissonFromRelu):
        result = {"val/loss": criterion(out, y).item()}
    else:
        result = {"val/loss": nn.functional.cross_entropy(out, y).item(), "val/acc": (out.argmax(1) == y).float().mean().item()}
    if restore:
        model.train(was_training)
    return result


@dataclass
class Parts:
    """What one recorder session trains: model, optimizer, schedule, loss, and the model evaluated."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    schedule: Any
    criterion: nn.Module
    evaluated: nn.Module


def build_parts(spec: Spec) -> Parts:
    """The model, optimizer, schedule and loss of ``spec``, with its model faults planted (after seeding torch)."""
    model = build(spec.arch, **spec.model)
    if spec.fault.get("poisson"):
        head = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
        with torch.no_grad():
            head.bias.fill_(3.0)  # start at a positive rate, so the loss starts finite
    if spec.fault.get("frozen"):
        model.requires_grad_(False)
    optimizer = make_optimizer(spec, model)
    criterion: nn.Module = nn.CrossEntropyLoss()
    if spec.fault.get("poisson") or spec.fault.get("mse_flat"):
        criterion = PoissonFromRelu() if spec.fault.get("poisson") else nn.MSELoss()
    evaluated = copy.deepcopy(model) if spec.fault.get("stale_eval") else model
    return Parts(model, optimizer, make_schedule(spec, optimizer), criterion, evaluated)


def record(spec: Spec, run_dir: Path) -> Path:
    """Train ``spec`` on the CPU and record it into ``run_dir`` (a diverged run ends early, as ``failed``).

    With ``spec.resume_at`` the training stops there, and a second recorder session continues
    the run from the checkpoint taken at ``resume_from``.
    """
    torch.manual_seed(spec.seed)
    x, y, xv, yv = make_data(spec)
    parts = build_parts(spec)
    config = {"scenario": spec.name, "family": spec.family, "arch": spec.arch, "optimizer": spec.optim, "lr": spec.lr,
              "batch_size": spec.batch_size}
    resume_at = spec.resume_at if spec.resume_at is not None else spec.steps
    checkpoint_step = None if spec.resume_at is None else spec.resume_from if spec.resume_from is not None else resume_at
    checkpoint: dict[str, Any] = {}
    try:
        with tuidiag.Recorder(run_dir, config=config, name=spec.name) as rec:
            _session(spec, rec, parts, loader(spec, x, y), (xv, yv), range(resume_at), checkpoint, checkpoint_step)
        if checkpoint_step is not None and resume_at < spec.steps:
            _resume(parts, checkpoint, spec)
            changed = {**config, "lr": spec.lr * spec.fault.get("resume_lr", 1.0), "resumed_from": checkpoint_step}
            with tuidiag.Recorder(run_dir, config=changed, name=spec.name, resume="allow", start_step=checkpoint_step) as rec:
                batches = loader(spec, x, y, skip=checkpoint_step * spec.accumulate)
                _session(spec, rec, parts, batches, (xv, yv), range(checkpoint_step, spec.steps), {}, None)
    except FloatingPointError:
        pass
    return run_dir


def _resume(parts: Parts, checkpoint: dict[str, Any], spec: Spec) -> None:
    """Load the checkpoint into the session's parts, as a restarted script would (with the resume faults)."""
    parts.model.load_state_dict(checkpoint["model"])
    if not spec.fault.get("resume_fresh_optimizer"):
        parts.optimizer.load_state_dict(checkpoint["optimizer"])
    else:
        parts.optimizer = type(parts.optimizer)(parts.model.parameters(), **{k: v for k, v in parts.optimizer.defaults.items()
                                                                             if k in ("lr", "momentum", "weight_decay")})
        parts.schedule = make_schedule(spec, parts.optimizer)
    if parts.schedule is not None and "schedule" in checkpoint and not spec.fault.get("resume_fresh_optimizer"):
        parts.schedule.load_state_dict(checkpoint["schedule"])
    for group in parts.optimizer.param_groups:
        group["lr"] *= spec.fault.get("resume_lr", 1.0)


def _save(parts: Parts, checkpoint: dict[str, Any]) -> None:
    checkpoint["model"] = copy.deepcopy(parts.model.state_dict())
    checkpoint["optimizer"] = copy.deepcopy(parts.optimizer.state_dict())
    if parts.schedule is not None:
        checkpoint["schedule"] = copy.deepcopy(parts.schedule.state_dict())


def _loss(spec: Spec, criterion: nn.Module, out: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
    """The training loss, with the loss faults planted."""
    if spec.fault.get("mse_flat"):
        return criterion(out[:, :1], yb.float())
    return criterion(torch.softmax(out, dim=1) if spec.fault.get("softmax_output") else out, yb)


def _session(spec: Spec, rec: tuidiag.Recorder, parts: Parts, batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
             val: tuple[torch.Tensor, torch.Tensor], steps: range, checkpoint: dict[str, Any],
             checkpoint_step: int | None) -> None:
    """Train over ``steps`` in one recorder session (saving ``checkpoint`` when ``checkpoint_step`` comes)."""
    model, optimizer = parts.model, parts.optimizer
    rec.watch(model, optimizer, max_grad_norm=spec.max_grad_norm, loss_fn=parts.criterion)
    eval_bug = bool(spec.fault.get("eval_mode_bug"))
    model.train()
    for step in steps:
        if step == checkpoint_step:
            _save(parts, checkpoint)
        for micro in range(spec.accumulate):
            xb, yb = next(batches)
            rec.batch(xb, yb)
            if not eval_bug:
                model.train()
            loss = _loss(spec, parts.criterion, model(xb), yb)
            if micro == 0 and not spec.fault.get("no_zero_grad"):
                optimizer.zero_grad()
            if loss.requires_grad:  # an all-frozen model has no gradient to compute (generic loops guard this)
                (loss / spec.accumulate if spec.accumulate > 1 else loss).backward()
        rec.step(loss)
        if spec.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(model.parameters(), spec.max_grad_norm)
        optimizer.step()
        if parts.schedule is not None:
            parts.schedule.step()
        if step % spec.val_every == 0 or step == spec.steps - 1:
            rec.log(evaluate(parts.evaluated, val[0], val[1], restore=not eval_bug, criterion=parts.criterion))
        if not torch.isfinite(loss):
            raise FloatingPointError(f"loss is {loss.item()} at step {step}")
    if checkpoint_step is not None and checkpoint_step >= steps.stop:
        _save(parts, checkpoint)

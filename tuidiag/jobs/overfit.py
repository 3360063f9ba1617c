"""Overfit one batch: can the model, loss and training step memorise a single batch? (A check to pass before any long training.)

A healthy model, loss and training step drive the loss on a single batch close
to zero: to the set target (0.01), or 100 times below the starting loss when that
is lower (a trained model starts near the target, and a pass in a step or two
would say nothing). If they cannot, no amount of training will help: look for a wrong loss,
a disconnected graph (detached tensors, frozen layers) or a broken
initialisation. By default a fresh Adam (lr 1e-3) trains, to rule out the
run's LR; ``optimizer="run"`` uses the run's own optimizer instead. The model
and the run's optimizer are restored exactly afterwards.

Before training, :func:`tuidiag.jobs.trainability.training_blocker` checks that
one step can update anything at all: with every parameter frozen, a detached
output or a loss without ``grad_fn`` the test fails at once, with that cause as
its advice (``reason`` "not trainable", ``blocked`` its code), and trains nothing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

from tuidiag.job_kinds.configs import MIN_DROP, OverfitConfig, overfit_target
from tuidiag.jobs.job_handle import JobError, JobHandle
from tuidiag.jobs.tensors import BatchSource, first_lr, set_lr, to_device
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.isolation import isolated
from tuidiag.jobs.trainability import Blocker, frozen_parameters, optimizer_params, training_blocker

def _optimizer(parts: Parts, cfg: OverfitConfig) -> torch.optim.Optimizer:
    """A fresh Adam over the trainable parameters, or the run's optimizer (its LR overridden if given)."""
    if cfg.optimizer == "adam":
        return torch.optim.Adam([p for p in parts.model.parameters() if p.requires_grad], lr=cfg.lr or 1e-3)
    if cfg.lr is not None:
        set_lr(parts.optimizer, cfg.lr)
    return parts.optimizer


def _blocker(parts: Parts, batch: tuple[Any, Any], cfg: OverfitConfig) -> Blocker | None:
    """What stops the test's optimizer from training the model on ``batch`` (None: nothing)."""
    if cfg.optimizer == "adam":
        return training_blocker(parts, batch, list(parts.model.parameters()), "of the model")
    return training_blocker(parts, batch, optimizer_params(parts.optimizer), "in the run's optimizer")


def train_on_batch(parts: Parts, batch: tuple[Any, Any], cfg: OverfitConfig, control: JobHandle) -> tuple[list[float], str]:
    """Train on ``batch`` until the loss reaches the target (:func:`overfit_target` of the first loss), turns
    non-finite, or the steps run out."""
    x, y = batch
    optimizer = _optimizer(parts, cfg)
    parts.model.train()
    losses: list[float] = []
    target = cfg.target
    for step in range(cfg.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = parts.loss(x, y)
        value = float(loss.detach())
        losses.append(value)
        if not math.isfinite(value):
            return losses, "non-finite loss"
        if step == 0:
            target = overfit_target(cfg.target, value)
        if value <= target:
            return losses, "target reached"
        loss.backward()
        optimizer.step()
        control.tick(step + 1, cfg.steps)
    return losses, "steps exhausted"


def overfit_batch(
    parts: Parts, device: torch.device, cfg: OverfitConfig | None = None, control: JobHandle | None = None
) -> dict[str, Any]:
    """Run the test on the first batch of ``parts.batches``; the model must already be on ``device``."""
    cfg = cfg or OverfitConfig()
    cfg.check()
    batch = BatchSource(parts.batches).next()
    if batch is None:
        raise JobError("the factory's batches are empty")
    batch = to_device(batch, device)
    with isolated(parts.model, parts.optimizer):
        used_lr = cfg.lr if cfg.optimizer == "adam" or cfg.lr is not None else first_lr(parts.optimizer)
        blocked = _blocker(parts, batch, cfg)
        losses, reason = train_on_batch(parts, batch, cfg, control or JobHandle()) if blocked is None else ([], NOT_TRAINABLE)
    result = report(losses, reason, used_lr, cfg, device, blocked)
    result["frozen_parameters"] = frozen_parameters(parts.model)
    return result


NOT_TRAINABLE = "not trainable"
"""The ``reason`` of a test that did not train: see the result's ``blocked``."""


def report(losses: list[float], reason: str, lr: float | None, cfg: OverfitConfig, device: torch.device,
           blocked: Blocker | None = None) -> dict[str, Any]:
    """The result: pass/fail, steps taken (optimizer updates), the loss curve and advice on failure."""
    passed = reason == "target reached"
    initial, final = (losses[0], losses[-1]) if losses else (None, None)
    finite = initial is not None and final is not None and math.isfinite(initial) and math.isfinite(final)
    target = overfit_target(cfg.target, initial) if initial is not None else cfg.target
    informative = not (initial is not None and math.isfinite(initial) and initial <= target)
    return {
        "passed": passed,
        "target": target,
        "min_drop": MIN_DROP,
        "informative": informative,
        "uninformative_reason": None if informative else
        f"the loss started at {initial:.4g}, already at or below the target {target:.4g}: nothing was trained",
        "reason": reason,
        "steps": max(0, len(losses) - (0 if reason == "steps exhausted" else 1)),
        "initial_loss": initial,
        "final_loss": final,
        "reduction": final / initial if finite and initial else None,
        "losses": losses,
        "optimizer": cfg.optimizer,
        "lr": lr,
        "config": asdict(cfg),
        "advice": None if passed else (blocked.explanation if blocked else _advice(cfg, lr, len(losses))),
        "blocked": blocked.to_json() if blocked else None,
        "device": str(device),
    }


ADVICE = ("the model could not memorise one batch: check the loss function and its inputs (logits vs probabilities), "
          "tensors detached from the graph or frozen layers (requires_grad), the output shape against the targets, "
          "and the initialisation; no amount of training fixes these")


def _advice(cfg: OverfitConfig, lr: float | None, tried: int) -> str:
    """What a failed test means: with the default optimizer, a fault in the model or the loss (:data:`ADVICE`); with
    the run's own optimizer (``optimizer="run"``), possibly only its settings, which the default test tells apart."""
    if cfg.optimizer != "run":
        return ADVICE
    at = f" at LR {lr:.3g}" if lr is not None and math.isfinite(lr) else ""
    return (f"the run's own optimizer{at} could not memorise one batch in {tried} steps: that can be its settings (an LR "
            "far too low or too high) as well as the model; run the test with its default optimizer (Adam at 1e-3: "
            "leave out --optimizer run) to test the model and the loss alone")

"""Sharpness: how much does the loss rise when the weights are nudged? (Sharp minima tend to generalize worse.)

Each sample adds to every trainable parameter a random direction scaled to
``epsilon`` times that parameter's norm, measures the mean loss over a few fixed
batches (eval mode, no gradients), and puts the weights back. The result is the
ratio ``(mean perturbed loss - base loss) / |base loss|``: above ``threshold``
(0.1) the minimum is sharp, else flat. Noise comes from a private generator
(``seed``), so the result is reproducible and the global RNG is not touched;
weights, optimizer and RNG are restored exactly afterwards in any case.

The result says which weights were measured (``weights``: the factory's model,
a checkpoint loaded into it, or the live training's at a step; :mod:`tuidiag.jobs.weights`):
the same model is flat at its initial weights and sharp after training, or the reverse.

A model that cannot train (every parameter frozen, a detached output, a loss
without ``grad_fn``: :mod:`tuidiag.jobs.trainability`) found no minimum whose
sharpness would mean anything: the verdict is then ``untrainable``, with the cause.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from tuidiag.job_kinds.configs import SharpnessConfig
from tuidiag.jobs.job_handle import JobError, JobHandle
from tuidiag.jobs.tensors import BatchSource, to_device
from tuidiag.jobs.factory import Parts
from tuidiag.jobs.isolation import isolated
from tuidiag.jobs.trainability import Blocker, training_blocker
from tuidiag.jobs.weights import given_weights


@torch.no_grad()
def mean_loss(parts: Parts, batches: list[tuple[Any, Any]]) -> float:
    """The mean loss over ``batches`` (no gradients)."""
    return float(np.mean([float(parts.loss(x, y)) for x, y in batches]))


@torch.no_grad()
def perturb(params: list[torch.nn.Parameter], originals: list[torch.Tensor], epsilon: float, gen: torch.Generator) -> None:
    """Set each parameter to its original plus a random direction of norm ``epsilon * ||original||``."""
    for p, original in zip(params, originals):
        noise = torch.randn(original.shape, generator=gen, dtype=torch.float32).to(p.device, p.dtype)
        scale = epsilon * float(original.float().norm()) / (float(noise.float().norm()) + 1e-12)
        p.copy_(original + noise * scale)


@torch.no_grad()
def put_back(params: list[torch.nn.Parameter], originals: list[torch.Tensor]) -> None:
    """Copy the original values back into the parameters."""
    for p, original in zip(params, originals):
        p.copy_(original)


def measure(parts: Parts, batches: list[tuple[Any, Any]], cfg: SharpnessConfig, control: JobHandle) -> tuple[float, list[float]]:
    """Base loss and the loss of each perturbed sample (weights put back after each)."""
    parts.model.eval()
    base = mean_loss(parts, batches)
    params = [p for p in parts.model.parameters() if p.requires_grad]
    originals = [p.detach().clone() for p in params]
    gen = torch.Generator().manual_seed(cfg.seed)
    losses = []
    try:
        for i in range(cfg.samples):
            perturb(params, originals, cfg.epsilon, gen)
            losses.append(mean_loss(parts, batches))
            put_back(params, originals)
            control.tick(i + 1, cfg.samples)
    finally:
        put_back(params, originals)
    return base, losses


def sharpness(
    parts: Parts, device: torch.device, cfg: SharpnessConfig | None = None, control: JobHandle | None = None
) -> dict[str, Any]:
    """Run the test on the first ``cfg.batches`` batches; the model must already be on ``device``."""
    cfg = cfg or SharpnessConfig()
    cfg.check()
    batches = [to_device(b, device) for b in BatchSource(parts.batches).take(cfg.batches)]
    if not batches:
        raise JobError("the factory's batches are empty")
    with isolated(parts.model, parts.optimizer):
        blocked = training_blocker(parts, batches[0], list(parts.model.parameters()))
        if blocked is not None:
            return {**untrainable(blocked, len(batches), cfg, device), "weights": parts.weights or given_weights()}
        base, losses = measure(parts, batches, cfg, control or JobHandle())
    if not math.isfinite(base):
        raise JobError(f"the base loss is not finite ({base}) on {(parts.weights or given_weights())['text']}; "
                       "run tuidiag nan-hunt first")
    return {**report(base, losses, len(batches), cfg, device), "weights": parts.weights or given_weights()}


def untrainable(blocked: Blocker, n_batches: int, cfg: SharpnessConfig, device: torch.device) -> dict[str, Any]:
    """The result when the model cannot train: no measurement, the cause instead."""
    return {
        "verdict": "untrainable",
        "summary": f"not measured: the model cannot train ({blocked.explanation})",
        "blocked": blocked.to_json(),
        "batches_used": n_batches,
        "config": asdict(cfg),
        "device": str(device),
    }


def report(base: float, losses: list[float], n_batches: int, cfg: SharpnessConfig, device: torch.device) -> dict[str, Any]:
    """The result: flat or sharp, the ratio and the losses behind it."""
    perturbed = float(np.mean(losses))
    ratio = (perturbed - base) / (abs(base) + 1e-8)
    return {
        "verdict": "sharp" if ratio > cfg.threshold else "flat",
        "ratio": ratio,
        "base_loss": base,
        "mean_perturbed_loss": perturbed,
        "max_perturbed_loss": float(np.max(losses)),
        "perturbed_losses": losses,
        "batches_used": n_batches,
        "config": asdict(cfg),
        "device": str(device),
    }

"""The demo runs' factory: ``tuidiag.demo.factory:<scenario>`` rebuilds one demo training for jobs.

Every run ``tuidiag demo`` writes names one of these functions (``run.json``'s
``factory``; the contract is in :mod:`tuidiag.jobs`), so the LR finder, the NaN
hunt, overfit-one-batch and sharpness run on the demo runs straight after
install. Each returns the scenario's model with the initial weights its recorded
training started from, its optimizer, the cross-entropy loss and one epoch of its
training batches (the batches the training drew first, in order). The global torch
RNG is left as it was: the seeding that reproduces the weights happens in a fork.
"""

from __future__ import annotations

from typing import Any

import torch

from tuidiag.demo.data import batches
from tuidiag.demo.scenarios import Scenario, build, by_name


def rebuild(scenario: Scenario, seed: int = 0) -> dict[str, Any]:
    """The factory's answer for ``scenario``: model, optimizer, loss_fn and one epoch of batches."""
    with torch.random.fork_rng(devices=[]):
        built = build(scenario, seed)
    epoch = max(1, len(built.x_train) // scenario.batch_size)
    loader = batches(built.x_train, built.y_train, scenario.batch_size, seed=seed)
    return {"model": built.model, "optimizer": built.optimizer, "loss_fn": built.criterion,
            "batches": [next(loader) for _ in range(epoch)]}


def healthy() -> dict[str, Any]:
    """The healthy run: MLP with dropout, AdamW 1e-3."""
    return rebuild(by_name("healthy"))


def lr_too_high() -> dict[str, Any]:
    """SGD at lr=0.3 with momentum 0.9, no clipping (diverges to NaN; its run ships a capture)."""
    return rebuild(by_name("lr-too-high"))


def lr_too_low() -> dict[str, Any]:
    """SGD at lr=1e-5 (plateau)."""
    return rebuild(by_name("lr-too-low"))


def overfitting() -> dict[str, Any]:
    """A wide MLP, Adam 2e-3, on 256 noisy samples."""
    return rebuild(by_name("overfitting"))


def vanishing_gradients() -> dict[str, Any]:
    """Twelve sigmoid layers, SGD 0.05."""
    return rebuild(by_name("vanishing-gradients"))

"""Synthetic, seeded datasets for the demo trainings (nothing is downloaded)."""

from __future__ import annotations

from collections.abc import Iterator

import torch


def blobs(n: int, dim: int = 20, classes: int = 4, noise: float = 1.0, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` points around ``classes`` random centres, with a non-linear twist so an MLP has work to do."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dim, generator=gen) * 0.6
    labels = torch.randint(0, classes, (n,), generator=gen)
    x = centres[labels] + noise * torch.randn(n, dim, generator=gen)
    x = x + 0.5 * torch.sin(2.0 * x.roll(1, dims=1))
    return x, labels


def noisy_labels(y: torch.Tensor, share: float, classes: int, seed: int = 1) -> torch.Tensor:
    """Replace ``share`` of the labels with random ones (makes memorisation visible as overfitting)."""
    gen = torch.Generator().manual_seed(seed)
    flip = torch.rand(len(y), generator=gen) < share
    return torch.where(flip, torch.randint(0, classes, (len(y),), generator=gen), y)


def batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless shuffled mini-batches."""
    gen = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(x), generator=gen)
        for start in range(0, len(x) - batch_size + 1, batch_size):
            idx = order[start : start + batch_size]
            yield x[idx], y[idx]

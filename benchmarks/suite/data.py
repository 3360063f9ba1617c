"""Seeded synthetic datasets for the suite: vectors, images, sequences, tokens (nothing downloaded)."""

from __future__ import annotations

import torch

from tuidiag.demo.data import blobs

CLASSES = 4
VEC_DIM = 20
IMG_SIZE = 8
SEQ_LEN, SEQ_DIM = 12, 4
TOK_LEN, VOCAB = 12, 12


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def vectors(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy blobs in 20 dimensions, 4 classes (an MLP has a little work to do)."""
    return blobs(n, VEC_DIM, CLASSES, seed=seed)


def xor(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Class = sign pattern of two coordinates (a parity task no linear model can fit)."""
    gen = _gen(seed)
    x = torch.randn(n, VEC_DIM, generator=gen)
    y = (x[:, 0] > 0).long() * 2 + ((x[:, 0] * x[:, 1] * x[:, 2]) > 0).long()
    return x, y


def images(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """1x8x8 images: a bright bar whose position/orientation is the class, plus noise."""
    gen = _gen(seed)
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x = 0.8 * torch.randn(n, 1, IMG_SIZE, IMG_SIZE, generator=gen)
    offset = torch.randint(1, IMG_SIZE - 1, (n,), generator=gen)
    for k in range(CLASSES):
        idx = torch.nonzero(y == k).flatten()
        rows = offset[idx]
        if k % 2 == 0:
            x[idx, 0, rows, : IMG_SIZE // 2 + 2 * (k // 2)] += 1.5
        else:
            x[idx, 0, :, rows] += 1.5 if k == 1 else -1.5
    return x, y


def sequences(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of 4 channels; the class is the channel with the largest sum over time."""
    gen = _gen(seed)
    x = torch.randn(n, SEQ_LEN, SEQ_DIM, generator=gen)
    y = torch.randint(0, CLASSES, (n,), generator=gen)
    x[torch.arange(n), :, y] += 0.5
    return x, x.sum(1).argmax(1)


def tokens(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token sequences; the class is the most frequent of tokens 0-3 (ties: the lowest)."""
    gen = _gen(seed)
    x = torch.randint(0, VOCAB, (n, TOK_LEN), generator=gen)
    counts = torch.stack([(x == k).sum(1) for k in range(CLASSES)], 1).float()
    return x, (counts + 0.1 * torch.arange(CLASSES, 0, -1)).argmax(1)


TASKS = {"vectors": vectors, "xor": xor, "images": images, "sequences": sequences, "tokens": tokens}


def make(task: str, train_size: int, val_size: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Train and validation splits of ``task``: (x_train, y_train, x_val, y_val)."""
    x, y = TASKS[task](train_size + val_size, seed)
    return x[:train_size], y[:train_size], x[train_size:], y[train_size:]


def noisy_labels(y: torch.Tensor, share: float, seed: int = 1) -> torch.Tensor:
    """Replace ``share`` of the labels with random ones."""
    gen = _gen(seed)
    flip = torch.rand(len(y), generator=gen) < share
    return torch.where(flip, torch.randint(0, CLASSES, (len(y),), generator=gen), y)


def imbalance(x: torch.Tensor, y: torch.Tensor, majority: float, seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Resample so class 0 is ``majority`` of the samples (the rest keep their proportions)."""
    gen = _gen(seed)
    zero, rest = torch.nonzero(y == 0).flatten(), torch.nonzero(y != 0).flatten()
    n_rest = max(1, int(len(zero) * (1 - majority) / majority))
    keep_rest = rest[torch.randperm(len(rest), generator=gen)[:n_rest]]
    idx = torch.cat([zero, keep_rest])
    idx = idx[torch.randperm(len(idx), generator=gen)]
    return x[idx], y[idx]

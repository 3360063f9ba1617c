"""Input health of a batch, computed on its device: mean, std, abs-max, non-finite count.

Integer class labels (one per sample) also get the share of the most frequent
class in the batch, so class imbalance shows up without a synchronisation.
"""

from __future__ import annotations

from typing import Any

import torch

from tuidiag.format import INPUT_PREFIX, TARGET_PREFIX


def tensor_stats(prefix: str, x: torch.Tensor) -> tuple[list[str], list[torch.Tensor]]:
    """Device tensors for mean, std, abs-max and the count of non-finite elements."""
    if x.numel() == 0:
        return [], []
    with torch.no_grad():
        x = x.detach()
        if not x.is_floating_point():
            low, high = torch.aminmax(x)
            return [prefix + "min", prefix + "max"], [low, high]
        flat = x.float()
        std, mean = torch.std_mean(flat) if flat.numel() > 1 else (torch.zeros((), device=x.device), flat.mean())
        nonfinite = flat.numel() - torch.isfinite(flat).sum()
        return (
            [prefix + "mean", prefix + "std", prefix + "abs_max", prefix + "nonfinite"],
            [mean, std, flat.abs().amax(), nonfinite],
        )


def input_parts(x: Any, y: Any) -> tuple[list[str], list[torch.Tensor]]:
    """Names and device tensors describing an input batch and its targets."""
    names: list[str] = []
    values: list[torch.Tensor] = []
    for prefix, tensor in ((INPUT_PREFIX, x), (TARGET_PREFIX, y)):
        if isinstance(tensor, torch.Tensor):
            n, v = tensor_stats(prefix, tensor)
            names += n
            values += v
    if isinstance(y, torch.Tensor) and not y.is_floating_point() and y.dim() <= 1 and y.numel() > 0:
        names.append(TARGET_PREFIX + "majority_share")
        values.append(majority_share(y))
    return names, values


def majority_share(y: torch.Tensor) -> torch.Tensor:
    """Share of the most frequent label, on the device; ``bincount`` would synchronise."""
    flat = y.detach().reshape(-1)
    sorted_labels, _ = torch.sort(flat)
    change = torch.ones_like(sorted_labels, dtype=torch.bool)
    change[1:] = sorted_labels[1:] != sorted_labels[:-1]
    run_id = torch.cumsum(change.long(), 0) - 1
    run_length = torch.zeros_like(flat).scatter_add_(0, run_id, torch.ones_like(flat))
    return run_length.max().float() / flat.numel()

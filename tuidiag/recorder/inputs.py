"""Input health of a batch, computed on its device: mean, std, abs-max, non-finite count.

Integer class labels (one per sample) also get the share of the most frequent
class in the batch and that class itself, so class imbalance (one class always
first) and batches ordered by class (the first class changing in long runs) show
up without a synchronisation.
"""

from __future__ import annotations

from typing import Any

import torch

from tuidiag.format import INPUT_PREFIX, TARGET_MAJORITY_CLASS, TARGET_PREFIX


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
        share, label = majority(y)
        names += [TARGET_PREFIX + "majority_share", TARGET_MAJORITY_CLASS]
        values += [share, label]
    return names, values


def majority(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Share of the most frequent label and that label (the lowest of a tie), on the device; ``bincount`` would synchronise."""
    flat = y.detach().reshape(-1)
    sorted_labels, _ = torch.sort(flat)
    change = torch.ones_like(sorted_labels, dtype=torch.bool)
    change[1:] = sorted_labels[1:] != sorted_labels[:-1]
    run_id = torch.cumsum(change.long(), 0) - 1
    run_length = torch.zeros_like(run_id).scatter_add_(0, run_id, torch.ones_like(run_id))
    longest = run_length.argmax().reshape(1)  # the first of the longest runs: the lowest label among ties
    label = torch.zeros_like(flat).scatter_(0, run_id, sorted_labels).gather(0, longest)[0]  # gather: a tensor index would sync
    return run_length.gather(0, longest)[0].float() / flat.numel(), label

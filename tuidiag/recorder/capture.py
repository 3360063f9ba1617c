"""Saving the failing batch and the model/optimizer state of the first non-finite step.

The capture is a plain ``torch.save`` of tensors and builtin containers only, so
the NaN hunt can load it with ``torch.load(weights_only=True)``. Its size is
bounded: a capture that would exceed ``max_bytes`` is not written, and the event
says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from tuidiag.format import CAPTURES_DIR
from tuidiag.store.safe_write import write_atomic


def to_cpu(value: Any) -> Any:
    """Detach and copy tensors (nested in lists, tuples and dicts) to the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_cpu(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return repr(value)


def tensor_bytes(value: Any) -> int:
    """Total bytes of the tensors nested in ``value``."""
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    return 0


def save_capture(
    run_dir: Path,
    step: int,
    rank: int,
    model: nn.Module | None,
    optimizer: torch.optim.Optimizer | None,
    batch: Any,
    pre_step: bool,
    max_bytes: int,
) -> tuple[Path | None, str]:
    """Write ``captures/nan-r<rank>-step<step>.pt``; return its path (or None) and a note."""
    parts = {
        "model_state": model.state_dict() if model is not None else {},
        "optimizer_state": optimizer.state_dict() if optimizer is not None else {},
        "batch": batch,
    }
    size = tensor_bytes(parts)
    if size > max_bytes:
        return None, f"capture skipped: {size / 2**20:.0f} MiB exceeds the {max_bytes / 2**20:.0f} MiB limit"
    payload = {key: to_cpu(value) for key, value in parts.items()}
    payload.update(
        step=step,
        rank=rank,
        state_is_pre_step=pre_step,
        cpu_rng_state=torch.get_rng_state(),
        cuda_rng_states=[s for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    )
    directory = run_dir / CAPTURES_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = write_atomic(directory / f"nan-r{rank}-step{step}.pt", lambda handle: torch.save(payload, handle), root=run_dir)
    state = "state from before the optimizer step" if pre_step else "state after the failing step (detected asynchronously)"
    return path, f"captured batch and {state} ({size / 2**20:.1f} MiB)"

"""Torch helpers every job uses: device choice, moving and cycling batches, tensor statistics, LR access."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from tuidiag.jobs.job_handle import JobError


def choose_device(requested: str | None = None) -> torch.device:
    """The device to run on: ``requested``, else CUDA when available, else the CPU."""
    if requested is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(requested)
    except (RuntimeError, ValueError) as exc:
        raise JobError(f"unknown device {requested!r} ({exc})") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise JobError(f"device {requested!r} asked for, but CUDA is not available here; use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise JobError(f"device {requested!r} does not exist ({torch.cuda.device_count()} CUDA devices)")
    return device


def to_device(value: Any, device: torch.device) -> Any:
    """``value`` with the tensors nested in lists, tuples and dicts moved to ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, list):
        return [to_device(v, device) for v in value]
    if isinstance(value, tuple):
        return tuple(to_device(v, device) for v in value)
    return value


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor nested in ``value`` (lists, tuples, dicts)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from iter_tensors(v)


def float_tensors(value: Any) -> list[torch.Tensor]:
    """The floating-point (or complex) tensors nested in ``value``."""
    return [t for t in iter_tensors(value) if t.is_floating_point() or t.is_complex()]


def all_finite(value: Any) -> bool:
    """True when no floating-point tensor nested in ``value`` holds a NaN or an infinity."""
    return all(bool(torch.isfinite(t).all()) for t in float_tensors(value))


def as_xy(batch: Any) -> tuple[Any, Any]:
    """Split a batch into ``(x, y)``; a batch must be a pair."""
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    raise JobError(f"a batch must be a pair (x, y), got {type(batch).__name__}")


class BatchSource:
    """Batches from a factory's iterable: restarted when exhausted, unless it is a one-shot iterator."""

    def __init__(self, batches: Iterable[Any] | None) -> None:
        if batches is None:
            raise JobError("the factory returned no 'batches'; this job needs data")
        self._batches = batches
        self._restartable = iter(batches) is not batches
        self._it: Iterator[Any] = iter(batches)
        self._first_pass: list[Any] | None = []
        self._drawn = 0

    def next(self) -> tuple[Any, Any] | None:
        """The next ``(x, y)``, or None when a one-shot iterator (or an empty iterable) ran out."""
        try:
            return self._seen(as_xy(next(self._it)))
        except StopIteration:
            if not self._restartable:
                return None
        self._it = iter(self._batches)
        self._first_pass = None  # from here on the batches repeat
        try:
            return as_xy(next(self._it))
        except StopIteration:
            return None

    def _seen(self, batch: tuple[Any, Any]) -> tuple[Any, Any]:
        if self._first_pass is not None:
            self._drawn += 1
            if isinstance(self._batches, (list, tuple)):  # held by the list: identities stay unique
                self._first_pass.append(_identity(batch))
        return batch

    @property
    def distinct(self) -> int:
        """How many distinct batches were drawn: the first pass through the data, with the
        same tensors listed twice (a training that reuses its batch tensors) counted once."""
        if not isinstance(self._batches, (list, tuple)):
            return self._drawn
        if self._first_pass is not None:
            return len(set(self._first_pass))
        return len({_identity(as_xy(b)) for b in self._batches})

    def take(self, n: int) -> list[tuple[Any, Any]]:
        """Up to ``n`` batches (fewer when the data runs out)."""
        out = []
        for _ in range(n):
            batch = self.next()
            if batch is None:
                break
            out.append(batch)
        return out


def _identity(batch: tuple[Any, Any]) -> tuple[int, ...]:
    """Which objects a batch is made of: its tensors, else its two parts."""
    return tuple(id(t) for t in iter_tensors(batch)) or tuple(id(v) for v in batch)


def tensor_stats(t: torch.Tensor) -> dict[str, Any]:
    """Shape, dtype, NaN/inf counts and min/max/mean/std/abs-max over the finite elements."""
    stats: dict[str, Any] = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
    if not (t.is_floating_point() or t.is_complex()):
        if t.numel():
            stats.update(min=float(t.min()), max=float(t.max()))
        return stats
    x = t.detach().float() if not t.is_complex() else t.detach().abs().float()
    finite = torch.isfinite(x)
    stats.update(nan=int(torch.isnan(x).sum()), posinf=int((x == math.inf).sum()), neginf=int((x == -math.inf).sum()))
    values = x[finite]
    if values.numel():
        stats.update(
            min=float(values.min()), max=float(values.max()), mean=float(values.mean()),
            std=float(values.std()) if values.numel() > 1 else 0.0, abs_max=float(values.abs().max()),
        )
    return stats


def named_stats(value: Any, prefix: str) -> dict[str, dict[str, Any]]:
    """:func:`tensor_stats` of each tensor nested in ``value``, named ``prefix[i]``."""
    tensors = list(iter_tensors(value))
    if len(tensors) == 1:
        return {prefix: tensor_stats(tensors[0])}
    return {f"{prefix}[{i}]": tensor_stats(t) for i, t in enumerate(tensors)}


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group (in place when it is a tensor)."""
    for group in optimizer.param_groups:
        if isinstance(group.get("lr"), torch.Tensor):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


def first_lr(optimizer: torch.optim.Optimizer) -> float | None:
    """The learning rate of the first parameter group, as a float."""
    groups = optimizer.param_groups
    return float(groups[0]["lr"]) if groups and "lr" in groups[0] else None


"""Exact restoration of model, optimizer and random generators around a job (like Lightning's isolate_rng).

:func:`isolated` snapshots, on the CPU, every parameter and buffer (non-persistent
ones included), every ``.grad``, each module's train/eval flag, the optimizer's
per-parameter state and group hyperparameters, and the torch, CUDA, numpy and
Python random generators; on exit, also when the job raised, it writes them
back **in place** (same tensor objects, bit-identical values), so a training
that continues after a job behaves as if the job never ran.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn


@dataclass
class RngState:
    """The states of the torch CPU, CUDA, numpy and Python generators."""

    torch_cpu: torch.Tensor
    cuda: list[torch.Tensor] | None
    numpy: Any
    python: Any


def collect_rng(include_cuda: bool) -> RngState:
    """Read every generator's state (CUDA's only when ``include_cuda``)."""
    cuda = torch.cuda.get_rng_state_all() if include_cuda else None
    return RngState(torch.get_rng_state(), cuda, np.random.get_state(), random.getstate())


def restore_rng(state: RngState) -> None:
    """Set every generator back to ``state``."""
    torch.set_rng_state(state.torch_cpu)
    if state.cuda is not None:
        torch.cuda.set_rng_state_all(state.cuda)
    np.random.set_state(state.numpy)
    random.setstate(state.python)


def cuda_rng_in_use(model: nn.Module) -> bool:
    """Whether CUDA's generators need saving: CUDA is initialised or the model lives there."""
    if not torch.cuda.is_available():
        return False
    on_cuda = any(t.is_cuda for t in model.parameters())
    return on_cuda or torch.cuda.is_initialized()


@dataclass(frozen=True)
class Saved:
    """A CPU copy of a tensor and the device it came from."""

    value: torch.Tensor
    device: torch.device

    @classmethod
    def of(cls, t: torch.Tensor) -> Saved:
        """Copy ``t`` to the CPU."""
        return cls(t.detach().to("cpu", copy=True), t.device)

    def put_back(self, current: Any) -> torch.Tensor:
        """Copy the saved value into ``current`` in place when shape and dtype agree, else a new tensor."""
        value = self.value
        if isinstance(current, torch.Tensor) and current.shape == value.shape and current.dtype == value.dtype:
            with torch.no_grad():
                current.copy_(value)
            return current
        return value.to(self.device, copy=True)


@dataclass
class OptimizerSnapshot:
    """Per-parameter optimizer state and each group's hyperparameters."""

    state: list[tuple[torch.Tensor, dict[str, Any]]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def take(cls, optimizer: torch.optim.Optimizer) -> OptimizerSnapshot:
        """Copy ``optimizer``'s state (tensors to the CPU) and its groups' settings."""
        state = []
        for param, entry in optimizer.state.items():
            saved = {k: Saved.of(v) if isinstance(v, torch.Tensor) else copy.deepcopy(v) for k, v in entry.items()}
            state.append((param, saved))
        groups = [{k: copy.deepcopy(v) for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
        return cls(state, groups)

    def restore(self, optimizer: torch.optim.Optimizer) -> None:
        """Write the state back: drop what the job added, copy saved tensors in place."""
        kept = {id(p) for p, _ in self.state}
        for param in [p for p in optimizer.state if id(p) not in kept]:
            del optimizer.state[param]
        for param, saved in self.state:
            entry = optimizer.state[param]
            for key in [k for k in entry if k not in saved]:
                del entry[key]
            for key, value in saved.items():
                entry[key] = value.put_back(entry.get(key)) if isinstance(value, Saved) else copy.deepcopy(value)
        for group, saved_group in zip(optimizer.param_groups, self.groups):
            for key in [k for k in group if k != "params" and k not in saved_group]:
                del group[key]
            for key, value in saved_group.items():
                current = group.get(key)
                if isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor) and current.shape == value.shape:
                    with torch.no_grad():
                        current.copy_(value)
                else:
                    group[key] = copy.deepcopy(value)


@dataclass
class StateSnapshot:
    """Everything :func:`isolated` restores."""

    tensors: list[tuple[nn.Module, str, Saved]]
    grads: list[tuple[nn.Parameter, Saved | None]]
    training: list[tuple[nn.Module, bool]]
    optimizer: OptimizerSnapshot | None
    rng: RngState


def _module_tensors(model: nn.Module) -> Iterator[tuple[nn.Module, str, torch.Tensor]]:
    """(owner module, attribute name, tensor) of every parameter and buffer, each once."""
    seen: set[int] = set()
    for module in model.modules():
        for name, t in list(module._parameters.items()) + list(module._buffers.items()):
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                yield module, name, t


def take_snapshot(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> StateSnapshot:
    """Copy the state that :func:`restore_snapshot` writes back."""
    tensors = [(m, name, Saved.of(t)) for m, name, t in _module_tensors(model)]
    grads = [(p, Saved.of(p.grad) if p.grad is not None else None) for p in model.parameters()]
    training = [(m, m.training) for m in model.modules()]
    opt = OptimizerSnapshot.take(optimizer) if optimizer is not None else None
    return StateSnapshot(tensors, grads, training, opt, collect_rng(cuda_rng_in_use(model)))


def restore_snapshot(model: nn.Module, optimizer: torch.optim.Optimizer | None, snap: StateSnapshot) -> None:
    """Write ``snap`` back into ``model``, ``optimizer`` and the generators, in place."""
    for module, name, saved in snap.tensors:
        store = module._parameters if name in module._parameters else module._buffers
        current = store.get(name)
        restored = saved.put_back(current)
        if restored is not current:
            store[name] = nn.Parameter(restored, current.requires_grad) if isinstance(current, nn.Parameter) else restored
    for param, grad in snap.grads:
        param.grad = None if grad is None else grad.put_back(param.grad)
    for module, flag in snap.training:
        module.training = flag
    if optimizer is not None and snap.optimizer is not None:
        snap.optimizer.restore(optimizer)
    restore_rng(snap.rng)


@contextmanager
def isolated(model: nn.Module, optimizer: torch.optim.Optimizer | None = None) -> Iterator[StateSnapshot]:
    """Run the body, then restore ``model``, ``optimizer`` and every RNG exactly, even on error."""
    snap = take_snapshot(model, optimizer)
    try:
        yield snap
    finally:
        restore_snapshot(model, optimizer, snap)

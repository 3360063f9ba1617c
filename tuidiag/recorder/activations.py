"""Activation health through forward hooks that exist only on sampled steps.

On a sampled step the probe hooks every ReLU-family and sigmoid/tanh module and
computes, on the device, the share of dead units (a unit is dead when it is zero
for every sample of the batch), the share of saturated units and the output
mean and standard deviation. Between samples no hook is installed, so the probe
costs nothing. Activations applied functionally (``F.relu``) are not seen.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tuidiag.format import ACT_DEAD_PREFIX, ACT_MEAN_PREFIX, ACT_SATURATED_PREFIX, ACT_STD_PREFIX

DEAD_KINDS = (nn.ReLU, nn.ReLU6)
SATURATING_KINDS = (nn.Sigmoid, nn.Tanh, nn.Hardtanh)
SIGMOID_FLAT = 0.0067
"""sigmoid(-5): outputs beyond [0.0067, 0.9933] mean pre-activations beyond +/-5."""
TANH_FLAT = 0.9999
"""tanh(5) ~ 0.99991."""


class ActivationProbe:
    """Arms forward hooks for one forward pass and returns the stats it saw."""

    def __init__(self, model: nn.Module) -> None:
        self._targets = [
            (name or type(module).__name__, module)
            for name, module in model.named_modules()
            if isinstance(module, DEAD_KINDS + SATURATING_KINDS)
        ]
        self._handles: list[Any] = []
        self._names: list[str] = []
        self._values: list[torch.Tensor] = []
        self._calls: dict[str, int] = {}

    @property
    def armed(self) -> bool:
        """True while hooks are installed."""
        return bool(self._handles)

    def arm(self) -> None:
        """Install the hooks for the next forward pass."""
        if self._handles:
            return
        for name, module in self._targets:
            self._handles.append(module.register_forward_hook(self._make_hook(name)))

    def collect(self) -> tuple[list[str], list[torch.Tensor]]:
        """Remove the hooks and return metric names with their 0-d device tensors."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        names, values = self._names, self._values
        self._names, self._values = [], []
        self._calls.clear()
        return names, values

    def _make_hook(self, name: str) -> Any:
        def hook(module: nn.Module, _inputs: Any, output: Any) -> None:
            if not isinstance(output, torch.Tensor) or not output.is_floating_point() or output.numel() == 0:
                return
            calls = self._calls[name] = self._calls.get(name, 0) + 1
            label = name if calls == 1 else f"{name}#{calls}"
            with torch.no_grad():
                self._record(module, label, output.detach())

        return hook

    def _record(self, module: nn.Module, label: str, out: torch.Tensor) -> None:
        out = out.float()
        if isinstance(module, DEAD_KINDS):
            per_unit = out.reshape(out.shape[0], -1) if out.dim() > 1 else out.reshape(1, -1)
            self._add(ACT_DEAD_PREFIX + label, (per_unit <= 0).all(dim=0).float().mean())
        elif isinstance(module, nn.Sigmoid):
            self._add(ACT_SATURATED_PREFIX + label, ((out < SIGMOID_FLAT) | (out > 1 - SIGMOID_FLAT)).float().mean())
        else:
            self._add(ACT_SATURATED_PREFIX + label, (out.abs() > TANH_FLAT).float().mean())
        self._add(ACT_MEAN_PREFIX + label, out.mean())
        self._add(ACT_STD_PREFIX + label, out.std() if out.numel() > 1 else torch.zeros((), device=out.device))

    def _add(self, name: str, value: torch.Tensor) -> None:
        self._names.append(name)
        self._values.append(value)

"""What a probe hands to ``rec.step()``: values for the host and the device path, and events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class ProbeParts:
    """Values a probe collected for one step: host values, device values, and events ``(kind, severity, message, data)``."""

    host_names: list[str] = field(default_factory=list)
    host_values: list[float] = field(default_factory=list)
    dev_names: list[str] = field(default_factory=list)
    dev_values: list[torch.Tensor] = field(default_factory=list)
    events: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)

    def add(self, other: ProbeParts) -> None:
        """Append ``other``'s values and events."""
        self.host_names += other.host_names
        self.host_values += other.host_values
        self.dev_names += other.dev_names
        self.dev_values += other.dev_values
        self.events += other.events

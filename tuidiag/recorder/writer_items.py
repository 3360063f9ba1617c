"""What the training thread hands the writer: a step's metric values by layout, and events.

:class:`MetricBatch` carries one step's values for the names of a :class:`Layout`
(numpy arrays, or an async device copy that ``resolve()`` turns into one);
:class:`EventRow` is one event. The writer (:mod:`tuidiag.recorder.writer`) queues both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class Layout:
    """The metric names of a fixed-shape row vector, plus optional derived rows."""

    names: list[str]
    derive: Callable[[int, np.ndarray], tuple[list[str], list[float]]] | None = None
    check: list[int] = field(default_factory=list)
    """Indices of the loss and total gradient norm, checked for non-finite values."""


@dataclass
class MetricBatch:
    """Values for the metrics of ``layout`` at one step."""

    step: int
    wall_time: float
    layout: Layout
    values: Any
    trained: bool = False
    """Sent by ``rec.step()``: ``step`` is a training step (``log`` rows, whatever their step, are not)."""


NO_ROWS = Layout([])
"""The layout of a training step that recorded no value (no loss, nothing timed yet): it only counts the step."""


@dataclass
class EventRow:
    """One event to write to the events table."""

    step: int
    wall_time: float
    kind: str
    severity: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)

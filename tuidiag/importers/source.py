"""What every importer produces: the scalar series of one run, read from another tool's files."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


class ImportSourceError(Exception):
    """The source cannot be read or holds nothing to import (the CLI exits with status 2)."""


@dataclass
class SourceSeries:
    """One scalar series under its name in the source: steps, values and wall times, in source order."""

    name: str
    steps: np.ndarray
    values: np.ndarray
    wall_times: np.ndarray

    @classmethod
    def from_lists(cls, name: str, steps: list[int], values: list[float], wall_times: list[float]) -> "SourceSeries":
        """Build a series from Python lists (int64 steps, float64 values and times)."""
        steps_array = np.asarray(steps, np.int64)
        return cls(name, steps_array, np.asarray(values, np.float64), np.asarray(wall_times, np.float64))


@dataclass
class SourceRun:
    """One run found in a source.

    ``relative`` is where the run goes below the import's output directory;
    ``source`` describes where it came from (stored in ``run.json``), and ``notes``
    are things the user should know about how it was read (printed by the CLI).
    """

    relative: Path
    series: list[SourceSeries]
    source: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    hparams: dict[str, Any] | None = None
    """``run.json``'s ``hparams`` (``{"params": ..., "metrics": ...}``) when the source holds TensorBoard-style hparams."""

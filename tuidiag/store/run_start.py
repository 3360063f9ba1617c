"""How a run started: its first training losses and the first recorded norm of each weight, read from its oldest
metrics shards only.

A live job compares the model it measures with these: a loss many times the run's first, or weights whose norm grew a
hundredfold since the start, mean the model had diverged, and what a job measures on it says little about the training's
setup (:mod:`tuidiag.jobs.diverged_start`). Reading stops at the first shard that completes the count, so the cost does
not grow with the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tuidiag.format import LOSS, METRICS_DIR, WEIGHT_NORM_PREFIX
from tuidiag.format import METRICS_SCHEMA  # type: ignore[attr-defined]  (built on first use)
from tuidiag.store.decode import ShardError, metric_columns, read_shard
from tuidiag.store.discovery import list_shards

_COLUMNS = ["step", "wall_time", "metric", "value"]
FIRST_COUNT = 10
"""How many finite losses the start is judged on (their median)."""


@dataclass(frozen=True)
class FirstLosses:
    """The median of a run's first finite training losses and the steps they span."""

    median: float
    first_step: int
    last_step: int

    @property
    def where(self) -> str:
        """``steps 0-9`` (``step 0`` for one)."""
        return f"step {self.first_step}" if self.first_step == self.last_step else f"steps {self.first_step}-{self.last_step}"


@dataclass(frozen=True)
class RunStart:
    """How a run started: its first losses (``None`` without any) and each weight's first recorded norm and its step."""

    losses: FirstLosses | None
    norms: dict[str, tuple[int, float]]


def run_start(run_dir: Path, count: int = FIRST_COUNT) -> RunStart:
    """The median of rank 0's first ``count`` finite ``train/loss`` values (fewer when the run has fewer) and each
    weight's first recorded norm (``weight_norm/<name>``, from the oldest shard that has any). Rank 0's readable shards
    are read oldest first, each once, until both are found."""
    steps: list[np.ndarray] = []
    values: list[np.ndarray] = []
    found = 0
    norms: dict[str, tuple[int, float]] = {}
    for shard, path in list_shards(run_dir / METRICS_DIR):
        if found >= count and norms:
            break
        if shard.rank != 0:
            continue
        try:
            codes, names, shard_steps, shard_values, _ = metric_columns(read_shard(path, METRICS_SCHEMA, _COLUMNS))
        except (OSError, ShardError, ValueError):
            continue
        if found < count and LOSS in names:
            keep = (codes == names.index(LOSS)) & np.isfinite(shard_values)
            steps.append(shard_steps[keep])
            values.append(shard_values[keep])
            found += int(keep.sum())
        if not norms:
            norms = _first_norms(codes, names, shard_steps, shard_values)
    if not found:
        return RunStart(None, norms)
    all_steps, all_values = np.concatenate(steps), np.concatenate(values)
    order = np.argsort(all_steps, kind="stable")[:count]
    losses = FirstLosses(float(np.median(all_values[order])), int(all_steps[order].min()), int(all_steps[order].max()))
    return RunStart(losses, norms)


def _first_norms(codes: np.ndarray, names: list[str], steps: np.ndarray, values: np.ndarray) -> dict[str, tuple[int, float]]:
    """Each ``weight_norm/<name>`` metric's first finite value in one shard's columns, and its step, by parameter name."""
    found: dict[str, tuple[int, float]] = {}
    for code, name in enumerate(names):
        if not name.startswith(WEIGHT_NORM_PREFIX):
            continue
        rows = np.flatnonzero((codes == code) & np.isfinite(values))
        if len(rows):
            first = rows[np.argmin(steps[rows])]
            found[name[len(WEIGHT_NORM_PREFIX):]] = (int(steps[first]), float(values[first]))
    return found

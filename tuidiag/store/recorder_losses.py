"""What a run's recorder refused or lost: values rejected at the call, rows lost or dropped, its errors,
and whether the run is degraded (recorded beside a path that could not be used).

The counts come from ``run.json``'s ``stats`` (rank 0, final at close) and from the
``recorder/*`` rows each rank writes at its flushes; as of a step, only the rows up
to that step count. ``tuidiag ls``, ``tuidiag status``, the monitor and
``tuidiag diagnose`` all show a run's losses through :meth:`RecorderLosses.text`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tuidiag.format import RECORDER_DROPPED, RECORDER_ERRORS, RECORDER_LOST, RECORDER_REJECTED

METRIC_OF = {"rejected_values": RECORDER_REJECTED, "lost_rows": RECORDER_LOST, "dropped_rows": RECORDER_DROPPED, "errors": RECORDER_ERRORS}
"""The ``stats`` key of each counter and the metric it is also written as."""
_WORDS = {"rejected_values": ("value rejected", "values rejected"), "lost_rows": ("row lost", "rows lost"),
          "dropped_rows": ("row dropped", "rows dropped"), "errors": ("recorder error", "recorder errors")}


@dataclass(frozen=True)
class RecorderLosses:
    """Cumulative counts of what the recorder did not record as asked."""

    rejected_values: int = 0
    """Values refused at ``log``/``step`` (not numbers, complex, empty, ...) and tensors ``histograms_every`` could not summarise."""
    lost_rows: int = 0
    """Rows accepted but not written: the writer could not convert them."""
    dropped_rows: int = 0
    """Rows dropped because the queue was full, or the disk refused them too long."""
    errors: int = 0
    """The recorder's own errors (caught; training went on)."""
    degraded: tuple[str, ...] = ()
    """Why the run is degraded (``run.json`` ``degraded``): the path asked for could not be used, ..."""

    def __bool__(self) -> bool:
        return bool(self.degraded) or any(getattr(self, key) for key in METRIC_OF)

    def text(self) -> str:
        """``"degraded, 1 value rejected, 207 rows lost"``; empty when nothing was refused or lost
        (why a run is degraded: :attr:`degraded`, listed by ``tuidiag diagnose``)."""
        parts = ["degraded"] if self.degraded else []
        for key in METRIC_OF:
            count = getattr(self, key)
            if count:
                singular, plural = _WORDS[key]
                parts.append(f"{count:,} {singular if count == 1 else plural}")
        return ", ".join(parts)


def manifest_losses(manifest: dict[str, Any]) -> RecorderLosses:
    """The counts rank 0 wrote into ``run.json`` (zeros where absent or malformed)."""
    stats = manifest.get("stats")
    stats = stats if isinstance(stats, dict) else {}
    return RecorderLosses(**{key: _count(stats.get(key)) for key in METRIC_OF}, degraded=degraded_reasons(manifest))


def degraded_reasons(manifest: dict[str, Any]) -> tuple[str, ...]:
    """``run.json`` ``degraded``: why the recorder could not record as asked (strings only, at most 10)."""
    reasons = manifest.get("degraded")
    return tuple(str(r)[:200] for r in reasons[:10] if isinstance(r, str)) if isinstance(reasons, list) else ()


def run_losses(run: Any, at: int | None = None) -> RecorderLosses:
    """The counts of a :class:`~tuidiag.store.Run`, summed over its ranks, as of step ``at``.

    Each rank's count is the last ``recorder/*`` row up to ``at``; with ``at=None``
    rank 0's count is at least what ``run.json`` says (written at close, after the last row).
    """
    stated = manifest_losses(run.manifest) if at is None else RecorderLosses()
    totals: dict[str, Any] = {"degraded": degraded_reasons(run.manifest)}  # true of the run from its start
    for key, metric in METRIC_OF.items():
        per_rank = {rank: _last(run.series(metric, rank), at) for rank in run.ranks}
        per_rank[0] = max(per_rank.get(0, 0), getattr(stated, key))
        totals[key] = sum(per_rank.values())
    return RecorderLosses(**totals)


def _last(series: Any, at: int | None) -> int:
    import numpy as np  # here only: ``tuidiag status`` reads the counts from run.json without numpy

    steps, values = series.steps, series.values
    if at is not None and len(steps):
        values = values[: int(np.searchsorted(steps, at, side="right"))]
    return _count(values[-1]) if len(values) else 0


def _count(value: Any) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0
    return int(number) if math.isfinite(number) and number > 0 else 0

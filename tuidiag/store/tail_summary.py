"""The small summary of a run's newest data that the recorder keeps in ``run.json`` (key ``summary``).

Rank 0's writer updates it after each flush's shards are on disk and writes it with
the heartbeat, so ``tuidiag status`` and the monitor's overview read one small JSON
file, never the shards, whatever the run's length::

    "summary": {"version": 1, "seq": 41, "rows": 16400,
                "last": {"train/loss": [820, 0.4312, 1732000000.5], ...},
                "spark": [0.52, 0.51, ...], "steps_per_s": 19.8}

``seq`` is the newest flush whose rows it includes: a reader that lists a newer
metrics shard of rank 0 knows the summary is behind (a run written by another tool,
a crash between the shard and ``run.json``) and reads the shards instead. ``last``
holds the newest row of each :data:`TRACKED` metric, as :meth:`tuidiag.store.Run.series`
orders rows (the highest step; of rows at that step, the last written; after a
resume, this session's rows only), with non-finite values as the strings
``"nan"``, ``"inf"``, ``"-inf"``: ``run.json`` has no NaN literal), ``spark`` the loss
sparkline of the overview, ``steps_per_s`` the training's recent pace.

No pyarrow and, on the reading side, no numpy: ``tuidiag status`` imports this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuidiag.format import GRAD_NORM_TOTAL, LOSS, LR_PREFIX, METRICS_DIR

if TYPE_CHECKING:
    import numpy as np

    from tuidiag.store.discovery import Shards

SUMMARY_KEY = "summary"
SUMMARY_VERSION = 1
LR_FIRST = f"{LR_PREFIX}0"
TRACKED = (LOSS, LR_FIRST, GRAD_NORM_TOTAL)
"""The metrics whose newest row the summary keeps: what the status line and the overview show."""
SPARK_POINTS = 40
SPARK_SPAN = 25
"""A sparkline point is the mean of this many finite values."""
PACE_WINDOW = 30.0
"""Seconds of recorded steps the pace (steps/s) is measured over."""
_TAIL_ROWS = SPARK_POINTS * SPARK_SPAN


@dataclass(frozen=True)
class Latest:
    """The newest row of a metric: its step, value and wall time."""

    step: int
    value: float
    wall_time: float


@dataclass(frozen=True)
class TailSummary:
    """A run's newest data as the recorder summarised it (:func:`read_summary`)."""

    seq: int
    """The newest flush of rank 0 whose rows are included."""
    rows: int
    """Metric rows of rank 0 written by the session that wrote the summary."""
    last: dict[str, Latest]
    spark: tuple[float, ...]
    steps_per_s: float | None


def read_summary(manifest: Any) -> TailSummary | None:
    """The summary in a parsed ``run.json``; ``None`` when absent, of another version or malformed (never raises)."""
    block = manifest.get(SUMMARY_KEY) if isinstance(manifest, dict) else None
    if not isinstance(block, dict) or not _is_int(block.get("version")) or block.get("version") != SUMMARY_VERSION:
        return None
    seq, rows = block.get("seq"), block.get("rows")
    if not _is_int(seq) or not _is_int(rows):
        return None
    last: dict[str, Latest] = {}
    entries = block.get("last")
    for name in TRACKED:
        entry = entries.get(name) if isinstance(entries, dict) else None
        if isinstance(entry, list) and len(entry) == 3 and _is_int(entry[0]):
            value, wall = _number(entry[1]), _number(entry[2])
            if value is not None and wall is not None and math.isfinite(wall):
                last[name] = Latest(int(entry[0]), value, wall)
    spark = block.get("spark")
    points = tuple(float(v) for v in spark[:SPARK_POINTS] if _finite(v)) if isinstance(spark, list) else ()
    pace = block.get("steps_per_s")
    return TailSummary(int(seq), int(rows), last, points, float(pace) if _finite(pace) and pace >= 0 else None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(value: Any) -> float | None:
    """A JSON number, or one of the strings non-finite values are written as."""
    if isinstance(value, str) and value in ("nan", "inf", "-inf"):
        return float(value)
    return float(value) if _finite(value) else None


def _json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


class TailKeeper:
    """The writer's side: fed each flush's rows once they are on disk, turned into the ``summary`` block."""

    def __init__(self) -> None:
        self.seq = -1
        self.rows = 0
        self._last: dict[str, Latest] = {}
        """The newest row of each tracked metric: the highest step, the last written of that step (as the reader has it)."""
        self._seeded: set[str] = set()
        """Names whose newest row is an earlier session's: this session's first row replaces it (a resumed run)."""
        self._finite: list[float] = []
        """The newest finite loss values in write order (the sparkline's); at most twice the tail kept."""
        self._pace: list[tuple[int, float]] = []
        """The newest loss rows' (step, wall time) in write order (the pace's)."""

    def seed(self, manifest: Any) -> None:
        """Start from a resumed run's previous summary: its newest values stand until this session logs newer ones."""
        previous = read_summary(manifest)
        if previous is not None:
            self.seq, self.rows, self._last = previous.seq, previous.rows, dict(previous.last)
            self._seeded = set(self._last)

    def add(self, rows: tuple["np.ndarray", "np.ndarray", "np.ndarray", "np.ndarray"], codes: dict[str, int], seq: int) -> None:
        """The rows of flush ``seq`` (the writer's (steps, wall times, name codes, values), joined once for the
        table written), now on disk."""
        import numpy as np

        self.seq = max(self.seq, seq)
        steps, walls, names, values = rows
        if not len(steps):
            return
        self.rows += len(steps)
        for name in TRACKED:
            code = codes.get(name)
            where = np.flatnonzero(names == code) if code is not None else ()
            if not len(where):
                continue
            here = steps[where]
            i = int(where[len(where) - 1 - int(np.argmax(here[::-1]))])  # the last row of the flush's highest step
            known = self._last.get(name)
            if known is None or name in self._seeded or int(steps[i]) >= known.step:  # as the reader orders rows: by step
                self._last[name] = Latest(int(steps[i]), float(values[i]), float(walls[i]))
                self._seeded.discard(name)
            if name == LOSS:
                loss = values[where]
                self._finite.extend(loss[np.isfinite(loss)].tolist())
                self._pace.extend(zip(here.tolist(), walls[where].tolist()))
                for kept in (self._finite, self._pace):
                    if len(kept) > 2 * _TAIL_ROWS:
                        del kept[:-_TAIL_ROWS]

    def to_json(self) -> dict[str, Any]:
        """The ``summary`` block of ``run.json``."""
        import numpy as np

        tail = self._pace[-_TAIL_ROWS:]
        pace = steps_per_second(np.array([s for s, _ in tail], np.int64), np.array([w for _, w in tail], np.float64))
        values = np.array(self._finite[-_TAIL_ROWS:], np.float64)
        return {
            "version": SUMMARY_VERSION, "seq": self.seq, "rows": self.rows,
            "last": {name: [row.step, _json_number(row.value), row.wall_time] for name, row in self._last.items()},
            "spark": tail_spark(values),
            "steps_per_s": pace if pace is not None and math.isfinite(pace) else None,
        }


def tail_spark(values: "np.ndarray", points: int = SPARK_POINTS) -> list[float]:
    """The last stretch of a series as at most ``points`` bucket means, for a sparkline."""
    import numpy as np

    want = points * SPARK_SPAN
    size = want
    while True:  # look at the end only: the overview calls this for every run on every refresh
        window = values[-size:] if 0 < size < len(values) else values
        good = window[np.isfinite(window)]
        if len(good) >= want or len(window) == len(values):
            break
        size *= 4
    if not len(good):
        return []
    tail = good[-want:]
    buckets = np.array_split(tail, min(points, len(tail)))
    return [float(b.mean()) for b in buckets]


def steps_per_second(steps: "np.ndarray", walls: "np.ndarray", window: float = PACE_WINDOW) -> float | None:
    """Training speed over the newest ``window`` seconds of recorded steps."""
    import numpy as np

    if len(steps) < 2:
        return None
    start = int(np.searchsorted(walls, walls[-1] - window))
    start = min(start, len(steps) - 2)
    elapsed = float(walls[-1] - walls[start])
    return (float(steps[-1]) - float(steps[start])) / elapsed if elapsed > 0 else None  # as floats: int64 steps may differ by more than int64 holds


def current_summary(run_dir: Path, manifest: Any, shards: Shards | None = None) -> TailSummary | None:
    """The summary of ``run.json`` when it covers every metrics shard of the lowest rank on disk, else ``None``
    (absent, behind the shards, or another rank's data only): then only the shards tell the newest values.
    ``shards``: those of ``metrics/``, when the caller has listed them already."""
    from tuidiag.store.discovery import list_shards

    summary = read_summary(manifest)
    if summary is None:
        return None
    shards = list_shards(Path(run_dir) / METRICS_DIR) if shards is None else shards
    if shards and (min(s.rank for s, _ in shards) != 0 or max(s.last for s, _ in shards if s.rank == 0) > summary.seq):
        return None
    return summary


def newest(run_dir: Path, manifest: Any, metric: str, shards: Shards | None = None) -> Latest | None:
    """The newest row of ``metric`` (one of :data:`TRACKED`): from the summary when it is current, else read from
    the end of the shards (:func:`tuidiag.store.tail.latest`, which imports pyarrow). ``shards``: those of
    ``metrics/``, when the caller has listed them already (``metrics/`` is then not listed again)."""
    if shards is None:
        from tuidiag.store.discovery import list_shards

        shards = list_shards(Path(run_dir) / METRICS_DIR)
    summary = current_summary(run_dir, manifest, shards)
    if summary is not None and metric in TRACKED:
        return summary.last.get(metric)
    from tuidiag.store.tail import latest

    return latest(run_dir, metric, shards=shards)

"""The Arrow tables one flush of the writer writes: its metric rows and its events, one bad part never costing another.

A mixin of :class:`tuidiag.recorder.writer.ShardWriter`: the rows and events buffered
since the last flush become one metrics table and one events table; should a table
fail to build, it is rebuilt from the parts that convert alone, and the others are
counted as lost (``lost_rows``).
"""

from __future__ import annotations

import json
from typing import Any, Callable, TypeVar

import numpy as np
import pyarrow as pa

from tuidiag.format import EVENTS_SCHEMA, METRICS_SCHEMA
from tuidiag.recorder.writer_items import EventRow
from tuidiag.store import arrow_build

Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""(steps, wall times, name codes, values): one batch of buffered rows, or all of a flush's joined."""
T = TypeVar("T")


class ShardTables:
    """The writer's buffered rows and events as tables (the writer's state is its own: see ``ShardWriter.__init__``)."""

    rank: int
    lost_rows: int
    report_error: Callable[[str, BaseException], None]
    _rows: list[Rows]
    _events: list[EventRow]
    _names: list[str]

    def _metrics_table(self, seq: int) -> tuple[pa.Table, Rows] | None:
        """The buffered rows as one table, with the rows it holds joined (the tail summary reads those: the rows
        are joined once per flush); should that fail, the parts that convert alone (``None``: none does)."""
        return self._isolating(self._rows, lambda parts: self._rows_table(parts, seq), "writer.metrics_table",
                               lambda part: max((len(column) for column in part if hasattr(column, "__len__")), default=1))

    def _isolating(self, parts: list[Any], build: Callable[[list[Any]], T], where: str,
                   size: Callable[[Any], int]) -> T | None:
        """``build(parts)``; should that fail, keep (in place) the parts that build alone, count the others'
        ``size`` as lost and build those kept: one bad part never costs another (``None``: none builds)."""
        try:
            return build(parts)
        except Exception as exc:
            self.report_error(where, exc)
        good = []
        for part in parts:
            try:
                build([part])
                good.append(part)
            except Exception:
                self.lost_rows += size(part)
        parts[:] = good
        return build(good) if good else None

    def _rows_table(self, rows: list[Rows], seq: int) -> tuple[pa.Table, Rows]:
        joined = steps, walls, codes, values = tuple(np.concatenate(parts) for parts in zip(*rows))
        n = len(steps)
        return pa.Table.from_arrays(
            [
                arrow_build.numeric(steps, pa.int64()),
                arrow_build.numeric(walls, pa.float64()),
                arrow_build.dictionary(codes, list(self._names)),
                arrow_build.numeric(values, pa.float64()),
                arrow_build.numeric(np.full(n, self.rank, np.int32), pa.int32()),
                arrow_build.numeric(np.full(n, seq, np.int64), pa.int64()),
            ],
            schema=METRICS_SCHEMA,
        ), joined

    def _events_table(self, seq: int) -> pa.Table | None:
        """The buffered events as one table; should that fail, the events that convert alone (``None``: none does)."""
        return self._isolating(self._events, lambda rows: self._event_rows_table(rows, seq), "writer.events_table", lambda _: 1)

    def _event_rows_table(self, rows: list[EventRow], seq: int) -> pa.Table:
        n = len(rows)
        return pa.Table.from_arrays(
            [
                arrow_build.numeric(np.array([e.step for e in rows], np.int64), pa.int64()),
                arrow_build.numeric(np.array([e.wall_time for e in rows], np.float64), pa.float64()),
                arrow_build.encoded([e.kind for e in rows]),
                arrow_build.encoded([e.severity for e in rows]),
                arrow_build.strings([e.message for e in rows]),
                arrow_build.strings([_event_data(e.data) for e in rows]),
                arrow_build.numeric(np.full(n, self.rank, np.int32), pa.int32()),
                arrow_build.numeric(np.full(n, seq, np.int64), pa.int64()),
            ],
            schema=EVENTS_SCHEMA,
        )


def _event_data(data: Any) -> str:
    """An event's ``data`` as JSON; what JSON cannot encode is stored as its ``repr``, or named."""
    try:
        return json.dumps(data, default=repr)
    except Exception as exc:  # circular data, keys that are not strings, a repr that raises
        return json.dumps({"unencodable": f"{type(exc).__name__}: {str(exc)[:200]}"})

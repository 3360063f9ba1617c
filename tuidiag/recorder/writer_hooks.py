"""What the recorder adds at each flush of its writer thread: system rows, error counts, the heartbeat.

A mixin of :class:`tuidiag.recorder.recorder.Recorder`: before each flush's shards are
written, the control channel is polled, the system stats and the error count become
rows when the training made progress since the last flush (an idle training writes
none), and the rejected-values count whenever it changed; once the shards are on disk,
``run.json``'s heartbeat carries the summary of the newest rows.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tuidiag.format import RECORDER_ERRORS, RECORDER_REJECTED
from tuidiag.recorder.errors import ErrorReporter, Rejections
from tuidiag.recorder.request_runner import RequestRunner
from tuidiag.recorder.run_manifest import RunManifest
from tuidiag.recorder.writer import EventRow, ShardWriter


class WriterHooks:
    """The recorder's callbacks from its writer thread (the recorder's state is its own: see ``Recorder.__init__``)."""

    _watch: Any
    _writer: ShardWriter
    _manifest: RunManifest
    _control: RequestRunner | None
    _host: Any
    _last_flushed_step: int
    _written_rejections: int
    errors: ErrorReporter
    rejections: Rejections

    def _error_event(self, kind: str, message: str, data: dict[str, Any]) -> None:
        self._writer.submit(EventRow(self._implicit_step(), time.time(), kind, "error", message, data))

    def _on_flush(self, writer: ShardWriter) -> None:
        """Writer thread, each flush before its shards are written: system stats, error count."""
        from tuidiag.recorder.system import system_rows

        if self._control is not None:
            self._control.poll()
            self._control.expire_overdue()
        step = writer.progress_step  # system rows at the training step, not at a later step given to log()
        if step > self._last_flushed_step:  # nothing new while idle: write nothing
            self._last_flushed_step = step
            if self._host is None and self._watch is not None:  # a training: created here, so psutil's import
                from tuidiag.recorder.host_probe import HostProbe  # costs the writer thread, not the training

                self._host = HostProbe()
            names, values = system_rows(self._watch, self._host)
            if self.errors.count:
                names.append(RECORDER_ERRORS)
                values.append(float(self.errors.count + self._manifest.earlier_stats.get("errors", 0)))
            if names:
                writer.add_rows(step, time.time(), names, np.asarray(values, np.float64))
        rejected = self.rejections.count
        if rejected != self._written_rejections:
            self._written_rejections = rejected
            earlier = self._manifest.earlier_stats.get("rejected_values", 0)  # the counters count the whole run
            writer.add_rows(max(step, 0), time.time(), [RECORDER_REJECTED], np.array([float(rejected + earlier)]))

    def _on_written(self, writer: ShardWriter) -> None:
        """Writer thread, each flush once its shards are on disk: the heartbeat, with the summary of the newest rows."""
        self._manifest.heartbeat(writer.progress_step, self._stats(), writer.last_step, writer.tail.to_json())

    def _stats(self) -> dict[str, int]:
        writer = self._writer
        return {"rows_written": writer.rows_written, "dropped_rows": writer.dropped_rows, "errors": self.errors.count,
                "rejected_values": self.rejections.count, "lost_rows": writer.lost_rows}

"""The background writer: a bounded queue, a daemon thread, timed flushes to Parquet.

Like TensorBoard's ``EventFileWriter`` but without its faults: ``submit`` never
blocks the training loop (a full queue drops the rows and counts them), flushes
happen every second or so rather than every two minutes, and a failing disk is
reported once while the newest rows wait in bounded memory for the next try.
This module knows nothing about torch: values arrive as numpy arrays or as
objects with a ``resolve()`` method that returns one (an async device copy).

One bad item never costs another: a batch whose values cannot be read or do not
match its names is refused alone, and should a flush's table still fail to build,
it is rebuilt from the parts that convert. What is refused is counted
(``lost_rows``), reported, and written as ``recorder/lost_rows`` and a
``lost_rows`` event.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tuidiag.format import (
    EVENT_DROPPED,
    EVENT_LOST,
    EVENTS_DIR,
    EVENTS_SCHEMA,
    METRICS_DIR,
    METRICS_SCHEMA,
    RECORDER_DROPPED,
    RECORDER_LOST,
    ShardName,
)
from tuidiag.recorder.shard_tables import ShardTables
from tuidiag.recorder.values import storable_name
from tuidiag.recorder.writer_items import EventRow, Layout, MetricBatch
from tuidiag.store.shards import COMPACT_MIN_FILES, compact, compact_all, list_shards, plan_compaction, write_table_atomic
from tuidiag.store.tail_summary import TailKeeper

MAX_BUFFERED_ROWS = 2_000_000
"""Rows kept in memory while the disk refuses writes; the oldest go beyond this."""


class ShardWriter(ShardTables):
    """Owns the writer thread of one rank of one run directory.

    The queue is a ``deque`` that the training thread appends to without taking a
    lock or waking anyone; the writer thread wakes once per flush interval (or when
    asked to flush) and drains it in one go. Waking per item would make the two
    threads fight for the GIL on every step.
    """

    def __init__(
        self,
        run_dir: Path,
        rank: int,
        flush_interval: float = 1.0,
        max_queue: int = 10_000,
        on_flush: Callable[["ShardWriter"], None] | None = None,
        report_error: Callable[[str, BaseException], None] | None = None,
        compact_min_files: int = COMPACT_MIN_FILES,
        on_written: Callable[["ShardWriter"], None] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.on_written = on_written
        """Called at the end of each flush, once its shards are on disk (the heartbeat)."""
        self.tail = TailKeeper()
        """The newest values of the rows on disk, for ``run.json``'s ``summary``."""
        self.compact_min_files = compact_min_files
        self.rank = rank
        self.flush_interval = flush_interval
        self.max_queue = max_queue
        self.on_flush = on_flush
        self.report_error = report_error or _stderr_report
        self.dropped_rows = 0
        self.rows_written = 0
        self.lost_rows = 0
        """Rows accepted but never written: values unreadable, or not matching their names."""
        self._reported_lost = 0
        self.last_step = -1
        """The highest step of any row accepted (``log`` rows at explicit steps included)."""
        self.last_trained_step = -1
        """The highest step ``rec.step()`` sent (:attr:`MetricBatch.trained`)."""
        self._reported_drops = 0
        self._items: deque[Any] = deque()
        self._wake = threading.Event()
        self._flushes = threading.Condition()
        self._asked = 0
        """Flush requests made (tickets handed out by :meth:`flush`)."""
        self._served = 0
        """The highest ticket whose items are written: a flush waits for its own, never an earlier flush's."""
        self._stopping = False
        self._names: dict[str, int] = {}
        self._unstorable: set[str] = set()
        """Names UTF-8 cannot store (``Recorder.log`` rejects them first): their rows are counted lost."""
        self._layout_codes: dict[int, tuple[Layout, np.ndarray]] = {}
        self._rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._events: list[EventRow] = []
        self._dirs_ready = self._make_dirs()
        self._seq = self._next_seq()
        self._thread = threading.Thread(target=self._loop, name=f"tuidiag-writer-r{rank}", daemon=True)
        self._thread.start()

    # ---- training-thread side -------------------------------------------------
    def submit(self, item: MetricBatch | EventRow, rows: int = 1) -> bool:
        """Queue an item without ever blocking; a full queue drops it and counts ``rows``."""
        if len(self._items) >= self.max_queue or self._stopping:
            self.dropped_rows += rows
            return False
        self._items.append(item)
        if len(self._items) == self.max_queue // 2:
            self._wake.set()  # drain early rather than drop under a fast loop
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Ask the thread to write everything queued so far; wait up to ``timeout`` seconds for that write.

        Each call takes a ticket; the thread reads the newest ticket before it drains the queue, so a flush
        it serves includes every item submitted before the ticket. (One event shared by all flushes let a
        periodic write that had drained earlier wake a waiter whose rows were still queued.)"""
        if not self._thread.is_alive():
            return False
        with self._flushes:
            self._asked += 1
            ticket = self._asked
            self._flushes.notify_all()
        self._wake.set()
        with self._flushes:
            return self._flushes.wait_for(lambda: self._served >= ticket or not self._thread.is_alive(), timeout) \
                and self._served >= ticket

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued, compact this rank's shards and stop the thread."""
        if not self._thread.is_alive():
            return
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)

    @property
    def progress_step(self) -> int:
        """The run's progress (:mod:`tuidiag.store.progress`): the last training step, else the last step of any row."""
        return self.last_trained_step if self.last_trained_step >= 0 else self.last_step

    # ---- writer-thread side ----------------------------------------------------
    def _loop(self) -> None:
        self._guard(_import_compute)
        deadline = time.monotonic() + self.flush_interval
        while True:
            self._wake.wait(max(0.0, deadline - time.monotonic()))
            self._wake.clear()
            stopping = self._stopping
            asked = self._asked  # read before draining: the items of every ticket up to it are queued
            self._drain()
            if stopping:
                self._guard(self._write_pending)
                if self._rows or self._events:  # what the last flush found lost, said in one more
                    self._guard(self._write_pending)
                self._guard(self._compact_all)
                self._serve(asked)
                return
            if asked > self._served or time.monotonic() >= deadline or len(self._rows) > self.max_queue:
                self._guard(self._write_pending)
                deadline = time.monotonic() + self.flush_interval
                self._serve(asked)

    def _serve(self, asked: int) -> None:
        """Tickets up to ``asked`` are written: wake the flushes waiting on them."""
        with self._flushes:
            self._served = max(self._served, asked)
            self._flushes.notify_all()

    def _drain(self) -> None:
        while self._items:
            self._guard(self._accept, self._items.popleft())

    def _guard(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # the writer thread must survive anything
            self.report_error(f"writer.{getattr(fn, '__name__', 'call')}", exc)

    def _accept(self, item: MetricBatch | EventRow) -> None:
        if isinstance(item, EventRow):
            self._events.append(item)
            return
        layout = item.layout
        if item.trained:
            self.last_trained_step = max(self.last_trained_step, item.step)
        if not layout.names:
            return
        try:
            values = item.values.resolve() if hasattr(item.values, "resolve") else item.values
            values = np.asarray(values, dtype=np.float64).reshape(-1)
        except Exception:
            self.lost_rows += len(layout.names)
            raise
        self.add_rows(item.step, item.wall_time, layout.names, values, self._codes_of(layout))
        if layout.derive is not None:
            extra_names, extra_values = layout.derive(item.step, values)
            if extra_names:
                self.add_rows(item.step, item.wall_time, extra_names, np.asarray(extra_values, dtype=np.float64))

    def _codes_of(self, layout: Layout) -> np.ndarray:
        """Dictionary codes of a layout's names, computed once per layout."""
        cached = self._layout_codes.get(id(layout))
        if cached is None or cached[0] is not layout:
            codes = np.fromiter((self._code(n) for n in layout.names), dtype=np.int32, count=len(layout.names))
            cached = self._layout_codes[id(layout)] = (layout, codes)
        return cached[1]

    def add_rows(self, step: int, wall_time: float, names: list[str], values: np.ndarray, codes: np.ndarray | None = None) -> None:
        """Buffer rows directly (writer thread only: ``on_flush`` callbacks use it).

        Rows that cannot be stored (a value count other than the name count, a step
        beyond int64) raise ``ValueError`` and are counted in ``lost_rows``; rows
        buffered before stay."""
        try:
            values = np.asarray(values, dtype=np.float64).reshape(-1)
            if len(values) != len(names):
                raise ValueError(f"{len(values)} values for {len(names)} metric names (the first: {str(names[:1])[:80]})")
            steps = np.full(len(names), step, np.int64)
            if codes is None:
                codes = np.fromiter((self._code(n) for n in names), dtype=np.int32, count=len(names))
        except (ValueError, TypeError, OverflowError) as exc:
            self.lost_rows += len(names)
            raise ValueError(f"rows not stored: {exc}") from exc
        if self._unstorable and (codes < 0).any():  # a name stored altered would merge with another: not stored
            keep = codes >= 0
            self.lost_rows += int(len(codes) - keep.sum())
            steps, codes, values = steps[keep], codes[keep], values[keep]
            if not len(codes):
                return
        self._rows.append((steps, np.full(len(codes), wall_time, np.float64), codes, values))
        self.last_step = max(self.last_step, int(step))

    def add_event(self, event: EventRow) -> None:
        """Buffer an event directly (writer thread only)."""
        self._events.append(event)

    def _code(self, name: str) -> int:
        """The dictionary code of ``name``; -1 for a name UTF-8 cannot store (its rows are not written)."""
        code = self._names.get(name)
        if code is None:
            if name in self._unstorable or not storable_name(name):
                if name not in self._unstorable:
                    self._unstorable.add(name)
                    self.report_error("writer.names", ValueError(f"metric name {name[:200]!r} is not valid Unicode text; its rows are not written"))
                return -1
            code = self._names[name] = len(self._names)
        return code

    def _write_pending(self) -> None:
        if self.on_flush is not None:
            self._guard(self.on_flush, self)
        self._note_drops()
        if self._rows or self._events:
            self._guard(self._write_shards)
        if self.on_written is not None:
            self._guard(self.on_written, self)

    def _write_shards(self) -> None:
        seq, wrote = self._seq, False
        name = ShardName(self.rank, seq, seq).filename
        try:
            self._dirs_ready = self._dirs_ready or self._make_dirs(raise_errors=True)
            built = self._metrics_table(seq) if self._rows else None
            if built is not None:
                metrics, joined = built
                write_table_atomic(self.run_dir / METRICS_DIR / name, metrics, root=self.run_dir)
                wrote = True
                self.rows_written += metrics.num_rows
                self._guard(self.tail.add, joined, self._names, seq)
            self._rows.clear()
            events = self._events_table(seq) if self._events else None
            if events is not None:
                write_table_atomic(self.run_dir / EVENTS_DIR / name, events, root=self.run_dir)
                wrote = True
            self._events.clear()
        except OSError as exc:
            self._keep_for_retry(exc)
        finally:
            # a sequence number is never reused once any file carries it
            self._seq += 1 if wrote else 0
        self._note_drops()  # rows found lost while building the tables: said in the next flush
        if wrote:
            self._guard(self._compact_some)

    def _make_dirs(self, raise_errors: bool = False) -> bool:
        """Create ``metrics/`` and ``events/``; on a read-only or full disk, try again at the next flush."""
        try:
            for sub in (METRICS_DIR, EVENTS_DIR):
                (self.run_dir / sub).mkdir(parents=True, exist_ok=True)
        except OSError:
            if raise_errors:
                raise
            return False
        return True

    def _keep_for_retry(self, exc: OSError) -> None:
        """Disk full or read-only: report once, keep the newest rows (bounded) for the next flush."""
        self.report_error("writer.write", exc)
        total = sum(len(r[0]) for r in self._rows)
        while total > MAX_BUFFERED_ROWS and len(self._rows) > 1:
            total -= len(self._rows[0][0])
            self.dropped_rows += len(self._rows.pop(0)[0])
        del self._events[:-10_000]

    def _note_drops(self) -> None:
        step = max(self.last_step, 0)
        now = time.time()
        for total, reported, metric, kind, severity, what in (
            (self.dropped_rows, self._reported_drops, RECORDER_DROPPED, EVENT_DROPPED, "warning",
             "recorder queue full: {n} rows dropped (training was not blocked)"),
            (self.lost_rows, self._reported_lost, RECORDER_LOST, EVENT_LOST, "error",
             "{n} rows could not be stored and were not written (the others were)"),
        ):
            if total != reported:
                self.add_rows(step, now, [metric], np.array([float(total)]))
                self._events.append(EventRow(step, now, kind, severity, what.format(n=total - reported), {"total": total}))
        self._reported_drops, self._reported_lost = self.dropped_rows, self.lost_rows

    def _compact_some(self, min_files: int | None = None) -> None:
        for sub, schema in ((METRICS_DIR, METRICS_SCHEMA), (EVENTS_DIR, EVENTS_SCHEMA)):
            directory = self.run_dir / sub
            group = plan_compaction(list_shards(directory), self.rank, min_files or self.compact_min_files)
            compact(directory, group, schema, root=self.run_dir)

    def _compact_all(self) -> None:
        """On close: merge every run of small shards, until none is left to merge, then write the whole-run
        file a reader opens the run from (:mod:`tuidiag.store.whole_summary`; a run of one rank only)."""
        compact_all(self.run_dir, self.rank)
        from tuidiag.store.whole_writer import write_whole

        write_whole(self.run_dir, self.rank)

    def _next_seq(self) -> int:
        """Continue after the highest sequence number already on disk (a resumed run)."""
        last = [s.last for sub in (METRICS_DIR, EVENTS_DIR) for s, _ in list_shards(self.run_dir / sub) if s.rank == self.rank]
        return max(last, default=-1) + 1


def _import_compute() -> None:
    """Import ``pyarrow.compute`` now, on this thread, not first at the compaction of ``close()``:
    about 60 ms, once, kept off the training's way out. (Its import runs ``exec``, which makes
    CPython forget an uncaught Ctrl-C; :func:`tuidiag.recorder.process.keep_sigint_exit`
    restores that at exit, whenever the import ran.)"""
    import pyarrow.compute  # noqa: F401


def _stderr_report(where: str, exc: BaseException) -> None:
    print(f"tuidiag: error in {where}: {exc!r}", file=sys.stderr)

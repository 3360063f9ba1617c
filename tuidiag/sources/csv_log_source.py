"""CSV metric logs read live: Lightning's ``CSVLogger`` (``version_N/metrics.csv``) and Keras' ``CSVLogger`` files.

Rows are read as they are appended, whole lines only (a row cut off by the writer's
buffer is read at the next refresh). Columns are read as ``tuidiag import csv`` reads
them (:mod:`tuidiag.importers.csv_log`): ``step`` is the step (Lightning, whose
``epoch`` column stays a metric), else ``epoch`` (Keras), else the row number; an empty
cell is "not logged". Lightning rewrites the whole file when a new metric first appears
(a new header): the run is then read again from the start. CSV files hold no times:
rows get the file's modification time when they are read.

A Lightning run is the directory holding ``metrics.csv`` (its ``hparams.yaml`` is the
config); a Keras log is one file (``.csv``, ``.log`` or ``.tsv``) whose header starts with ``epoch``.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a table is read: the monitor never loads it (memory)
    import pandas as pd

from tuidiag.importers.csv_log import DELIMITERS
from tuidiag.importers.source import SourceSeries
from tuidiag.importers.tables import LIGHTNING_HPARAMS, lightning_hparams, numbers
from tuidiag.sources.foreign_run import ForeignSource
from tuidiag.sources.run_source import Batch, Claim, Tail
from tuidiag.store.limits import MAX_CSV_BYTES, MAX_CSV_HEADER_BYTES, LimitError, open_bounded

KIND = "csv"
LIGHTNING_FILE = "metrics.csv"
KERAS_SUFFIXES = (".csv", ".log", ".tsv")
STEP_COLUMNS = ("step", "epoch")
"""The column that gives each row's step, first found wins (Lightning's ``step``, Keras' ``epoch``)."""


def _split_header(line: bytes) -> tuple[str, list[str]]:
    """(delimiter, column names) of a header line."""
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    try:
        delimiter = csv.Sniffer().sniff(text, delimiters=DELIMITERS).delimiter
    except csv.Error:
        delimiter = ","
    columns = next(csv.reader([text], delimiter=delimiter, skipinitialspace=True), [])
    return delimiter, [c.strip() for c in columns]


def _first_line(path: Path) -> bytes:
    """The file's first line (at most ``MAX_CSV_HEADER_BYTES``), empty when unreadable."""
    try:
        with open_bounded(path, None) as handle:
            return handle.readline(MAX_CSV_HEADER_BYTES)
    except (OSError, LimitError):
        return b""


class CsvLogSource(ForeignSource):
    """Lightning ``CSVLogger`` directories and Keras ``CSVLogger`` files."""

    kind = KIND

    def __init__(self) -> None:
        self._verdicts: dict[Path, tuple[int, bool]] = {}
        """Path -> (size when judged, is a Keras log) for files whose first line was whole: judged again only
        when the file shrank (rewritten), not at every append (a busy log file is not re-read at each write)."""

    def claim(self, directory: Path, dirnames: list[str], filenames: list[str]) -> Claim | None:
        """A Lightning run directory (search stops), or the Keras logs among its files (search goes on)."""
        if LIGHTNING_FILE in filenames:
            return Claim((directory,))
        logs = tuple(directory / name for name in sorted(filenames) if self.is_keras_log(directory / name))
        return Claim(logs, descend=True) if logs else None

    def owner_of(self, changed: Path) -> Path | None:
        """The Lightning directory of a ``metrics.csv``, or a Keras log file itself."""
        if changed.name == LIGHTNING_FILE:
            return changed.parent
        return changed if self.is_keras_log(changed) else None

    def is_keras_log(self, path: Path) -> bool:
        """True for a ``.csv``/``.log``/``.tsv`` file whose header's first column is ``epoch``."""
        if path.suffix not in KERAS_SUFFIXES or path.name.startswith("."):
            return False
        try:
            stat = path.stat()
        except OSError:
            return False
        known = self._verdicts.get(path)
        if known is not None and stat.st_size >= known[0]:
            return known[1]
        line = _first_line(path)
        if not line.endswith(b"\n"):
            return False  # no whole header yet: judged when it is
        verdict = _split_header(line)[1][:1] == ["epoch"]
        self._verdicts[path] = (stat.st_size, verdict)
        return verdict

    def tail(self, key: Path) -> Tail:
        """A reader of the log's new whole lines."""
        return CsvTail(key / LIGHTNING_FILE if key.is_dir() else key)


class CsvTail(Tail):
    """One CSV log, read on from the end of the last whole line read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.header: bytes | None = None
        self.delimiter = ","
        self.columns: list[str] = []
        self.offset = 0
        self.rows = 0
        self.hparams_mtime: int | None = None

    def read(self) -> Batch:
        """The rows appended since the last read (all rows again, with ``restart``, after a rewrite)."""
        batch = Batch()
        try:
            stat = self.path.stat()
            batch.last_write = stat.st_mtime
            with open_bounded(self.path, MAX_CSV_BYTES) as handle:
                head = handle.readline(MAX_CSV_HEADER_BYTES)
                if not head.endswith(b"\n"):
                    return batch  # no whole header yet (a new file, or one being rewritten)
                if head != self.header or stat.st_size < self.offset:
                    batch.restart = self.header is not None
                    self._start(head)
                handle.seek(self.offset)
                data = handle.read(max(0, stat.st_size - self.offset))
        except (OSError, LimitError) as exc:
            batch.notes.append(f"{self.path.name}: not read ({exc})")
            return batch
        end = data.rfind(b"\n") + 1
        self.offset += end
        if end:
            batch.series = self._series(data[:end].decode("utf-8", errors="replace"), stat.st_mtime, batch.notes)
        self._read_hparams(batch)
        return batch

    def _start(self, head: bytes) -> None:
        self.header, self.offset, self.rows = head, len(head), 0
        self.delimiter, self.columns = _split_header(head)

    def _series(self, text: str, wall: float, notes: list[str]) -> list[SourceSeries]:
        """One piece per metric column, on the rows where it was logged."""
        rows = [row for row in csv.reader(io.StringIO(text), delimiter=self.delimiter, skipinitialspace=True) if row]
        if not rows:
            return []
        width = len(self.columns)
        import pandas as pd

        frame = pd.DataFrame([row[:width] + [""] * (width - len(row)) for row in rows], columns=range(width), dtype=str)
        step_index = next((self.columns.index(c) for c in STEP_COLUMNS if c in self.columns), None)
        if step_index is None:
            steps = np.arange(self.rows, self.rows + len(rows), dtype=np.int64)
            keep = np.ones(len(rows), bool)
        else:
            logged, values = numbers(frame[step_index])
            keep = logged & np.isfinite(values)
            if not keep.all():
                notes.append(f"{self.path.name}: rows without a number in column {self.columns[step_index]!r} skipped")
            steps = np.where(keep, values, 0).astype(np.int64)
        self.rows += len(rows)
        result = []
        for index, name in enumerate(self.columns):
            if index == step_index or not name:
                continue
            logged, values = numbers(frame[index])
            logged &= keep
            if logged.any():
                result.append(SourceSeries(name, steps[logged], values[logged], np.full(int(logged.sum()), wall)))
        return result

    def _read_hparams(self, batch: Batch) -> None:
        """Lightning's ``hparams.yaml`` beside ``metrics.csv``, as config, read again whenever it changes."""
        if self.path.name != LIGHTNING_FILE:
            return
        try:
            mtime = (self.path.parent / LIGHTNING_HPARAMS).stat().st_mtime_ns
        except OSError:
            return
        if mtime != self.hparams_mtime:
            self.hparams_mtime = mtime
            batch.config = lightning_hparams(self.path.parent, batch.notes)

"""Import a CSV metrics log: Lightning's ``CSVLogger`` or Keras' ``CSVLogger`` (or any step-per-row CSV).

- Lightning (``lightning_logs/version_N/metrics.csv``): a ``step`` column, an ``epoch``
  column, and one column per metric with empty cells on the rows where that metric
  was not logged. ``step`` is the step; ``epoch`` is kept as a metric. The
  ``hparams.yaml`` Lightning writes beside it becomes the run's config.
- Keras (``CSVLogger("training.log")``): an ``epoch`` column (from 0) and one column per
  metric; the epoch is the step.
- Anything else: the row number is the step (reported).

CSV files hold no times: every row gets the file's modification time.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a table is read: the monitor never loads it (memory)
    import pandas as pd

from tuidiag.importers.source import ImportSourceError, SourceRun
from tuidiag.importers.tables import check_file, file_time, lightning_hparams, numbers, run_name, series_from_columns
from tuidiag.store.limits import MAX_CSV_BYTES, MAX_CSV_HEADER_BYTES, open_bounded

DELIMITERS = ",;\t|"


def delimiter(path: Path) -> str:
    """The header line's delimiter (Keras' ``CSVLogger(separator=...)`` may use ``;`` or a tab), default ``,``."""
    with open_bounded(path, MAX_CSV_BYTES) as handle:
        header = handle.readline(MAX_CSV_HEADER_BYTES).decode("utf-8", errors="replace")
    try:
        return csv.Sniffer().sniff(header, delimiters=DELIMITERS).delimiter
    except csv.Error:
        return ","


def read_table(path: Path) -> pd.DataFrame:
    """The CSV as text cells (empty cells stay empty strings, so 'not logged' differs from ``nan``).

    Over :data:`~tuidiag.store.limits.MAX_CSV_BYTES` it is not read.
    """
    import pandas as pd

    try:
        with open_bounded(path, MAX_CSV_BYTES) as handle:
            frame = pd.read_csv(handle, sep=delimiter(path), dtype=str, keep_default_na=False, skipinitialspace=True)
    except (OSError, ValueError) as exc:  # pandas' ParserError and EmptyDataError, bad encodings, LimitError
        raise ImportSourceError(f"cannot read {path} as CSV: {exc}") from exc
    if frame.empty:
        raise ImportSourceError(f"{path} has no rows")
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame


def step_column(frame: pd.DataFrame, notes: list[str]) -> tuple[np.ndarray, str, list[str]]:
    """(steps of each row, the layout's name, metric columns): ``step``, else ``epoch``, else the row number."""
    for column, layout in (("step", "lightning"), ("epoch", "keras")):
        if column in frame.columns:
            logged, values = numbers(frame[column])
            if not logged.all() or not np.isfinite(values).all():
                raise ImportSourceError(f"column {column!r} has empty or non-numeric cells")
            metrics = [c for c in frame.columns if c != column]
            return values.astype(np.int64), layout, metrics
    notes.append("no 'step' or 'epoch' column: the row number is the step")
    return np.arange(len(frame), dtype=np.int64), "rows", list(frame.columns)


def read_csv_log(path: str | os.PathLike[str], name: str | None = None) -> SourceRun:
    """The run held by a CSV metrics log."""
    path = Path(path)
    check_file(path)
    frame = read_table(path)
    notes: list[str] = []
    steps, layout, metrics = step_column(frame, notes)
    try:
        series = series_from_columns(frame[metrics], steps, file_time(path), notes)
    except ImportSourceError as exc:
        raise ImportSourceError(f"{path}: {exc}") from exc
    config = lightning_hparams(path.parent, notes) if layout == "lightning" else {}
    source = {"format": f"csv ({layout})", "path": str(path.resolve())}
    return SourceRun(run_name(path, name), series, source, notes, config)

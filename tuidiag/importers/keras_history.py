"""Import a Keras ``History.history`` saved as JSON (``training_history.json``: ``loss``, ``val_loss``, ...).

The file is a JSON object of lists, one value per epoch; the epoch (from 0) is the
step. ``{"history": {...}}`` (a whole ``History`` saved with its attribute name) is
accepted too. ``null`` means not logged; ``NaN``/``Infinity`` are kept. A list
shorter than the longest one comes from ``validation_freq=k``: when it divides
evenly its values are placed at the epochs Keras validated on (``k-1``, ``2k-1``, ...),
otherwise at the first epochs (reported either way).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a table is read: the monitor never loads it (memory)
    import pandas as pd

from tuidiag.importers.source import ImportSourceError, SourceRun, SourceSeries
from tuidiag.importers.tables import check_file, file_time, run_name, series_from_columns
from tuidiag.store.limits import MAX_KERAS_HISTORY_BYTES, read_json_bounded


EXAMPLE = '{"loss": [...], "val_loss": [...]}'


def load_history(path: Path) -> dict[str, list[Any]]:
    """The history's lists by metric name; raises :class:`ImportSourceError` on anything else."""
    try:
        data = read_json_bounded(path, MAX_KERAS_HISTORY_BYTES)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # LimitError too: too large or too deep
        raise ImportSourceError(f"cannot read {path} as JSON: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("history"), dict):
        data = data["history"]
    if not isinstance(data, dict):
        raise ImportSourceError(f"{path} is not a Keras history (a JSON object of lists, e.g. {EXAMPLE})")
    lists = {str(k): v for k, v in data.items() if isinstance(v, list)}
    if not lists:
        raise ImportSourceError(f"{path} holds no lists of values (expected e.g. {EXAMPLE})")
    return lists


def epochs_of(length: int, longest: int) -> tuple[np.ndarray, str | None]:
    """The epochs of a list of ``length`` values when the longest list has ``longest`` (and a note)."""
    if length == longest:
        return np.arange(length, dtype=np.int64), None
    if length and longest % length == 0:
        every = longest // length
        return np.arange(1, length + 1, dtype=np.int64) * every - 1, f"every {every} epochs (validation_freq={every})"
    return np.arange(length, dtype=np.int64), f"{length} of {longest} values: placed at the first epochs"


def _as_text(values: list[Any]) -> pd.Series:
    """Values as the text cells the shared column reader takes (``null`` and non-numbers become empty)."""
    import pandas as pd

    return pd.Series(["" if v is None or isinstance(v, (bool, dict, list)) else str(v) for v in values], dtype=str)


def read_keras_history(path: str | os.PathLike[str], name: str | None = None) -> SourceRun:
    """The run held by a Keras history JSON file."""
    import pandas as pd

    path = Path(path)
    check_file(path)
    lists = load_history(path)
    longest = max(len(v) for v in lists.values())
    notes: list[str] = []
    series: list[SourceSeries] = []
    wall = file_time(path)
    for metric, values in lists.items():
        epochs, note = epochs_of(len(values), longest)
        if note:
            notes.append(f"{metric}: {note}")
        try:
            series += series_from_columns(pd.DataFrame({metric: _as_text(values)}), epochs, wall, notes)
        except ImportSourceError:
            continue  # already noted as holding no numbers
    if not series:
        raise ImportSourceError(f"{path}: no numeric metrics found")
    source = {"format": "keras-history", "path": str(path.resolve())}
    return SourceRun(run_name(path, name), series, source, notes)

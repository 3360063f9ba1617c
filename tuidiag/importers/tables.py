"""Shared by the file importers: the run's place and name, and columns of numbers made into series."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a table is read: the monitor never loads it (memory)
    import pandas as pd

from tuidiag.importers.source import ImportSourceError, SourceSeries
from tuidiag.store.limits import MAX_HPARAMS_BYTES, LimitError, check_tree, read_bytes_bounded

LIGHTNING_HPARAMS = "hparams.yaml"
"""Lightning's loggers (CSV and TensorBoard) write the hyperparameters here, beside the metrics."""
GENERIC_STEMS = {"metrics"}
"""File stems that say nothing about the run (Lightning always writes ``metrics.csv``): the folder names it instead."""


def run_name(path: Path, name: str | None) -> Path:
    """The run's directory below the output: ``name``, else the file's stem (its folder's name for generic stems)."""
    if name:
        return Path(name)
    stem = path.stem
    if stem.lower() in GENERIC_STEMS and path.resolve().parent.name:
        return Path(path.resolve().parent.name)
    return Path(stem)


def check_file(path: Path) -> None:
    """Raise :class:`ImportSourceError` unless ``path`` is a readable file."""
    if not path.exists():
        raise ImportSourceError(f"{path} does not exist")
    if not path.is_file():
        raise ImportSourceError(f"{path} is not a file")


def numbers(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(logged, values) of a text column: empty cells were not logged; ``nan``/``inf`` are kept as such.

    Cells that are neither empty nor a number count as not logged too; the caller
    reports columns that hold no number at all.
    """
    import pandas as pd

    text = column.astype(str).str.strip()
    values = pd.to_numeric(text.where(text != ""), errors="coerce").to_numpy(np.float64)
    literal_nan = text.str.lower().isin(["nan", "-nan", "+nan"]).to_numpy()
    logged = ~np.isnan(values) | literal_nan
    return logged, values


def series_from_columns(
    frame: pd.DataFrame, steps: np.ndarray, wall_time: float, notes: list[str]
) -> list[SourceSeries]:
    """One series per column of ``frame``, on the rows where that column was logged."""
    result = []
    for column in frame.columns:
        logged, values = numbers(frame[column])
        if not logged.any():
            notes.append(f"column {column!r} holds no numbers; skipped")
            continue
        walls = np.full(int(logged.sum()), wall_time)
        result.append(SourceSeries(str(column), steps[logged].astype(np.int64), values[logged], walls))
    if not result:
        raise ImportSourceError("no numeric metrics found")
    return result


def lightning_hparams(directory: Path, notes: list[str]) -> dict[str, Any]:
    """Lightning's ``hparams.yaml`` in ``directory``, as the run's config (``{}`` when absent or unreadable).

    Over :data:`~tuidiag.store.limits.MAX_HPARAMS_BYTES` it is not read; a config nesting deeper
    than ``MAX_JSON_DEPTH`` or holding more than ``MAX_CONFIG_NODES`` values (aliases count each
    time they are used) is dropped, with a note.
    """
    hparams = directory / LIGHTNING_HPARAMS
    if not hparams.is_file():
        return {}
    try:
        import yaml

        loaded = yaml.safe_load(read_bytes_bounded(hparams, MAX_HPARAMS_BYTES).decode("utf-8"))
        check_tree(loaded, LIGHTNING_HPARAMS)
    except LimitError as exc:
        notes.append(f"{LIGHTNING_HPARAMS} not read: {exc}")
        return {}
    except Exception as exc:  # PyYAML missing or the file is not plain YAML: the metrics still import
        notes.append(f"{LIGHTNING_HPARAMS} not read ({type(exc).__name__})")
        return {}
    return loaded if isinstance(loaded, dict) else {}


def file_time(path: Path) -> float:
    """The file's modification time: the wall time of rows from formats that store none."""
    return path.stat().st_mtime

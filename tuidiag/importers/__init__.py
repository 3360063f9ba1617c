"""Importers: runs recorded without tuidiag (TensorBoard, Keras history, CSV logs) as tuidiag runs.

Each source module reads its files into :class:`SourceRun` objects (no torch, no UI);
:func:`write_run` maps their metric names onto tuidiag's conventions
(:mod:`tuidiag.importers.names`) and writes a normal, finished run directory.
"""

from tuidiag.importers.csv_log import read_csv_log
from tuidiag.importers.keras_history import read_keras_history
from tuidiag.importers.run_writer import RunExistsError, WrittenRun, check_target, write_run
from tuidiag.importers.source import ImportSourceError, SourceRun, SourceSeries
from tuidiag.importers.tensorboard import read_tensorboard

__all__ = [
    "ImportSourceError", "RunExistsError", "SourceRun", "SourceSeries", "WrittenRun",
    "check_target", "read_csv_log", "read_keras_history", "read_tensorboard", "write_run",
]

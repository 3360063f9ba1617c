"""The one interface every kind of run implements for the monitor: find runs, say which run a
changed file belongs to, and open a run that reads what is new on each ``refresh()``.

A kind of run (tuidiag's own, a TensorBoard log, a W&B offline run, a CSV log) is a
:class:`RunSource`. Foreign kinds (:class:`~tuidiag.sources.foreign_run.ForeignSource`) only say how
to read their files incrementally (a :class:`Tail`), and
:class:`~tuidiag.sources.foreign_run.ForeignRun` turns what a tail reads into the same
reading interface as a tuidiag run. No kind ever writes into the directory it reads.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tuidiag.importers.source import SourceSeries
from tuidiag.store import Run

KIND_TUIDIAG = "tuidiag"
"""The kind of runs the recorder (or ``tuidiag import``) wrote."""


@dataclass(frozen=True)
class Claim:
    """What one directory holds for a kind: the run keys (directories, or files for one-file logs),
    and whether the search goes on below it."""

    runs: tuple[Path, ...]
    descend: bool = False


class RunSource(ABC):
    """One kind of run: how it is found, which run a changed file belongs to, and how it is opened."""

    kind: ClassVar[str]
    """The name shown in the overview's source column."""
    appends_in_place: ClassVar[bool] = False
    """True when the writer appends to files in place (a file *modification* is new data); tuidiag's
    own writer renames complete files into place, so its modifications are ignored."""

    @abstractmethod
    def claim(self, directory: Path, dirnames: list[str], filenames: list[str]) -> Claim | None:
        """The runs of this kind that ``directory`` (with these entries) holds, else ``None``."""

    @abstractmethod
    def owner_of(self, changed: Path) -> Path | None:
        """The run key a changed (or created, deleted) file belongs to, if it is one of this kind's files."""

    @abstractmethod
    def open(self, key: Path) -> Run:
        """The run at ``key``, read once; its ``refresh()`` reads what is new."""


@dataclass
class Batch:
    """What one read of a foreign log found since the read before."""

    series: list[SourceSeries] = field(default_factory=list)
    """New rows, under the names the log uses (several pieces of one name may come, in order)."""
    config: dict[str, Any] | None = None
    """The whole config, when it changed since the last read (``None``: unchanged)."""
    hparams: dict[str, Any] | None = None
    """TensorBoard-style ``hparams`` (``{"params": ..., "metrics": ...}``), given with ``config`` when they changed."""
    notes: list[str] = field(default_factory=list)
    """What the user should know about how the log was read (shown as the run's warnings)."""
    unreadable: str | None = None
    """The log cannot be read at all: what to do, in a few words (``install tuidiag[tensorboard]``); the run then
    reads ``unreadable``, never healthy, and the full reason goes to ``notes``."""
    restart: bool = False
    """The log was rewritten from the start: drop every row read before this batch."""
    ended: str | None = None
    """``finished`` or ``failed`` when the log itself says the run ended."""
    last_write: float | None = None
    """Modification time of the newest file read (the run counts as running while it is recent)."""
    name: str | None = None
    """The run's name when the log names it."""
    writers: list[tuple[str, int]] = field(default_factory=list)
    """(host, pid) of the processes the log's file names say wrote it (TensorBoard's event files name them)."""


class Tail(ABC):
    """An incremental reader of one foreign run: each :meth:`read` returns only what is new."""

    @abstractmethod
    def read(self) -> Batch:
        """Read from where the last call stopped; never raises on bad data (it becomes a note)."""


def source_kind(manifest: dict[str, Any]) -> str:
    """The kind a run was read as: a foreign run's manifest names it, a tuidiag run's does not."""
    source = manifest.get("source")
    kind = source.get("kind") if isinstance(source, dict) else None
    return kind if isinstance(kind, str) and source.get("live") else KIND_TUIDIAG

"""What the monitor's model keeps per run directory: its reader, last summary, health and diagnosis state.

:class:`RunSlot` is one run of :class:`tuidiag.viewmodel.model.RunsModel`, each under
its own lock; :class:`Diagnosed` is a live diagnosis with what it covered and cost.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuidiag.diagnosis import Diagnosis
from tuidiag.sources import KIND_TUIDIAG
from tuidiag.store import Run
from tuidiag.store.envelope_run import EnvelopeRun
from tuidiag.store.tail_summary import TailSummary
from tuidiag.viewmodel.read_pool import ReadTask
from tuidiag.viewmodel.snapshot import PENDING, Health, RunSummary


@dataclass
class Diagnosed:
    """A run's live diagnosis, with the rows and events it covered, when it was computed and what it cost."""

    rows: int
    events: int
    diagnosis: Diagnosis
    at: float
    """``time.monotonic()`` when computed."""
    cost: float
    """CPU seconds it took."""
    jobs: tuple[str, ...] = ()
    """The run's job results it covered (:func:`tuidiag.store.job_results.results_mark`)."""


@dataclass
class RunSlot:
    """One run directory: its reader, its last summary, and why its last read failed."""

    path: Path
    kind: str = KIND_TUIDIAG
    """The kind of run it was found as (:mod:`tuidiag.sources.registry`): how it is opened."""
    run: Run | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while the run is read or its view is built: nothing else touches ``run`` then."""
    task: ReadTask | None = None
    queued: float = 0.0
    """``time.monotonic()`` when ``task`` was queued."""
    summary: RunSummary | None = None
    problem: str | None = None
    """Why the last read raised (``None``: it did not)."""
    failed_at: float = -math.inf
    manifest: dict[str, Any] = field(default_factory=dict)
    tail: TailSummary | None = None
    """The recorder's summary of the newest rows, when ``run.json`` has a current one: the overview row comes
    from it and the manifest alone (``None``: a run of an older writer, read whole as before)."""
    health: Health = PENDING
    warnings: tuple[str, ...] = ()
    """What the last whole read of the run (for its diagnosis, here or in the cache's process) could not read."""
    diagnosed: tuple[int, int, tuple[str, ...]] | None = None
    """(``tail.seq``, ``tail.rows``, the job results' names) that ``health`` covers: a new job result is
    diagnosed again like new rows."""
    diagnosing: ReadTask | None = None
    events_mark: tuple[tuple[int, int], ...] = ()
    """The newest events shards when the run was last diagnosed: an event is diagnosed at once."""
    want_whole: bool = False
    """The run view wants the whole diagnosis, not only the badge a cache entry may hold."""
    envelopes: EnvelopeRun | None = None
    """The run's envelopes, while its view is drawn from them (:meth:`RunsModel.detail`)."""
    files_mark: tuple[int, ...] | None = None
    """What the run's files were (``model._files_mark``) when ``tail`` was read from its ``run.json``."""
    behind_since: float | None = None
    """``time.monotonic()`` when its ``run.json`` summary was first seen behind its newest shard (``None``: it is not)."""

"""Immutable snapshots of runs, built on a worker thread and handed to the UI.

The UI never touches a ``Run`` (which a worker may be refreshing): it renders these
frozen dataclasses, built from downsampled arrays and copies.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tuidiag.diagnosis import Diagnosis
from tuidiag.format import GRAD_NORM_TOTAL, LOSS, LR_GROUP0
from tuidiag.viewmodel.downsample import tail_spark
from tuidiag.sources import KIND_TUIDIAG, source_kind
from tuidiag.store import Event, Run
from tuidiag.store.manifest import effective_status
from tuidiag.store.progress import Progress, progress
from tuidiag.store.recorder_losses import manifest_losses, run_losses
from tuidiag.store.tail_summary import LR_FIRST, TailSummary, steps_per_second

if TYPE_CHECKING:
    from tuidiag.viewmodel.chart_clock import Clock
    from tuidiag.viewmodel.ranks import RankLines

STALLED_AFTER = 120.0
"""A running run with no new data for this many seconds shows as stalled."""
STATUS_UNREADABLE = "unreadable"
"""A run whose read raised, or of which nothing could be read (no manifest, no rows, files skipped)."""
STATUS_READING = "reading"
"""A run whose first read has not finished yet."""


@dataclass(frozen=True)
class RunSummary:
    """One row of the overview."""

    key: str
    name: str
    status: str
    step: int | None
    steps_per_s: float | None
    last_loss: float | None
    spark: tuple[float, ...]
    lr: float | None
    grad_norm: float | None
    health: str
    health_severity: str
    health_confidence: float
    data_age: float | None
    warnings: tuple[str, ...] = ()
    recorder_losses: str = ""
    """What the recorder rejected or lost (``"1 value rejected"``); empty when nothing."""
    problem: str = ""
    """What could not be read: the whole run's reason (status ``unreadable``), or the files
    skipped of a run read in part; empty when everything was read."""
    source: str = KIND_TUIDIAG
    """The kind of run (``tuidiag``, ``tensorboard``, ``wandb``, ``csv``): what wrote it."""
    logged_to: int | None = None
    """The highest logged step when it is beyond ``step`` (values logged at explicit later steps), else ``None``."""

    def step_text(self, grouped: bool = True) -> str:
        """The step as ``tuidiag ls`` and ``tuidiag status`` show it (:class:`~tuidiag.store.progress.Progress`)."""
        return Progress(self.step, self.logged_to).text(grouped)


LABEL_CELLS = 30
"""The cells of a line's label in a chart's legend: longer labels are cut there."""


@dataclass(frozen=True)
class Chart:
    """A chart's lines (already downsampled), non-finite steps and an optional threshold."""

    title: str
    lines: tuple[tuple[str, np.ndarray, np.ndarray], ...]
    nonfinite_steps: tuple[int, ...] = ()
    threshold: float | None = None
    log_default: bool = False
    actions: tuple[int, ...] = ()
    """Steps of live actions (LR change, clipping, checkpoint), marked so before/after can be compared."""
    failed_actions: tuple[int, ...] = ()
    """Steps of live actions the steps after them did not show (undone by a scheduler, clipping that missed)."""
    resumes: tuple[int, ...] = ()
    """Steps at which a later session continued the run (another process recorded from there on)."""
    clock: "Clock | None" = None
    """(steps, seconds since the first step) of the run, for a wall-clock x axis; None when unknown."""
    styles: tuple[int, ...] = ()
    """The colour and glyph of each line, by index (empty: each line its own, in order); the legend names
    the lines that share one together (the two edges of a band)."""
    window: tuple[int, int] | None = None
    """The steps a zoom shows (None: all): a mark, the event marker or the cursor outside it is not drawn,
    so it cannot widen the step axis past the window."""


@dataclass(frozen=True)
class LayerGrid:
    """Per-layer gradient norms by time: ``log10`` medians, layers x time bins (NaN: no data)."""

    layers: tuple[str, ...]
    log_norms: np.ndarray
    step_edges: np.ndarray


@dataclass(frozen=True)
class RunDetail:
    """Everything the run view shows, as of step ``at`` (None: live)."""

    summary: RunSummary
    charts: dict[str, Chart]
    layers: LayerGrid
    diagnosis: Diagnosis
    events: tuple[Event, ...]
    system: tuple[tuple[str, str], ...]
    at: int | None = None
    steps: tuple[int, int] = (0, 0)
    first_steps: dict[str, int] = field(default_factory=dict)
    marks: tuple[int, ...] = ()
    """Steps of every event and finding onset in the whole run (replay jumps to them)."""
    jobs: tuple[tuple[str, str], ...] = ()
    """(job, rendered result) of the newest result of each job (``RUN/jobs/`` or, for a read-only run, the cache)."""
    ranks: "RankLines | None" = None
    """Per-rank and spread lines of the loss and gradient-norm charts (multi-rank runs only)."""
    clip_threshold: float | None = None
    """The gradient-clipping ``max_norm`` in force at the newest step (:attr:`RunView.clip_threshold`; None: no clipping)."""
    samples: np.ndarray | None = None
    """Steps with a recorded loss, ascending (a read-only copy): replay's left/right move from one to the next."""
    dists: tuple[str, ...] = ()
    """The run's distributions (``name`` of the ``name/q0`` ... rows), in the order the distribution tab cycles
    through them; ``charts["dist"]`` shows one of them."""


def summarize(run: Run, diagnosis: Diagnosis, now: float | None = None, spark: tuple[float, ...] | None = None) -> RunSummary:
    """The overview row of ``run`` with its top finding as the health badge.

    ``spark``: ``tail_spark`` of the run's loss, when the caller kept it from before.
    """
    now = time.time() if now is None else now
    loss = run.series(LOSS)
    top = diagnosis.top
    age = now - float(loss.wall_times[-1]) if len(loss) else None
    status = run.status
    if status == "running" and age is not None and age > STALLED_AFTER:
        status = "stalled"
    if run.warnings and not run.manifest and not run.rows_read and not run.events:
        status = STATUS_UNREADABLE  # nothing of it could be read
    problem = _problem(run.warnings)
    if run.unreadable is not None:  # a log that needs a missing package: what to do, in the status cell
        status, problem = STATUS_UNREADABLE, run.unreadable
    reached = progress(run.manifest, run.last_step)
    return RunSummary(
        key=str(run.path), name=run.name, status=status, step=reached.step, logged_to=reached.logged_to,
        steps_per_s=run_speed(run), last_loss=loss.last,
        spark=tuple(tail_spark(loss.values)) if spark is None else spark, lr=run.series(LR_GROUP0).last,
        grad_norm=run.series(GRAD_NORM_TOTAL).last, health=top.code,
        health_severity=top.severity, health_confidence=top.confidence, data_age=age,
        warnings=tuple(run.warnings), recorder_losses=run_losses(run).text(), problem=problem,
        source=source_kind(run.manifest),
    )


@dataclass(frozen=True)
class Health:
    """A run's top finding as the overview shows it (from a diagnosis, or the diagnosis cache)."""

    code: str
    title: str
    severity: str
    confidence: float


PENDING = Health("-", "diagnosing", "info", 0.0)
"""The badge of a run whose diagnosis has not been computed yet."""


def summarize_tail(path: Path, manifest: dict[str, Any], tail: TailSummary, health: Health, now: float | None = None,
                   warnings: tuple[str, ...] = ()) -> RunSummary:
    """The overview row of a run from its ``run.json`` alone (its manifest and the recorder's summary of the
    newest rows): no shard is read, whatever the run's length. ``warnings``: what the last whole read of the
    run (its diagnosis) could not read."""
    now = time.time() if now is None else now
    loss, lr, grad = (tail.last.get(name) for name in (LOSS, LR_FIRST, GRAD_NORM_TOTAL))
    age = now - loss.wall_time if loss is not None else None
    status = effective_status(manifest, now)
    if status == "running" and age is not None and age > STALLED_AFTER:
        status = "stalled"
    reached = progress(manifest, None)
    name = manifest.get("name")
    return RunSummary(
        key=str(path), name=name if isinstance(name, str) and name else path.name, status=status,
        step=reached.step, logged_to=reached.logged_to, steps_per_s=tail.steps_per_s,
        last_loss=loss.value if loss else None, spark=tail.spark, lr=lr.value if lr else None,
        grad_norm=grad.value if grad else None, health=health.code,
        health_severity=health.severity, health_confidence=health.confidence, data_age=age,
        recorder_losses=manifest_losses(manifest).text(), warnings=warnings, problem=_problem(list(warnings)),
    )


def _problem(warnings: list[str]) -> str:
    return "; ".join(warnings)


def unreadable_summary(key: str, name: str, reason: str, source: str = KIND_TUIDIAG) -> RunSummary:
    """The overview row of a run whose read raised: its reason instead of its data."""
    return _placeholder(key, name, STATUS_UNREADABLE, reason, source)


def reading_summary(key: str, name: str, seconds: float, source: str = KIND_TUIDIAG) -> RunSummary:
    """The overview row of a run whose first read is still going on after ``seconds``."""
    return _placeholder(key, name, STATUS_READING, f"still reading after {seconds:.0f} s" if seconds >= 1 else "", source)


def _placeholder(key: str, name: str, status: str, problem: str, source: str) -> RunSummary:
    return RunSummary(key=key, name=name, status=status, step=None, steps_per_s=None, last_loss=None, spark=(),
                      lr=None, grad_norm=None, health="-", health_severity="info",
                      health_confidence=0.0, data_age=None, problem=problem, source=source)


def run_speed(run: Run, at: int | None = None) -> float | None:
    """The run's steps/s as of step ``at`` (None: its end): the one figure the overview and the run view show.

    Steps advanced per second of wall-clock time over the newest :data:`~tuidiag.store.tail_summary.PACE_WINDOW` seconds of the
    loss series: the throughput, data loading, evaluation and logging pauses included (not the
    inverse of a median step time, which leaves pauses out)."""
    loss = run.series(LOSS)
    steps, walls = loss.steps, loss.wall_times
    if at is not None and len(steps) and steps[-1] > at:
        cut = int(np.searchsorted(steps, at, side="right"))
        steps, walls = steps[:cut], walls[:cut]
    return steps_per_second(steps, walls)


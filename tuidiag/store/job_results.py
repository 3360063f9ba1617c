"""Job results: ``RUN/jobs/<job>-<UTC timestamp>.json``, written atomically, or in tuidiag's cache.

A run that ``run.json`` marks ``"read_only": true`` (the demo runs shipped with tuidiag) or whose
directory cannot be written keeps its results under the cache directory instead
(:func:`cached_results_dir`: ``<cache>/jobs/<digest of the run's path>/``, as the monitor's
summaries are), so that running a job leaves the run's directory exactly as it was; readers
list both places.

Each file is one JSON object (no NaN/Infinity literals: non-finite floats are
stored as the strings ``"nan"``, ``"inf"``, ``"-inf"``)::

    {"job": "lr_find", "version": 1, "created": 1715379302.1, "run": "exp1", "step": 593,
     "factory": "train:build", "device": "cuda", "result": {...}}

``step`` is the training step at which the job ran (a live job: the step it ran
after; a job run from the factory: the run's last recorded step then). A result
counts only at and after that step: ``latest_result(..., at=400)`` never returns
a result made at step 593, so a diagnosis or a replay as of step 400 cannot see it.

Like every file of a run it is written under a hidden ``.<name>.<random>.partial`` name
in the same directory and renamed into place (:mod:`tuidiag.store.safe_write`), so
readers see a whole file or none and must ignore names starting with ``.``. This
module does not need torch, and imports numpy only where it reads a run's loss (``tuidiag status``
lists result names through :func:`results_mark` and stays numpy-free).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Callable

from tuidiag.format import LOSS
from tuidiag.store.cache_dir import cache_root, run_key
from tuidiag.store.limits import MAX_JOB_RESULT_BYTES, read_json_bounded
from tuidiag.store.manifest import jsonable, read_manifest, write_manifest
from tuidiag.store.safe_write import write_text_atomic

JOBS_DIR = "jobs"
RESULT_VERSION = 1


def result_name(job: str, now: float) -> str:
    """``<job>-YYYYmmdd-HHMMSS.mmmZ.json`` for the UTC time ``now``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{job}-{stamp}.{int(now * 1000) % 1000:03d}Z.json"


READ_ONLY = "read_only"
"""The ``run.json`` key that marks a run tuidiag writes nothing into (its job results go to the cache)."""


def mark_read_only(run_dir: str | os.PathLike[str]) -> None:
    """Mark a finished run read-only in its ``run.json``: jobs run on it later keep their results in the cache."""
    manifest = read_manifest(Path(run_dir))
    write_manifest(Path(run_dir), {**manifest, READ_ONLY: True})


def marked_read_only(run_dir: str | os.PathLike[str]) -> bool:
    """Whether ``run.json`` marks the run read-only (no readable ``run.json``: not marked)."""
    try:
        return read_manifest(Path(run_dir)).get(READ_ONLY) is True
    except (OSError, ValueError):
        return False


def cached_results_dir(run_dir: str | os.PathLike[str]) -> Path:
    """Where the results of jobs run on a read-only run are kept: ``<cache>/jobs/<run_key>/``."""
    return cache_root() / JOBS_DIR / run_key(Path(run_dir))


def keeps_own_files(run_dir: str | os.PathLike[str], subdir: str) -> bool:
    """Whether tuidiag may write into ``RUN/<subdir>``: not when ``run.json`` marks the run read-only, nor when
    the directory (or its ``subdir``) cannot be written by this process."""
    run_dir = Path(run_dir)
    if marked_read_only(run_dir):
        return False
    own = run_dir / subdir
    return os.access(own if own.is_dir() else run_dir, os.W_OK)


def keeps_own_results(run_dir: str | os.PathLike[str]) -> bool:
    """Whether a new result goes into ``RUN/jobs`` (:func:`keeps_own_files`)."""
    return keeps_own_files(run_dir, JOBS_DIR)


def save_result(run_dir: str | os.PathLike[str], job: str, result: dict[str, Any], **meta: Any) -> Path:
    """Write ``result`` (with ``meta`` fields such as factory and device) to ``RUN/jobs/``, or to
    :func:`cached_results_dir` when the run keeps none of its own (:func:`keeps_own_results`); return the path."""
    if keeps_own_results(run_dir):
        try:
            return _save_in(Path(run_dir) / JOBS_DIR, Path(run_dir), job, result, meta)
        except PermissionError:  # the directory turned out unwritable after all: the cache keeps it
            pass
    directory = cached_results_dir(run_dir)
    return _save_in(directory, directory.parent, job, result, meta)


def _save_in(directory: Path, root: Path, job: str, result: dict[str, Any], meta: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    now = time.time()
    path = directory / result_name(job, now)
    for n in range(1, 1000):
        if not path.exists():
            break
        path = directory / result_name(job, now).replace(".json", f"-{n}.json")
    payload = {"job": job, "version": RESULT_VERSION, "created": now, **jsonable(meta), "result": jsonable(result)}
    return write_text_atomic(path, json.dumps(payload, allow_nan=False, indent=1), root=root)


def list_results(run_dir: str | os.PathLike[str], job: str | None = None) -> list[Path]:
    """Result files of ``job`` (or of every job) in ``RUN/jobs`` and the run's cached results, oldest first;
    temporary files are skipped."""
    files = []
    for directory in (Path(run_dir) / JOBS_DIR, cached_results_dir(run_dir)):
        if directory.is_dir():
            files += [p for p in directory.glob("*.json") if not p.name.startswith(".")]
    if job is not None:
        files = [p for p in files if p.name.startswith(f"{job}-")]
    return sorted(files, key=_saved_order)


def results_mark(run_dir: str | os.PathLike[str]) -> tuple[str, ...]:
    """The names of every result file of the run, in both places (:func:`list_results`): changes when a job
    saves a result, so whatever a diagnosis derived from the run's results keys on it too."""
    return tuple(p.name for p in list_results(run_dir))


def _saved_order(path: Path) -> tuple[str, int, str]:
    """``(UTC stamp, n, name)`` of ``<job>-<stamp>Z[-n].json``: results saved in the same millisecond get ``-n``."""
    rest = path.name.split("-", 1)[-1]
    stamp, _, tail = rest.partition("Z")
    number = tail[1:].split(".")[0] if tail.startswith("-") else ""
    return stamp, int(number) if number.isdigit() else 0, path.name


def read_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load one result file (at most :data:`~tuidiag.store.limits.MAX_JOB_RESULT_BYTES`; ``ValueError`` otherwise)."""
    return read_json_bounded(path, MAX_JOB_RESULT_BYTES)


_PARSED: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}
"""Results already read, by path, with the (mtime, size) they had: the monitor and the diagnosis
ask for the newest results on every refresh, and result files are never rewritten in place."""


StepOf = Callable[[Path, dict[str, Any]], "int | None"]
"""``step_of(path, record)``: the step at which a result saved without ``step`` was made (None: unknown)."""


def result_step(path: Path, record: dict[str, Any], step_of: StepOf | None = None) -> int | None:
    """The step at which the result in ``path`` was made: its ``step``, else ``step_of``'s answer."""
    step = record.get("step")
    if isinstance(step, int) and not isinstance(step, bool):
        return step
    return step_of(path, record) if step_of is not None else None


@dataclass(frozen=True)
class JobRecord:
    """One saved job result, as data: its job, the step from which it counts (None: unknown) and the saved object."""

    job: str
    step: int | None
    record: Mapping[str, Any]
    """The whole saved JSON object (``result`` holds the job's own fields); shared: do not modify it."""


def job_records(run: Any, jobs: Iterable[str] | None = None) -> tuple[JobRecord, ...]:
    """Every readable result of ``jobs`` (default: every registered job kind) in ``RUN/jobs/`` of ``run`` (a
    ``store.Run``), each job's oldest saved first, dated by :func:`step_from_run`: what a diagnosis is given
    (it reads no file itself)."""
    if jobs is None:
        from tuidiag import job_kinds

        jobs = job_kinds.names()
    return _records(Path(run.path), jobs, step_from_run(run))


def _records(run_dir: Path, jobs: Iterable[str], step_of: StepOf | None) -> tuple[JobRecord, ...]:
    found = []
    for job in jobs:
        for path in list_results(run_dir, job):
            record = _parsed(path)
            if record is not None:
                found.append(JobRecord(job, result_step(path, record, step_of), record))
    return tuple(found)


def newest_counting(records: Iterable[JobRecord], job: str, at: int | None = None) -> JobRecord | None:
    """Of ``records`` (each job's oldest saved first), the newest of ``job`` that counts at step ``at``: the one
    made last at or before ``at`` (one whose step is unknown never counts then; of two made at one step, the
    one saved last); without ``at``, the one saved last."""
    best: JobRecord | None = None
    for record in (r for r in records if r.job == job):
        if at is None or (record.step is not None and record.step <= at and (best is None or record.step >= best.step)):
            best = record
    return best


def latest_result(run_dir: str | os.PathLike[str], job: str, at: int | None = None,
                  step_of: StepOf | None = None) -> dict[str, Any] | None:
    """The newest readable result of ``job`` that counts at step ``at`` (:func:`newest_counting`), or None.
    Shared with other callers: do not modify it."""
    found = newest_counting(_records(Path(run_dir), (job,), step_of), job, at)
    return dict(found.record) if found is not None else None


def _parsed(path: Path) -> dict[str, Any] | None:
    """The result in ``path`` (read again only when the file changed), or None when unreadable."""
    try:
        info = path.stat()
        stamp = (info.st_mtime_ns, info.st_size)
        cached = _PARSED.get(path)
        if cached is None or cached[0] != stamp:
            cached = _PARSED[path] = (stamp, read_result(path))
        return cached[1]
    except (OSError, ValueError):
        return None


def step_from_run(run: Any) -> StepOf:
    """How to date results saved without ``step`` (by older versions) in ``run`` (a ``store.Run``):
    the step of the training's ``job`` event that names the file, else the last loss step
    recorded before the result's ``created`` time (None before the first one)."""

    def step_of(path: Path, record: dict[str, Any]) -> int | None:
        for event in run.events:
            if event.kind == "job" and event.data.get("result") == path.name:
                return int(event.step)
        created = record.get("created")
        loss = run.series(LOSS)
        if not isinstance(created, (int, float)) or not len(loss):
            return None
        import numpy as np  # here, not at the top: tuidiag status reads results_mark and stays numpy-free

        before = np.flatnonzero(loss.wall_times <= created)
        return int(loss.steps[before[-1]]) if len(before) else None

    return step_of

"""Job results in the run directory: ``RUN/jobs/<job>-<UTC timestamp>.json``, written atomically.

Each file is one JSON object (no NaN/Infinity literals: non-finite floats are
stored as the strings ``"nan"``, ``"inf"``, ``"-inf"``)::

    {"job": "lr_find", "version": 1, "created": 1715379302.1, "run": "exp1",
     "factory": "train:build", "device": "cuda", "result": {...}}

Like every file of a run it is written under a ``.<name>.<pid>.partial`` name in
the same directory and ``os.replace``-d into place, so readers see a whole file or
none and must ignore names starting with ``.``. This module does not need torch.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tuidiag.store.limits import MAX_JOB_RESULT_BYTES, read_json_bounded
from tuidiag.store.manifest import jsonable

JOBS_DIR = "jobs"
RESULT_VERSION = 1
JOB_NAMES = ("lr_find", "nan_hunt", "overfit_batch", "sharpness")


def result_name(job: str, now: float) -> str:
    """``<job>-YYYYmmdd-HHMMSS.mmmZ.json`` for the UTC time ``now``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{job}-{stamp}.{int(now * 1000) % 1000:03d}Z.json"


def save_result(run_dir: str | os.PathLike[str], job: str, result: dict[str, Any], **meta: Any) -> Path:
    """Write ``result`` (with ``meta`` fields such as factory and device) to ``RUN/jobs/``; return the path."""
    directory = Path(run_dir) / JOBS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    now = time.time()
    path = directory / result_name(job, now)
    for n in range(1, 1000):
        if not path.exists():
            break
        path = directory / result_name(job, now).replace(".json", f"-{n}.json")
    payload = {"job": job, "version": RESULT_VERSION, "created": now, **jsonable(meta), "result": jsonable(result)}
    tmp = directory / f".{path.name}.{os.getpid()}.partial"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, allow_nan=False, indent=1)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def list_results(run_dir: str | os.PathLike[str], job: str | None = None) -> list[Path]:
    """Result files of ``job`` (or of every job), oldest first; temporary files are skipped."""
    directory = Path(run_dir) / JOBS_DIR
    if not directory.is_dir():
        return []
    files = [p for p in directory.glob("*.json") if not p.name.startswith(".")]
    if job is not None:
        files = [p for p in files if p.name.startswith(f"{job}-")]
    return sorted(files, key=lambda p: (p.name.split("-", 1)[1], p.name))


def read_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load one result file (at most :data:`~tuidiag.store.limits.MAX_JOB_RESULT_BYTES`; ``ValueError`` otherwise)."""
    return read_json_bounded(path, MAX_JOB_RESULT_BYTES)


_PARSED: dict[Path, tuple[tuple[int, int], dict[str, Any]]] = {}
"""Results already read, by path, with the (mtime, size) they had: the monitor and the diagnosis
ask for the newest results on every refresh, and result files are never rewritten in place."""


def latest_result(run_dir: str | os.PathLike[str], job: str) -> dict[str, Any] | None:
    """The newest readable result of ``job``, or None (shared with other callers: do not modify it)."""
    for path in reversed(list_results(run_dir, job)):
        try:
            info = path.stat()
            stamp = (info.st_mtime_ns, info.st_size)
            cached = _PARSED.get(path)
            if cached is None or cached[0] != stamp:
                cached = _PARSED[path] = (stamp, read_result(path))
            return cached[1]
        except (OSError, ValueError):
            continue
    return None

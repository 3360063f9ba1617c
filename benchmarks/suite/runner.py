"""Record the suite into a cache directory, in parallel worker processes, retraining only what is missing."""

from __future__ import annotations

import json
import shutil
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from benchmarks.suite.train import Spec

DONE = ".suite-done"
"""Marker written once a scenario is recorded; holds the spec it was recorded from."""


LABELS = ("split", "acceptable", "false_alarm", "onset")
"""Spec fields that do not change the training (relabelling, or a fault onset set, does not retrain)."""
LATER_FIELDS = {"resume_at": None, "resume_from": None, "accumulate": 1}
"""Spec fields added after recordings were cached: left out of the fingerprint while at their default."""


def _fingerprint(spec: Spec) -> str:
    training = {k: v for k, v in spec.__dict__.items()
                if k not in LABELS and not (k in LATER_FIELDS and v == LATER_FIELDS[k])}
    return json.dumps(training, sort_keys=True, default=repr)


def is_cached(spec: Spec, root: Path) -> bool:
    """True when ``root/spec.name`` holds a finished recording of exactly this spec."""
    marker = root / spec.name / DONE
    return marker.exists() and marker.read_text() == _fingerprint(spec)


def _record_one(spec: Spec, root: str) -> tuple[str, float]:
    import torch

    from benchmarks.suite.train import record

    torch.set_num_threads(1)
    run_dir = Path(root) / spec.name
    shutil.rmtree(run_dir, ignore_errors=True)
    start = time.perf_counter()
    record(spec, run_dir)
    (run_dir / DONE).write_text(_fingerprint(spec))
    return spec.name, time.perf_counter() - start


def record_all(specs: list[Spec], root: Path, retrain: bool = False, workers: int = 2, verbose: bool = True) -> dict[str, Path]:
    """Record every spec not cached under ``root`` (all with ``retrain``); returns name -> run dir."""
    root.mkdir(parents=True, exist_ok=True)
    todo = [s for s in specs if retrain or not is_cached(s, root)]
    if todo:
        start = time.perf_counter()
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            for name, seconds in pool.map(_record_one, todo, [str(root)] * len(todo)):
                if verbose:
                    print(f"  recorded {name:<32} {seconds:5.1f} s", flush=True)
        if verbose:
            print(f"recorded {len(todo)} scenarios in {time.perf_counter() - start:.0f} s on {workers} workers", flush=True)
    return {s.name: root / s.name for s in specs}

"""Where ``tuidiag report`` writes when not told (``-o DIR``): ``RUN/report``, except for a run tuidiag must
leave as it is (``run.json`` marks it ``"read_only": true``, or this user cannot write its directory): then
``<cache>/reports/<digest of the run's path>/``, as job results of such a run go to the cache
(:mod:`tuidiag.store.job_results`)."""

from __future__ import annotations

import os
from pathlib import Path

from tuidiag.store.cache_dir import cache_root, run_key
from tuidiag.store.job_results import keeps_own_files

REPORT_DIR = "report"
REPORTS_CACHE_DIR = "reports"


def default_report_dir(run_dir: str | os.PathLike[str]) -> tuple[Path, bool]:
    """The directory a report of ``run_dir`` goes to by default, and whether it is in the cache (the run is
    read-only or its directory not writable)."""
    run_dir = Path(run_dir)
    if keeps_own_files(run_dir, REPORT_DIR):
        return run_dir / REPORT_DIR, False
    return cache_root() / REPORTS_CACHE_DIR / run_key(run_dir), True

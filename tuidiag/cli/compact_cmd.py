"""``tuidiag compact RUN``: merge a finished run's small shards and write the envelope summaries its shards lack.

Runs recorded before summaries existed (or whose writer died before closing) open
without them: the monitor computes the envelopes from the rows on first open and
keeps them in its cache. This command writes them into the run instead
(``summaries/``, :mod:`tuidiag.store.summary_files`), so every reader of the run
opens it at the cost of its summaries. A live run's shards are not merged (its
writer does that); their summaries are written all the same. A run tuidiag must leave as it is
(``run.json`` marks it ``"read_only"``, or its directory is not writable) is neither merged nor written
into: its summaries go to the cache, where the monitor reads them as it reads a run's own.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tuidiag.cli.run_argument import fail
from tuidiag.format import EVENTS_DIR, METRICS_DIR, STATUS_RUNNING, SUMMARIES_DIR
from tuidiag.store.discovery import is_run_dir, list_shards
from tuidiag.store.job_results import keeps_own_files
from tuidiag.store.manifest import effective_status, read_manifest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``compact`` arguments."""
    parser.add_argument("run", help="a run directory")


def run(args: argparse.Namespace) -> int:
    """Merge, write summaries, remove summaries of shards that are gone; print what was done (exit 2: not a run)."""
    path = Path(args.run)
    if not path.is_dir() or not is_run_dir(path):
        return fail("compact", f"{path} is not a tuidiag run (no run.json or metrics/ inside)")
    from tuidiag.store.shards import compact_all
    from tuidiag.store.summary_files import build_missing

    try:
        live = effective_status(read_manifest(path)) == STATUS_RUNNING
    except (OSError, ValueError):
        live = False
    if not keeps_own_files(path, SUMMARIES_DIR):
        return _into_cache(path)
    merged = 0
    try:
        if not live:
            ranks = {shard.rank for table_dir in (METRICS_DIR, EVENTS_DIR) for shard, _ in list_shards(path / table_dir)}
            merged = sum(compact_all(path, rank) for rank in sorted(ranks))
        written = build_missing(path)
        shards = {p.name for _, p in list_shards(path / METRICS_DIR)}
        stale = [p for _, p in list_shards(path / SUMMARIES_DIR) if p.name not in shards]
        for orphan in stale if not live else []:
            orphan.unlink(missing_ok=True)
        whole = False
        if not live:
            from tuidiag.store.whole_writer import write_whole

            metric_ranks = {shard.rank for shard, _ in list_shards(path / METRICS_DIR)}
            whole = len(metric_ranks) == 1 and write_whole(path, metric_ranks.pop())
    except OSError as exc:
        return fail("compact", f"cannot write into {path}: {exc}")
    note = " (live run: shards not merged)" if live else ""
    print(f"{path}: merged {merged} shards; wrote {written} summaries{' and the whole-run file' if whole else ''}{note}")
    return 0


def _into_cache(path: Path) -> int:
    """A read-only run: write its missing summaries to the cache, touch nothing in it."""
    from tuidiag.store.summary_files import build_missing

    try:
        written = build_missing(path, in_cache=True)
    except OSError as exc:
        return fail("compact", f"cannot write into the cache: {exc}")
    print(f"{path}: read-only run, left as it is; wrote {written} summaries to the cache (the monitor reads them)")
    return 0

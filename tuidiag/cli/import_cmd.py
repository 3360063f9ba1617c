"""``tuidiag import {tensorboard,keras-history,csv} SRC OUT [--name NAME] [--force]``: runs recorded without tuidiag.

Prints, for each run written, how its metric names were mapped onto tuidiag's
conventions and which were kept as they were. Exit 2 when the source cannot be
read, holds nothing to import, or a run would be overwritten without ``--force``;
the message then names a free ``--name`` first (the run there may be another
experiment), and ``--force`` only as the way to replace it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path, PurePath
from typing import Callable

from tuidiag.cli.run_argument import fail
from tuidiag.importers import (
    ImportSourceError, RunExistsError, SourceRun, WrittenRun, check_target, read_csv_log, read_keras_history,
    read_tensorboard, write_run,
)
from tuidiag.importers.run_writer import target_of
from tuidiag.sources.foreign_run import RECENT_WRITE
from tuidiag.store.manifest import read_manifest
from tuidiag.text.safe import clean

Reader = Callable[[str, "str | None"], list[SourceRun]]

MAX_NAME_TRIES = 1000
"""``NAME-2`` ... ``NAME-1000`` are tried for a free ``--name`` to suggest."""

SOURCES: dict[str, tuple[str, str, str, Reader]] = {
    "tensorboard": (
        "TensorBoard event files (torch SummaryWriter, TensorFlow, Keras); one run per directory of event files",
        "LOGDIR", "a TensorBoard log directory (searched recursively) or one event file", read_tensorboard,
    ),
    "keras-history": (
        "a Keras History saved as JSON (loss, val_loss, accuracy, val_accuracy ...; epochs as steps)",
        "JSON", "the history file", lambda src, name: [read_keras_history(src, name)],
    ),
    "csv": (
        "a CSV log: Lightning's CSVLogger metrics.csv or Keras' CSVLogger file",
        "CSV", "the CSV file", lambda src, name: [read_csv_log(src, name)],
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register ``import`` and one sub-subcommand per source format."""
    sub = parser.add_subparsers(dest="source", metavar="SOURCE", required=True)
    for source, (help_text, metavar, src_help, _) in SOURCES.items():
        command = sub.add_parser(source, help=help_text, description=help_text)
        command.add_argument("src", metavar=metavar, help=src_help)
        command.add_argument("out", metavar="OUT", help="directory the runs are written under (e.g. runs/)")
        command.add_argument("--name", help="the run's directory below OUT (default: from the source's name)")
        command.add_argument("--force", action="store_true", help="replace runs that already exist")


def run(args: argparse.Namespace) -> int:
    """Import; exit 0 when every run with scalars was written, 2 otherwise."""
    reader = SOURCES[args.source][3]
    try:
        runs = reader(args.src, args.name)
    except ImportSourceError as exc:
        return fail("import", str(exc))
    for empty in (r for r in runs if not r.series):
        print(clean(f"skipped {empty.source.get('path')}: no scalar values in it"))
    runs = [r for r in runs if r.series]
    if not runs:
        return fail("import", f"{args.src}: no scalar values to import")
    return write_all(runs, Path(args.out), args.force, args.name)


def write_all(runs: list[SourceRun], out: Path, force: bool, name: str | None = None) -> int:
    """Check every target first (nothing is written when one would be overwritten), then write and report."""
    try:
        for source_run in runs:
            check_target(target_of(source_run, out), force)
        written = [(write_run(source_run, out, force), source_run) for source_run in runs]
    except RunExistsError as exc:
        return fail("import", exists_message(exc, runs, out, name))
    except OSError as exc:
        return fail("import", f"cannot write under {out}: {exc}")
    for result, source_run in written:
        print(summary(result, source_run))
    next_step = f"tuidiag diagnose {written[0][0].path}" if len(written) == 1 else f"tuidiag ls {out}"
    print(clean(f"next: {next_step}"))
    return 0


def exists_message(exc: RunExistsError, runs: list[SourceRun], out: Path, name: str | None) -> str:
    """What is in the way and what to do: a free ``--name`` first; ``--force`` only to replace a run (never other files)."""
    current = PurePath(name) if name else PurePath(runs[0].relative.parts[0])
    free = free_name(current, out)
    beside = f"import beside it with --name {free}" if free is not None else "import under another --name"
    if not exc.replaceable:
        return f"{exc}; {beside}"
    return f"{exc}{_what_is_there(exc.target)}; to keep it, {beside}; to replace it, pass --force"


def free_name(name: PurePath, out: Path) -> str | None:
    """The first ``NAME-2``, ``NAME-3``... with nothing under ``out`` yet, else ``None``."""
    if not name.name:
        return None
    for n in range(2, MAX_NAME_TRIES + 1):
        candidate = name.with_name(f"{name.name}-{n}")
        if not (out / candidate).exists():
            return candidate.as_posix()
    return None


def _what_is_there(target: Path) -> str:
    """`` (imported from SRC)`` or `` (recorded by tuidiag)``, from the run's manifest; empty when unreadable."""
    try:
        manifest = read_manifest(target)
    except Exception:  # an unreadable manifest still blocks the import: it only goes unnamed here
        return ""
    source = manifest.get("source")
    if isinstance(source, dict) and source.get("path"):
        return f" (imported from {source['path']})"
    return f" (recorded by tuidiag: {manifest['name']})" if isinstance(manifest.get("name"), str) else " (recorded by tuidiag)"


def summary(result: WrittenRun, source_run: SourceRun) -> str:
    """What was written for one run: where, how many values, the name mapping and notes."""
    steps = "no steps" if result.last_step is None else f"last step {result.last_step}"
    lines = [f"imported {source_run.source.get('path')} -> {result.path} ({result.rows:,} values, {steps})"]
    mapped = ", ".join(f"{src} -> {dst}" for src, dst in result.names.mapped.items() if src != dst)
    lines.append(f"  mapped: {mapped or '(nothing)'}")
    same = ", ".join(src for src, dst in result.names.mapped.items() if src == dst)
    if same:
        lines.append(f"  already tuidiag names: {same}")
    kept = ", ".join(result.names.kept.values())
    lines.append(f"  kept as-is: {kept or '(nothing)'}")
    lines += [f"  note: {note}" for note in source_run.notes]
    lines += [f"  note: {note}" for note in [still_written(result)] if note]
    return "\n".join(clean(line, max_len=4000) for line in lines)


def still_written(result: WrittenRun, now: float | None = None) -> str | None:
    """A warning when the log's newest value is at most :data:`~tuidiag.sources.foreign_run.RECENT_WRITE` seconds
    old: its training may still run, and the copy (status ``finished``, as every import) stops at its last step."""
    if result.newest is None:
        return None
    age = (time.time() if now is None else now) - result.newest
    if age > RECENT_WRITE:
        return None
    return (f"its newest value was logged {max(0, round(age))} s ago: if its training still runs, this copy stops at step "
            f"{result.last_step} and says finished; import it again later (--force replaces it), or watch the log where it "
            "is with tuidiag watch")

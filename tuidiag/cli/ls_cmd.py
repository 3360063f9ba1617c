"""``tuidiag ls DIR``: a table of the runs under DIR with status, last step and last loss.

``step`` is the last training step, the same text the monitor and ``tuidiag status`` show as
"step" (:mod:`tuidiag.store.progress`; not a count: a run resumed from step 1000 or logging
every 10th step has fewer rows than that); values logged at explicit steps beyond it are noted
beside it (``2 (logged to 11)``), never counted as steps trained.

A run whose recorder rejected or lost anything says so next to its status
(``finished, 1 value rejected``). A run that cannot be read at all is listed as
``unreadable: <reason>``; the others are listed as always.

Other trackers' runs under DIR (TensorBoard logs, W&B runs, CSV logs) are listed too, read
in place through :mod:`tuidiag.sources` as ``tuidiag watch`` reads them (nothing is
written to them); a ``source`` column then says which kind each run is."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tuidiag.cli.run_argument import fail
from tuidiag.format import LOSS
from tuidiag.sources import KIND_TUIDIAG, discover, open_source, source_kind
from tuidiag.store import Run
from tuidiag.store.progress import progress
from tuidiag.store.recorder_losses import run_losses
from tuidiag.store.unreadable import reason_of
from tuidiag.text.safe import literal

STATUS_STYLE = {"running": "green", "finished": "blue", "failed": "red", "crashed": "red", "interrupted": "yellow",
                "unknown": "yellow", "idle": "yellow", "exited": "yellow"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``ls`` arguments."""
    parser.add_argument("path", nargs="?", default="runs", help="a run or a directory of runs (default: ./runs)")


def run(args: argparse.Namespace) -> int:
    """List the runs; exit 2 when the path does not exist."""
    console = Console(highlight=False)
    root = Path(args.path)
    if not root.exists():
        return fail("ls", f"{root} does not exist")
    runs, unreadable = [], []
    for path, kind in discover(root).items():
        try:
            runs.append(open_source(path, kind))
        except Exception as exc:  # this run only (a run.json nested too deeply, memory a footer asks for)
            unreadable.append((path, kind, reason_of(exc)))
    if not runs and not unreadable:
        console.print(literal(f"no runs under {root} (a run is a directory with run.json or metrics/, "
                              "a TensorBoard log, a W&B run or a CSV log)"))
        return 0
    mixed = any(kind != KIND_TUIDIAG for _, kind, _ in unreadable) or any(source_kind(r.manifest) != KIND_TUIDIAG for r in runs)
    table = runs_table(runs, root, mixed)
    for path, kind, reason in unreadable:
        table.add_row(literal(path.name, max_len=40), *([literal(kind)] if mixed else []),
                      literal(f"unreadable: {reason}", style="red"), "-", "-", "-", literal(_relative(path, root)))
    console.print(table)
    for run_ in runs:
        for warning in run_.warnings:
            console.print(literal(f"warning: {run_.path}: {warning}"), style="yellow")
    return 0


def runs_table(runs: list[Run], root: Path, mixed: bool = False) -> Table:
    """A Rich table of runs; every cell taken from run files is literal text. ``mixed``: with a ``source`` column."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("run", *(["source"] if mixed else []), "status", "step", "last loss", "updated", "path"):
        table.add_column(column, justify="right" if column in ("step", "last loss") else "left")
    for run_ in runs:
        series = run_.series(LOSS)
        loss = series.last
        status = run_.status
        status_cell = literal(status, style=STATUS_STYLE.get(status, ""))
        if losses := run_losses(run_).text():
            status_cell.append_text(literal(f", {losses}", style="yellow"))
        table.add_row(
            literal(run_.name, max_len=40),
            *([literal(source_kind(run_.manifest))] if mixed else []),
            status_cell,
            literal(progress(run_.manifest, run_.last_step).text()),
            literal(_fmt_loss(loss)),
            literal(_age(run_.manifest.get("heartbeat", _newest(series.wall_times)))),  # a foreign log: its newest loss
            literal(_relative(run_.path, root)),
        )
    return table


def _fmt_loss(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if math.isfinite(value) else str(value)


def _newest(wall_times: object) -> float | None:
    """The newest finite wall time, else ``None``."""
    import numpy as np

    finite = np.asarray(wall_times, np.float64)
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) if len(finite) else None


def _age(timestamp: object) -> str:
    if not isinstance(timestamp, (int, float)) or not math.isfinite(timestamp):
        return "-"
    seconds = max(0.0, time.time() - timestamp)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root)) or "."
    except ValueError:
        return str(path)

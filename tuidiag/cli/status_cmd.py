"""``tuidiag status RUN``: one line for a tmux status bar: step, loss, top finding, staleness.

``myrun ▸ step 12,345 loss 0.4312 ▸ LR too high 80% ▸ 3s ago``. It reads ``run.json``
(whose ``summary`` holds the newest loss: :mod:`tuidiag.store.tail_summary`; a run
without one has it read from the end of the newest shard) and a cached top finding
(:mod:`tuidiag.cli.status_cache`), never the whole run and, on a run with a summary,
without importing pyarrow or numpy, so it can run every second. A finding computed
before the newest data is marked with ``*``. A run
whose recorder rejected or lost anything says so after the loss
(``1 value rejected``, from ``run.json``'s stats).

Another tracker's run (a TensorBoard, W&B or CSV log, or one of its files) is read whole
through :mod:`tuidiag.sources` at each call, as ``tuidiag watch`` reads it, and diagnosed
inline: nothing is cached and nothing is written beside it, so on a large log it costs
what one read of the log costs.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuidiag.cli.run_argument import RunNotReadable, fail, load_run
from tuidiag.cli.status_cache import refresh_locked, top_entry, top_finding
from tuidiag.format import LOSS, METRICS_DIR, STATUS_RUNNING
from tuidiag.store.discovery import Shards, is_run_dir, list_shards
from tuidiag.store.manifest import effective_status, read_manifest
from tuidiag.store.progress import Progress, progress
from tuidiag.store.recorder_losses import manifest_losses
from tuidiag.store.tail_summary import Latest, newest
from tuidiag.text.numbers import confidence as percent
from tuidiag.text.safe import clean

if TYPE_CHECKING:
    from tuidiag.store import Run  # the reader needs pyarrow: only another tracker's run is read whole here

UNICODE = {"sep": " \N{BLACK RIGHT-POINTING SMALL TRIANGLE} ", "wait": "diagnosing\N{HORIZONTAL ELLIPSIS}"}
ASCII = {"sep": " > ", "wait": "diagnosing..."}
UNREADABLE = "unreadable"
"""The finding of a log that could not be read at all: the line shows its title (what to do)."""
TMUX_COLOURS = {"critical": "red", "warning": "yellow", "info": "green"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``status`` arguments."""
    parser.add_argument("run", help="a run directory")
    parser.add_argument("--ascii", action="store_true", help="'>' and '...' instead of Unicode separators")
    parser.add_argument(
        "--tmux", action="store_true", help="colour the finding with tmux #[fg=...] styles (and escape #)"
    )
    parser.add_argument(
        "--no-diagnosis", action="store_true", help="leave the finding out (reads no more than the run's end)"
    )
    parser.add_argument(
        "--sync", action="store_true", help="diagnose now if the cached finding is stale (slow on large runs)"
    )
    parser.add_argument("--refresh-cache", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Print the status line; exit 2 when ``RUN`` is not a readable run."""
    path = Path(args.run)
    symbols = ASCII if args.ascii or not _can_write(UNICODE) else UNICODE
    if not (path.is_dir() and is_run_dir(path)) and not args.refresh_cache:
        try:
            foreign = load_run(path, foreign=True)
        except RunNotReadable as exc:
            return fail("status", str(exc))
        print(run_status_line(foreign, None if args.no_diagnosis else _diagnosed(foreign), symbols, args.tmux))
        return 0
    try:
        manifest = _manifest(path)
    except RunNotReadable as exc:
        return fail("status", str(exc))
    if args.refresh_cache:
        refresh_locked(path)
        return 0
    metrics = list_shards(path / METRICS_DIR)  # once per call: the finding's signature and the newest loss both read it
    finding = None if args.no_diagnosis else top_finding(path, inline=args.sync, metrics=metrics)
    print(status_line(path, manifest, finding, symbols=symbols, tmux=args.tmux, metrics=metrics))
    return 0


def _can_write(symbols: dict[str, str]) -> bool:
    """True when stdout's encoding holds ``symbols`` (not under ``LANG=C``: then ASCII ones are used)."""
    try:
        "".join(symbols.values()).encode(getattr(sys.stdout, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _manifest(path: Path) -> dict[str, Any]:
    if not path.is_dir() or not is_run_dir(path):
        raise RunNotReadable(f"{path} is not a tuidiag run (no run.json or metrics/ inside)")
    try:
        return read_manifest(path)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RunNotReadable(f"cannot read {path}/run.json: {exc}") from exc


def status_line(
    path: Path,
    manifest: dict[str, Any],
    finding: tuple[dict[str, Any] | None, bool] | None,
    symbols: dict[str, str] = UNICODE,
    tmux: bool = False,
    now: float | None = None,
    metrics: Shards | None = None,
) -> str:
    """The one line: name, step and loss, recorder losses, top finding (``None``: left out), age or end state
    (``metrics``: the shards of ``metrics/``, when listed already)."""
    loss = newest(path, manifest, LOSS, metrics)
    status = effective_status(manifest) if manifest else "unknown"
    reached = progress(manifest, loss.step if loss is not None else None)
    return _line(manifest.get("name") or path.name, reached, loss, manifest_losses(manifest).text(), finding, status,
                 loss.wall_time if loss is not None else manifest.get("heartbeat"), symbols, tmux, now)


def run_status_line(run: Run, finding: tuple[dict[str, Any] | None, bool] | None, symbols: dict[str, str] = UNICODE,
                    tmux: bool = False, now: float | None = None) -> str:
    """The same line for a run read whole (another tracker's log): its newest loss by step, its own status;
    a log that could not be read says ``unreadable: <what to do>`` in the finding's place, even with no diagnosis."""
    if run.unreadable is not None:
        finding = ({"code": UNREADABLE, "title": f"unreadable: {run.unreadable}", "severity": "warning"}, True)
    series = run.series(LOSS)
    loss = Latest(int(series.steps[-1]), float(series.values[-1]), float(series.wall_times[-1])) if len(series) else None
    manifest = run.manifest
    return _line(run.name, progress(manifest, run.last_step), loss, "", finding, run.status,
                 loss.wall_time if loss is not None else manifest.get("heartbeat"), symbols, tmux, now)


def _diagnosed(run: Run) -> tuple[dict[str, Any] | None, bool]:
    """The top finding of a run diagnosed now (in the shape the cache keeps), covering all its data."""
    from tuidiag.diagnosis import diagnose

    return top_entry(diagnose(run).top), True


def _line(name: str, reached: Progress, loss: Latest | None, losses: str, finding: tuple[dict[str, Any] | None, bool] | None,
          status: str, when: Any, symbols: dict[str, str], tmux: bool, now: float | None) -> str:
    now = time.time() if now is None else now
    parts = [f"{_text(name, tmux, 40)}{symbols['sep']}{_progress(reached, loss)}"]
    if losses:
        parts.append(f"#[fg=yellow]{losses}#[default]" if tmux else losses)
    if finding is not None:
        parts.append(_finding(*finding, symbols, tmux))
    age = _age(now - when) if isinstance(when, (int, float)) and not isinstance(when, bool) else "no data"
    # "exited 2m ago" read as the time it exited: the age is of the newest data, so a run that ended says "last data"
    parts.append(age if status == STATUS_RUNNING else f"{_text(status, tmux, 20)}, last data {age}")
    return symbols["sep"].join(parts)


def _progress(reached: Progress, loss: Latest | None) -> str:
    text = f"step {reached.text()}"
    if loss is not None:
        text += f" loss {loss.value:.4g}" if math.isfinite(loss.value) else f" loss {loss.value}"
    return text


def _finding(top: dict[str, Any] | None, fresh: bool, symbols: dict[str, str], tmux: bool) -> str:
    if not top:
        return symbols["wait"]
    code = _text(top.get("code", "?"), tmux, 40)
    confidence = top.get("confidence")
    if code == UNREADABLE:  # what to do, not a likelihood
        text = _text(top.get("title") or code, tmux, 60)
    else:
        name = _text(top.get("badge") or code, tmux, 40)  # as the monitor and the report name it
        text = name if code == "healthy" or not isinstance(confidence, (int, float)) else f"{name} {percent(confidence)}"
    text += "" if fresh else "*"
    if tmux:
        colour = TMUX_COLOURS.get(str(top.get("severity")), "default")
        text = f"#[fg={colour}]{text}#[default]"
    return text


def _text(value: object, tmux: bool, max_len: int) -> str:
    """Text from run files, without control characters; ``#`` doubled for tmux (never a format)."""
    text = clean(value, max_len)
    return text.replace("#", "##") if tmux else text


def _age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"

"""W&B runs read live from their transaction log (``wandb/offline-run-*/run-*.wandb``), with wandb's own protobufs.

Needs the optional ``wandb`` package (``pip install 'tuidiag[wandb]'``): without it a W&B
run is listed with a note saying so. What is read, record by record
(:mod:`tuidiag.sources.wandb_log` for the framing):

- ``history``: every numeric value (nested dicts flattened with ``/``) at its ``_step``,
  with ``_timestamp`` as wall time; wandb's own ``_step``/``_runtime``/``_timestamp`` are not series;
- ``stats`` (system metrics, sampled by time): under ``sys/``, at the step of the newest
  history row before them; GPU 0's utilisation and memory under the recorder's names
  (``sys/gpu_util``, ``sys/gpu_mem_util``, ``sys/mem_allocated``);
- ``run`` and ``config``: the config, updated as the run updates it;
- ``exit``: the run ended, ``finished`` (exit code 0) or ``failed``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from tuidiag.format import SYS_GPU_MEM_UTIL, SYS_GPU_UTIL, SYS_MEM_ALLOCATED, SYS_PREFIX
from tuidiag.importers.source import SourceSeries
from tuidiag.sources.foreign_run import ForeignSource
from tuidiag.sources.run_source import Batch, Claim, Tail
from tuidiag.sources.wandb_log import LogScan, iter_log_records
from tuidiag.store.limits import LimitError

KIND = "wandb"
INSTALL_HINT = "reading W&B runs needs the wandb package: pip install 'tuidiag[wandb]' (or pip install wandb)"
UNREADABLE = "install tuidiag[wandb]"
"""What a W&B run that cannot be read without the package says, in a few words."""
RUN_FILE_PREFIX, RUN_FILE_SUFFIX = "run-", ".wandb"
WANDB_KEYS = ("_step", "_runtime", "_timestamp", "_wandb")
"""Keys wandb adds to every history row (and config) itself."""
GPU_NAMES = {"gpu.0.gpu": SYS_GPU_UTIL, "gpu.0.memory": SYS_GPU_MEM_UTIL, "gpu.0.memoryAllocatedBytes": SYS_MEM_ALLOCATED}
"""wandb's system metrics of GPU 0 under the names the recorder uses (the system strip and rules read those)."""
STATUS_FINISHED, STATUS_FAILED = "finished", "failed"


def is_run_file(name: str) -> bool:
    """True for a W&B transaction log's name (``run-<id>.wandb``)."""
    return name.startswith(RUN_FILE_PREFIX) and name.endswith(RUN_FILE_SUFFIX)


class WandbSource(ForeignSource):
    """Directories holding a ``run-<id>.wandb`` log (offline runs; an online run's local log reads the same)."""

    kind = KIND

    def claim(self, directory: Path, dirnames: list[str], filenames: list[str]) -> Claim | None:
        """The run directory that holds the log (``files/``, ``logs/`` below it are the run's own)."""
        return Claim((directory,)) if any(is_run_file(name) for name in filenames) else None

    def owner_of(self, changed: Path) -> Path | None:
        """The run directory of a ``run-<id>.wandb`` file."""
        return changed.parent if is_run_file(changed.name) else None

    def tail(self, key: Path) -> Tail:
        """A reader of the run's log from the record where it last stopped."""
        return WandbTail(key)


def _number(value_json: str) -> float | None:
    """A JSON number (``NaN`` and ``Infinity`` included), else ``None``."""
    try:
        value = json.loads(value_json)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _numbers(name: str, value: Any) -> list[tuple[str, float]]:
    """(name, number) of a JSON value: a number, or a dict's numeric leaves named ``name/key`` (media dicts skipped)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [(name, float(value))]
    if isinstance(value, dict) and "_type" not in value:
        return [pair for key, inner in value.items() for pair in _numbers(f"{name}/{key}", inner)]
    return []


def _key(item: Any) -> str:
    """An item's name: ``key``, or its ``nested_key`` path joined with ``/``."""
    return item.key or "/".join(item.nested_key)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class WandbTail(Tail):
    """The run's ``run-<id>.wandb`` log(s), each read on from the last whole record read."""

    def __init__(self, key: Path) -> None:
        self.key = key
        self.scans: dict[Path, LogScan] = {}
        self.step = 0
        """The newest history step read: system metrics (sampled by time) are placed there."""
        self.record_class: Any = None
        self.config: dict[str, Any] = {}
        self.config_changed = False

    def read(self) -> Batch:
        """New history rows, system metrics and config since the last read; ``ended`` at the exit record."""
        batch = Batch()
        if self.record_class is None:
            try:
                from wandb.proto.wandb_internal_pb2 import Record
            except ImportError:
                batch.notes.append(INSTALL_HINT)
                batch.unreadable = UNREADABLE
                return batch
            self.record_class = Record
        rows: dict[str, tuple[list[int], list[float], list[float]]] = {}
        mtimes = []
        for path in self._files():
            scan = self.scans.setdefault(path, LogScan())
            try:
                for data in iter_log_records(path, scan):
                    self._record(data, rows, batch)
                mtimes.append(path.stat().st_mtime)
            except (OSError, LimitError) as exc:
                batch.notes.append(f"{path.name}: not read ({exc})")
            if scan.stopped:
                batch.notes.append(f"{path.name}: reading stopped: {scan.stopped}")
        if self.config_changed:
            batch.config, self.config_changed = dict(self.config), False
        batch.series = [SourceSeries.from_lists(name, *lists) for name, lists in rows.items()]
        batch.last_write = max(mtimes, default=None)
        return batch

    def _files(self) -> list[Path]:
        try:
            return sorted(self.key / name for name in os.listdir(self.key) if is_run_file(name))
        except OSError:
            return []

    def _record(self, data: bytes, rows: dict[str, tuple[list[int], list[float], list[float]]], batch: Batch) -> None:
        """Add what one record says to ``rows`` (history, stats) or ``batch`` (config, name, end)."""
        try:
            record = self.record_class.FromString(data)
        except Exception:  # a record wandb's own classes cannot parse: skipped
            batch.notes.append("a record that does not parse was skipped")
            return
        kind = record.WhichOneof("record_type")
        if kind == "history":
            self._history(record.history, rows)
        elif kind == "stats":
            wall = record.stats.timestamp.seconds + record.stats.timestamp.nanos / 1e9
            for item in record.stats.item:
                number = _number(item.value_json)
                if number is not None:
                    key = _key(item)
                    _append(rows, GPU_NAMES.get(key, SYS_PREFIX + key), self.step, number, wall)
        elif kind == "run":
            self._config(record.run.config.update, ())
            batch.name = record.run.display_name or batch.name
        elif kind == "config":
            self._config(record.config.update, record.config.remove)
        elif kind == "exit":
            batch.ended = STATUS_FINISHED if record.exit.exit_code == 0 else STATUS_FAILED

    def _history(self, history: Any, rows: dict[str, tuple[list[int], list[float], list[float]]]) -> None:
        values = {_key(item): _loads(item.value_json) for item in history.item}
        step = values.get("_step")
        step = int(step) if isinstance(step, (int, float)) and math.isfinite(step) else int(history.step.num)
        wall = values.get("_timestamp")
        wall = float(wall) if isinstance(wall, (int, float)) else math.nan
        self.step = max(self.step, step)
        for key, value in values.items():
            if key not in WANDB_KEYS:
                for name, number in _numbers(key, value):
                    _append(rows, name, step, number, wall)

    def _config(self, updates: Any, removes: Any) -> None:
        """Apply a config record (keys set, keys removed) to the run's whole config."""
        for item in updates:
            key = _key(item)
            if key not in WANDB_KEYS:
                self.config[key] = _loads(item.value_json)
        for item in removes:
            self.config.pop(_key(item), None)
        self.config_changed = True


def _append(rows: dict[str, tuple[list[int], list[float], list[float]]], name: str, step: int, value: float, wall: float) -> None:
    steps, values, walls = rows.setdefault(name, ([], [], []))
    steps.append(step)
    values.append(value)
    walls.append(wall)

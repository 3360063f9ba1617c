"""Import TensorBoard event files (torch's ``SummaryWriter``, TensorFlow 1 and 2, Keras) as tuidiag runs.

Every scalar event is read, record by record, by :mod:`tuidiag.importers.tfrecord`
(never ``EventAccumulator``, whose default reservoir sampling keeps 10,000 scalars a
tag and hides spikes). Both forms are decoded here: ``simple_value`` (torch's
``SummaryWriter``, TF1) and float tensors of the ``scalars`` plugin (TF2); the
``EventFileLoader`` compat layer, which rewrites every ``simple_value`` into a tensor
proto first, is skipped: it made reading about five times slower. Reading stops at
a corrupt, truncated or impossibly long record; the bytes left unread are reported.
TF2 names the plugin only in a tag's first event, so one-number tensors are
gathered per tag and kept when any of the run's files names the tag's plugin ``scalars``.

One run per directory holding event files, keeping the layout below the log
directory, with two well-known layouts joined into one run:

- torch ``add_scalars("Loss", {"train": ..., "val": ...})`` writes each key to a
  subdirectory ``Loss_train/`` with tag ``Loss``: joined into the parent as ``Loss/train``.
- Keras' ``TensorBoard`` callback writes ``train/`` and ``validation/`` beside each
  other: joined as one run, the validation tags as ``validation/<tag>``.

torch's ``add_hparams`` writes a session subdirectory (:mod:`tuidiag.importers.tensorboard_hparams`):
when a run has exactly one, it is joined too, its hparam values as the run's config and
``hparams``, its metrics as ``hparam/<tag>``. Several (a sweep logged from one writer)
stay runs of their own, each with its own config and ``hparams``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from tuidiag.importers.source import ImportSourceError, SourceRun, SourceSeries
from tuidiag.importers.tables import lightning_hparams
from tuidiag.importers.tensorboard_hparams import HPARAMS_PLUGIN, HParamsRecord, hparam_series_name, newest_hparams
from tuidiag.importers.tfrecord import RecordScan, iter_records
from tuidiag.store.limits import MAX_TFRECORD_BYTES, LimitError

INSTALL_HINT = (
    "reading TensorBoard files needs the tensorboard package: "
    "pip install 'tuidiag[tensorboard]' (or pip install tensorboard)"
)
UNREADABLE = "install tuidiag[tensorboard]"
"""What a TensorBoard log that cannot be read without the package says, in a few words."""
SCALARS_PLUGIN = "scalars"
KERAS_SPLITS = {"train": "", "validation": "validation/"}
"""Keras' subdirectories and the prefix their tags get in the joined run."""
OWN_EVENTS_DIR = "_root"
"""Where the events of a directory go when runs also sit below it (runs do not nest)."""

Scalars = dict[str, tuple[list[int], list[float], list[float]]]
Parts = list[tuple[Path, list[SourceSeries]]]
"""The event directories of one run, each with its series."""


def load_modules() -> tuple[Any, Any, Any]:
    """tensorboard's CRC-32C, Event proto and tensor decoder, or a clear error when it is missing."""
    try:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
        from tensorboard.util import tensor_util
    except ImportError as exc:
        raise ImportSourceError(INSTALL_HINT) from exc
    return masked_crc32c, Event, tensor_util


def is_event_file(name: str) -> bool:
    """True for a TensorBoard event file name (``events.out.tfevents.*``, as TensorBoard itself matches)."""
    return "tfevents" in name and not name.startswith(".")


def event_dirs(logdir: Path) -> dict[Path, list[Path]]:
    """Every directory under ``logdir`` (itself included) holding event files, with its files in name order."""
    found: dict[Path, list[Path]] = {}
    for dirpath, dirnames, filenames in os.walk(logdir, onerror=lambda _err: None):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        files = sorted(Path(dirpath) / f for f in filenames if is_event_file(f))
        if files:
            found[Path(dirpath)] = files
    return found


def read_scalars(files: list[Path], notes: list[str], hparams: HParamsRecord | None = None) -> Scalars:
    """Every scalar of one run's event files: tag -> (steps, values, wall times), in file order;
    the hparams plugin's summaries go to ``hparams``."""
    masked_crc32c, event_proto, tensor_util = load_modules()
    plugins: dict[str, str] = {}
    tensors: Scalars = defaultdict(lambda: ([], [], []))
    for path in files:
        scan = RecordScan()
        try:
            for record in iter_records(path, masked_crc32c, scan):
                add_event(event_proto.FromString(record), plugins, tensors, tensor_util, hparams)
        except (OSError, LimitError) as exc:  # unreadable, or not a regular file
            notes.append(f"{path.name}: not read ({exc})")
            continue
        except Exception as exc:  # a record that does not parse ends that file, not the import
            notes.append(f"{path.name}: stopped at a record that does not parse ({type(exc).__name__})")
        if scan.skipped:
            notes.append(f"{path.name}: {len(scan.skipped)} record(s) over {MAX_TFRECORD_BYTES:,} bytes "
                         f"(the largest {max(scan.skipped):,}) skipped unread: not scalars (MAX_TFRECORD_BYTES)")
        _note_unread_tail(path, scan, notes)
    return {tag: lists for tag, lists in tensors.items() if plugins.get(tag) == SCALARS_PLUGIN}


def _note_unread_tail(path: Path, scan: RecordScan, notes: list[str]) -> None:
    """Reading stops at a corrupt, truncated or impossible record: say so when bytes were left."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        notes.append(f"{path.name}: not readable ({exc.strerror})")
        return
    if scan.read < size:
        why = f" ({scan.stopped})" if scan.stopped else ""
        notes.append(f"{path.name}: read {scan.read:,} of {size:,} bytes; the rest is corrupt or truncated{why} and was skipped")


def add_event(event: Any, plugins: dict[str, str], tensors: Scalars, tensor_util: Any,
              hparams: HParamsRecord | None = None) -> None:
    """Note the plugin of each tag and append the scalar values of one event (for tensors the plugin decides later);
    summaries of the hparams plugin are decoded into ``hparams`` when given."""
    if not event.HasField("summary"):
        return
    for value in event.summary.value:
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            plugins[value.tag] = SCALARS_PLUGIN
            number: float | None = value.simple_value
        else:
            plugin = value.metadata.plugin_data.plugin_name
            if plugin:
                plugins[value.tag] = plugin
            if plugin == HPARAMS_PLUGIN and hparams is not None:
                hparams.add(value.tag, value.metadata.plugin_data.content, float(event.wall_time))
            scalar_tensor = kind == "tensor" and plugins.get(value.tag, SCALARS_PLUGIN) == SCALARS_PLUGIN
            number = tensor_number(value.tensor, tensor_util) if scalar_tensor else None
        if number is not None:
            steps, values, walls = tensors[value.tag]
            steps.append(int(event.step))
            values.append(float(number))
            walls.append(float(event.wall_time))


def tensor_number(tensor: Any, tensor_util: Any) -> float | None:
    """The number a one-element numeric tensor holds, else ``None`` (TF2 writes scalars as float tensors)."""
    if len(tensor.float_val) == 1:  # the common case, without building an array
        return float(tensor.float_val[0])
    if len(tensor.double_val) == 1:
        return float(tensor.double_val[0])
    array = tensor_util.make_ndarray(tensor)
    if array.size != 1 or array.dtype.kind not in "biuf":
        return None
    return float(array.reshape(-1)[0])


def _add_scalars_key(child: Path, tags: list[str]) -> str | None:
    """The key of a torch ``add_scalars`` subdirectory (``Loss_train`` with tag ``Loss``: ``train``), else ``None``."""
    if len(tags) != 1:
        return None
    prefix = tags[0].replace("/", "_") + "_"
    return child.name[len(prefix):] if child.name.startswith(prefix) and len(child.name) > len(prefix) else None


def _to_series(scalars: Scalars, prefix: str = "", suffix: str = "") -> list[SourceSeries]:
    return [SourceSeries.from_lists(f"{prefix}{tag}{suffix}", *lists) for tag, lists in scalars.items()]


class _Layout:
    """The runs of one log directory: which event directories make up which run."""

    def __init__(self, logdir: Path, name: str) -> None:
        self.logdir, self.name = logdir, name
        self.dirs = event_dirs(logdir)
        self.cache: dict[Path, Scalars] = {}
        self.records: dict[Path, HParamsRecord] = {}
        self.notes: dict[Path, list[str]] = defaultdict(list)

    def scalars(self, directory: Path) -> Scalars:
        if directory not in self.cache:
            record = self.records[directory] = HParamsRecord()
            self.cache[directory] = read_scalars(self.dirs[directory], self.notes[directory], record)
            self.notes[directory] += record.notes
        return self.cache[directory]

    def is_session(self, directory: Path) -> bool:
        """True when ``directory``'s events hold an ``add_hparams`` session start."""
        self.scalars(directory)
        return self.records[directory].is_session

    def runs(self) -> dict[Path, Parts]:
        """Run directory -> its parts (event directory, series), joining the two known layouts."""
        runs: dict[Path, Parts] = {}
        joined: set[Path] = set()
        for directory in self.dirs:
            if directory in joined:
                continue
            parts = [(directory, _to_series(self.scalars(directory)))]
            children = [d for d in self.dirs if d.parent == directory]
            sessions = [child for child in children if self.is_session(child)]
            if len(sessions) == 1:  # add_hparams of this run; several are a sweep's runs of their own
                parts.append((sessions[0], [SourceSeries.from_lists(hparam_series_name(tag), *lists)
                                            for tag, lists in self.scalars(sessions[0]).items()]))
                joined.add(sessions[0])
            for child in (c for c in children if c not in sessions):
                key = _add_scalars_key(child, list(self.scalars(child)))
                if key is not None:
                    parts.append((child, _to_series(self.scalars(child), suffix=f"/{key}")))
                    joined.add(child)
            runs[directory] = parts
        return self._join_keras(runs)

    def _join_keras(self, runs: dict[Path, Parts]) -> dict[Path, Parts]:
        """Keras' ``train/`` and ``validation/`` (in a directory without event files of its own) become one run."""
        for parent in {d.parent for d in runs if d.name in KERAS_SPLITS and d != self.logdir}:
            if parent in runs:
                continue
            splits = [parent / split for split in KERAS_SPLITS if parent / split in runs]
            parts: Parts = []
            for split in splits:
                prefix = KERAS_SPLITS[split.name]
                parts += [(d, [_prefixed(s, prefix) for s in series]) for d, series in runs.pop(split)]
            runs[parent] = parts
        return runs

    def source_run(self, run_dir: Path, parts: Parts, all_runs: list[Path]) -> SourceRun:
        """The run of ``run_dir`` made of ``parts``, with its event files and any reading notes."""
        series = [s for _, part in parts for s in part]
        files = [str(f) for d, _ in parts for f in self.dirs[d]]
        notes = [n for d, _ in parts for n in self.notes[d]]
        source = {"format": "tensorboard", "path": str(run_dir.resolve()), "files": files}
        hparams = newest_hparams([(self.records[d], last_values(self.scalars(d))) for d, _ in parts])
        config = {**(hparams["params"] if hparams else {}), **lightning_hparams(run_dir, notes)}
        return SourceRun(self.relative(run_dir, all_runs), series, source, notes, config, hparams)

    def relative(self, run_dir: Path, all_runs: list[Path]) -> Path:
        """Where a run goes below the output directory: NAME/<path below the log directory>."""
        rel = Path(self.name) / run_dir.relative_to(self.logdir)
        nested = any(other != run_dir and run_dir in other.parents for other in all_runs)
        return rel / OWN_EVENTS_DIR if nested else rel


def last_values(scalars: Scalars) -> dict[str, float]:
    """The last value (in file order) of each tag."""
    return {tag: values[-1] for tag, (_, values, _) in scalars.items() if values}


def _prefixed(series: SourceSeries, prefix: str) -> SourceSeries:
    return SourceSeries(prefix + series.name, series.steps, series.values, series.wall_times)


def read_tensorboard(logdir: str | os.PathLike[str], name: str | None = None) -> list[SourceRun]:
    """The runs of a TensorBoard log directory (or of one event file's directory)."""
    path = Path(logdir)
    if path.is_file() and is_event_file(path.name):
        path = path.parent
    if not path.is_dir():
        problem = "does not exist" if not path.exists() else "is not a directory of TensorBoard event files"
        raise ImportSourceError(f"{logdir} {problem}")
    load_modules()
    layout = _Layout(path, name or path.resolve().name)
    if not layout.dirs:
        raise ImportSourceError(f"no TensorBoard event files (events.out.tfevents.*) under {logdir}")
    grouped = layout.runs()
    return [layout.source_run(run_dir, parts, list(grouped)) for run_dir, parts in sorted(grouped.items())]

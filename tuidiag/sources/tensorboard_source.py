"""TensorBoard log directories read live: event files that grow, and new ones, from the byte already read.

Records are read by :mod:`tuidiag.importers.tfrecord` and decoded by the importer's own
event decoder (``simple_value`` and TF2's scalar tensors), so a live run shows the
same series ``tuidiag import tensorboard`` would write. A record cut off by the
writer's flush is read at the next refresh, from its first byte.

Which directories make one run: a directory holding event files, with the event files
of its immediate subdirectories joined in (torch's ``add_scalars("Loss", {"train": ..})``
writes ``Loss_train/`` with tag ``Loss``: read as ``Loss/train``; any other subdirectory's
tags get its name as prefix); and Keras' ``train/`` + ``validation/`` pair, under a directory
without event files of its own, as one run with the validation tags under ``validation/``.
Lightning's ``hparams.yaml`` beside the events is the run's config.

torch's ``add_hparams`` writes a session subdirectory (:mod:`tuidiag.importers.tensorboard_hparams`),
recognised by a session start info in its first records (:class:`SessionProbe`), as
``tuidiag import`` does: one session is joined into its parent, its hparam values as the
run's config (under ``hparams.yaml``'s values) and ``hparams``, its metrics as
``hparam/<tag>``; several (a sweep logged from one writer) are runs of their own. When
that changes under a run being read (a second session appears), the run is read again
from the start.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Callable

from tuidiag.importers.source import ImportSourceError, SourceSeries
from tuidiag.importers.tables import LIGHTNING_HPARAMS, lightning_hparams
from tuidiag.importers.tensorboard import (
    KERAS_SPLITS, SCALARS_PLUGIN, UNREADABLE, Scalars, add_event, is_event_file, load_modules,
)
from tuidiag.importers.tensorboard_hparams import (
    HPARAMS_PLUGIN, SESSION_START_TAG, HParamsRecord, hparam_series_name, newest_hparams,
)
from tuidiag.importers.tfrecord import RecordScan, iter_records
from tuidiag.sources.foreign_run import ForeignSource
from tuidiag.sources.run_source import Batch, Claim, Tail
from tuidiag.store.limits import LimitError

KIND = "tensorboard"
EVENT_FILE_NAME = re.compile(r"^events\.out\.tfevents\.\d+\.(?P<host>.+)\.(?P<pid>\d+)\.\d+(?:\..*)?$")
"""``events.out.tfevents.<time>.<host>.<pid>.<n>[suffix]``: what TensorBoard's writers (torch's ``SummaryWriter``,
TensorFlow's) name an event file; the longest host the name allows (host names hold dots)."""
CRC_FAILURE = "CRC"
"""Reading stopped at a record whose checksum fails: corrupt (a record cut off by a flush fails on its length instead)."""
PROBE_RECORDS = 8
"""Records of an event file read to tell an ``add_hparams`` session (its session start info is the third)."""
OWN, JOINED, SESSION = "own", "joined", "session"
"""How a part's tags are named in its run: as they are, under the subdirectory's name, as ``hparam/<tag>`` (Keras'
splits: the split's name, their tags prefixed as :data:`~tuidiag.importers.tensorboard.KERAS_SPLITS` says)."""


def event_files(directory: Path) -> list[Path]:
    """The event files directly in ``directory``, in name (creation) order; none when it cannot be listed."""
    try:
        return sorted(directory / name for name in os.listdir(directory) if is_event_file(name))
    except OSError:
        return []


def writer_of(name: str) -> tuple[str, int] | None:
    """(host, pid) of the process that created the event file ``name``, when its name says."""
    found = EVENT_FILE_NAME.match(name)
    return (found["host"], int(found["pid"])) if found else None


def subdirectories(directory: Path) -> list[Path]:
    """The visible subdirectories of ``directory`` (symbolic links not followed), in name order."""
    try:
        names = sorted(e.name for e in os.scandir(directory) if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    except OSError:
        return []
    return [directory / name for name in names]


def _starts_session(path: Path) -> bool | None:
    """True when the file's first :data:`PROBE_RECORDS` records hold a session start info, ``False`` when they do
    not, ``None`` when the file has fewer whole records yet (or cannot be read): undecided."""
    try:
        masked_crc32c, event_proto, _ = load_modules()
        for count, record in enumerate(iter_records(path, masked_crc32c, RecordScan()), 1):
            event = event_proto.FromString(record)
            if any(value.tag == SESSION_START_TAG and value.metadata.plugin_data.plugin_name == HPARAMS_PLUGIN
                   for value in event.summary.value):
                return True
            if count >= PROBE_RECORDS:
                return False
    except Exception:  # missing tensorboard, unreadable or unparsable file: judged again when it changes
        return None
    return None


class SessionProbe:
    """Which subdirectories of a run are ``add_hparams`` sessions; each event file's verdict is kept once it is
    sure (an undecided file is probed again when its size changed)."""

    def __init__(self) -> None:
        self._verdicts: dict[Path, tuple[int, bool | None]] = {}

    def is_session(self, directory: Path) -> bool:
        """True when one of ``directory``'s event files starts an ``add_hparams`` session."""
        return any(self._verdict(path) for path in event_files(directory))

    def _verdict(self, path: Path) -> bool:
        try:
            size = path.stat().st_size
        except OSError:
            return False
        known = self._verdicts.get(path)
        if known is None or (known[1] is None and known[0] != size):
            known = self._verdicts[path] = (size, _starts_session(path))
        return bool(known[1])

    def sessions(self, parent: Path) -> list[Path]:
        """The session subdirectories of ``parent``."""
        return [child for child in subdirectories(parent) if self.is_session(child)]

    def separate(self, parent: Path) -> list[Path]:
        """The sessions of ``parent`` that are runs of their own: all of them when there are several, else none."""
        sessions = self.sessions(parent)
        return sessions if len(sessions) > 1 else []


class TensorBoardSource(ForeignSource):
    """TensorBoard log directories (``SummaryWriter``, Lightning's ``TensorBoardLogger``, Keras, TF)."""

    kind = KIND

    def __init__(self) -> None:
        self.probe = SessionProbe()

    def claim(self, directory: Path, dirnames: list[str], filenames: list[str]) -> Claim | None:
        """A directory with event files (its subdirectories join it, but for a sweep's ``add_hparams``
        sessions, runs of their own), or the parent of Keras' splits."""
        if any(is_event_file(name) for name in filenames):
            return Claim((directory, *self.probe.separate(directory)))
        if any(name in KERAS_SPLITS and event_files(directory / name) for name in dirnames):
            return Claim((directory,))
        return None

    def owner_of(self, changed: Path) -> Path | None:
        """The run of an event file: its directory, or the directory above when that joins it."""
        if not is_event_file(changed.name):
            return None
        folder = changed.parent
        if folder.name in KERAS_SPLITS:
            return folder.parent
        if event_files(folder.parent):
            return folder if folder in self.probe.separate(folder.parent) else folder.parent
        return folder

    def tail(self, key: Path) -> Tail:
        """A reader of the run's event files from where it last stopped."""
        return TensorBoardTail(key, self.probe)


def _same(tag: str) -> str:
    return tag


def _joined_name(child: str) -> Callable[[str], str]:
    """How a subdirectory's tags are named in its parent's run (``add_scalars`` keys, else prefixed)."""

    def name(tag: str) -> str:
        prefix = tag.replace("/", "_") + "_"
        if child.startswith(prefix) and len(child) > len(prefix):
            return f"{tag}/{child[len(prefix):]}"
        return f"{child}/{tag}"

    return name


def _prefixed(prefix: str) -> Callable[[str], str]:
    return lambda tag: prefix + tag


def _renamer(directory: Path, role: str) -> Callable[[str], str]:
    """How a part's tags are named: by its role, or for Keras' splits (whose role is the split) with the split's prefix."""
    if role in KERAS_SPLITS:
        return _prefixed(KERAS_SPLITS[role])
    if role == SESSION:
        return hparam_series_name
    return _joined_name(directory.name) if role == JOINED else _same


class TensorBoardTail(Tail):
    """The event files of one run, each read on from the byte where its last read stopped."""

    def __init__(self, key: Path, probe: SessionProbe | None = None) -> None:
        self.key = key
        self.probe = probe or SessionProbe()
        self.offsets: dict[Path, int] = {}
        self.plugins: dict[Path, dict[str, str]] = defaultdict(dict)
        """Per event directory, the plugin each tag belongs to (TF2 names it in the tag's first event only)."""
        self.pending: dict[Path, Scalars] = defaultdict(dict)
        """Tensor values of tags whose plugin no event has named yet."""
        self.stuck: dict[Path, tuple[int, int]] = {}
        self.hparams_mtime: int | None = None
        self.records: dict[Path, HParamsRecord] = defaultdict(HParamsRecord)
        """Per event directory, its hparams summaries (``add_hparams`` sessions, Lightning's hparams)."""
        self.last_values: dict[Path, dict[str, float]] = defaultdict(dict)
        """Per event directory, the last value read of each scalar tag (the hparams metrics are read there)."""
        self.roles: dict[Path, str] = {}
        """How each part that gave series so far had its tags named."""
        self.yaml_config: dict = {}
        self.sent: tuple[dict, dict | None] = ({}, None)
        """The config and ``hparams`` the last batch that changed them gave."""

    def parts(self) -> list[tuple[Path, list[Path], str]]:
        """(event directory, its event files, how its tags are named: :data:`OWN`, :data:`JOINED`, :data:`SESSION`
        or a Keras split) of every part of the run."""
        own = event_files(self.key)
        if not own:
            splits = [(self.key / split, event_files(self.key / split), split) for split in KERAS_SPLITS]
            return [part for part in splits if part[1]]
        parts = [(self.key, own, OWN)]
        sessions = self.probe.sessions(self.key)
        for child in subdirectories(self.key):
            files = event_files(child)
            if not files or (child in sessions and len(sessions) > 1):
                continue  # a sweep's sessions are runs of their own
            parts.append((child, files, SESSION if child in sessions else JOINED))
        return parts

    def read(self) -> Batch:
        """New scalars of every event file of the run, and the config and ``hparams`` when they changed."""
        batch = Batch()
        try:
            masked_crc32c, event_proto, tensor_util = load_modules()
        except ImportSourceError as exc:
            batch.notes.append(str(exc))
            batch.unreadable = UNREADABLE
            return batch
        parts = self.parts()
        if any(self.roles.get(directory, role) != role for directory, _, role in parts) or \
                set(self.roles) & set(self.probe.separate(self.key)):
            self._restart(batch)
        mtimes = []
        for directory, files, role in parts:
            tensors: Scalars = defaultdict(lambda: ([], [], []))
            for path in files:
                self._read_file(path, (masked_crc32c, event_proto, tensor_util), directory, tensors, batch.notes)
                writer = writer_of(path.name)
                if writer is not None:
                    batch.writers.append(writer)
                try:
                    mtimes.append(path.stat().st_mtime)
                except OSError:
                    pass
            series = self._scalars(directory, tensors, _renamer(directory, role))
            if series:
                self.roles[directory] = role
            batch.series += series
            batch.notes += self.records[directory].notes
            self.records[directory].notes.clear()
        batch.last_write = max(mtimes, default=None)
        self._read_config(batch, [directory for directory, _, _ in parts])
        return batch

    def _restart(self, batch: Batch) -> None:
        """Forget everything read: how the run's directories are joined changed, so it is read again from the start."""
        batch.restart = True
        for state in (self.offsets, self.plugins, self.pending, self.records, self.last_values, self.roles):
            state.clear()

    def _read_file(self, path: Path, modules: tuple, directory: Path, tensors: Scalars, notes: list[str]) -> None:
        masked_crc32c, event_proto, tensor_util = modules
        plugins, record_of_hparams = self.plugins[directory], self.records[directory]
        scan = RecordScan(read=self.offsets.get(path, 0))
        unparsed = 0
        try:
            for record in iter_records(path, masked_crc32c, scan):
                try:
                    add_event(event_proto.FromString(record), plugins, tensors, tensor_util, record_of_hparams)
                except Exception:  # one record that does not parse is skipped, not the file
                    unparsed += 1
        except (OSError, LimitError) as exc:  # vanished, unreadable, or not a regular file
            notes.append(f"{path.name}: not read ({exc})")
        self.offsets[path] = scan.read
        if unparsed:
            notes.append(f"{path.name}: {unparsed} record(s) that do not parse were skipped")
        if scan.stopped and CRC_FAILURE in scan.stopped:
            self._note_stuck(path, scan, notes)
        else:
            self.stuck.pop(path, None)

    def _note_stuck(self, path: Path, scan: RecordScan, notes: list[str]) -> None:
        """A checksum that fails twice at the same place of a file that did not grow is corruption, not a torn write."""
        try:
            size = path.stat().st_size
        except OSError:
            return
        if self.stuck.get(path) == (scan.read, size):
            notes.append(f"{path.name}: reading stopped at byte {scan.read:,} of {size:,}: {scan.stopped}")
        self.stuck[path] = (scan.read, size)

    def _scalars(self, directory: Path, tensors: Scalars, rename: Callable[[str], str]) -> list[SourceSeries]:
        """The series of tags known to be scalars; tensor values of tags not yet named wait in ``pending``."""
        plugins, pending = self.plugins[directory], self.pending[directory]
        result = []
        for tag in sorted(set(tensors) | set(pending)):
            plugin = plugins.get(tag)
            if plugin is None:
                waiting = pending.setdefault(tag, ([], [], []))
                for kept, new in zip(waiting, tensors.get(tag, ([], [], []))):
                    kept.extend(new)
                continue
            lists = pending.pop(tag, ([], [], []))
            if plugin != SCALARS_PLUGIN:
                continue
            steps, values, walls = (a + b for a, b in zip(lists, tensors.get(tag, ([], [], []))))
            if steps:
                result.append(SourceSeries.from_lists(rename(tag), steps, values, walls))
                self.last_values[directory][tag] = values[-1]
        return result

    def _read_config(self, batch: Batch, directories: list[Path]) -> None:
        """The config (the newest ``add_hparams`` session's values under Lightning's ``hparams.yaml``, read again
        whenever it changes) and ``hparams``, given in ``batch`` when either changed."""
        try:
            mtime: int | None = (self.key / LIGHTNING_HPARAMS).stat().st_mtime_ns
        except OSError:
            mtime = None
        if mtime != self.hparams_mtime:
            self.hparams_mtime = mtime
            self.yaml_config = lightning_hparams(self.key, batch.notes) if mtime is not None else {}
        hparams = newest_hparams([(self.records[d], self.last_values[d]) for d in directories])
        config = {**(hparams["params"] if hparams else {}), **self.yaml_config}
        if (config, hparams) != self.sent or batch.restart:
            self.sent = (config, hparams)
            batch.config, batch.hparams = config, hparams

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
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Callable

from tuidiag.importers.source import ImportSourceError, SourceSeries
from tuidiag.importers.tables import LIGHTNING_HPARAMS, lightning_hparams
from tuidiag.importers.tensorboard import KERAS_SPLITS, SCALARS_PLUGIN, Scalars, add_event, is_event_file, load_modules
from tuidiag.importers.tfrecord import RecordScan, iter_records
from tuidiag.sources.foreign_run import ForeignSource
from tuidiag.sources.run_source import Batch, Claim, Tail
from tuidiag.store.limits import LimitError

KIND = "tensorboard"
CRC_FAILURE = "CRC"
"""Reading stopped at a record whose checksum fails: corrupt (a record cut off by a flush fails on its length instead)."""


def event_files(directory: Path) -> list[Path]:
    """The event files directly in ``directory``, in name (creation) order; none when it cannot be listed."""
    try:
        return sorted(directory / name for name in os.listdir(directory) if is_event_file(name))
    except OSError:
        return []


class TensorBoardSource(ForeignSource):
    """TensorBoard log directories (``SummaryWriter``, Lightning's ``TensorBoardLogger``, Keras, TF)."""

    kind = KIND

    def claim(self, directory: Path, dirnames: list[str], filenames: list[str]) -> Claim | None:
        """A directory with event files (its subdirectories join it), or the parent of Keras' splits."""
        if any(is_event_file(name) for name in filenames):
            return Claim((directory,))
        if any(name in KERAS_SPLITS and event_files(directory / name) for name in dirnames):
            return Claim((directory,))
        return None

    def owner_of(self, changed: Path) -> Path | None:
        """The run of an event file: its directory, or the directory above when that joins it."""
        if not is_event_file(changed.name):
            return None
        folder = changed.parent
        if folder.name in KERAS_SPLITS or event_files(folder.parent):
            return folder.parent
        return folder

    def tail(self, key: Path) -> Tail:
        """A reader of the run's event files from where it last stopped."""
        return TensorBoardTail(key)


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


class TensorBoardTail(Tail):
    """The event files of one run, each read on from the byte where its last read stopped."""

    def __init__(self, key: Path) -> None:
        self.key = key
        self.offsets: dict[Path, int] = {}
        self.plugins: dict[Path, dict[str, str]] = defaultdict(dict)
        """Per event directory, the plugin each tag belongs to (TF2 names it in the tag's first event only)."""
        self.pending: dict[Path, Scalars] = defaultdict(dict)
        """Tensor values of tags whose plugin no event has named yet."""
        self.stuck: dict[Path, tuple[int, int]] = {}
        self.hparams_mtime: int | None = None

    def parts(self) -> list[tuple[Path, list[Path], Callable[[str], str]]]:
        """(event directory, its event files, how its tags are named) of every part of the run."""
        own = event_files(self.key)
        if not own:
            splits = [(self.key / split, event_files(self.key / split), _prefixed(prefix)) for split, prefix in KERAS_SPLITS.items()]
            return [part for part in splits if part[1]]
        parts = [(self.key, own, _same)]
        try:
            children = sorted(e.name for e in os.scandir(self.key) if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
        except OSError:
            children = []
        for child in children:
            files = event_files(self.key / child)
            if files:
                parts.append((self.key / child, files, _joined_name(child)))
        return parts

    def read(self) -> Batch:
        """New scalars of every event file of the run, and the config when ``hparams.yaml`` changed."""
        batch = Batch()
        try:
            masked_crc32c, event_proto, tensor_util = load_modules()
        except ImportSourceError as exc:
            batch.notes.append(str(exc))
            return batch
        mtimes = []
        for directory, files, rename in self.parts():
            tensors: Scalars = defaultdict(lambda: ([], [], []))
            for path in files:
                self._read_file(path, (masked_crc32c, event_proto, tensor_util), self.plugins[directory], tensors, batch.notes)
                try:
                    mtimes.append(path.stat().st_mtime)
                except OSError:
                    pass
            batch.series += self._scalars(directory, tensors, rename)
        batch.last_write = max(mtimes, default=None)
        self._read_hparams(batch)
        return batch

    def _read_file(self, path: Path, modules: tuple, plugins: dict[str, str], tensors: Scalars, notes: list[str]) -> None:
        masked_crc32c, event_proto, tensor_util = modules
        scan = RecordScan(read=self.offsets.get(path, 0))
        unparsed = 0
        try:
            for record in iter_records(path, masked_crc32c, scan):
                try:
                    add_event(event_proto.FromString(record), plugins, tensors, tensor_util)
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
        return result

    def _read_hparams(self, batch: Batch) -> None:
        """Lightning's ``hparams.yaml`` as config, read again whenever it changes."""
        try:
            mtime = (self.key / LIGHTNING_HPARAMS).stat().st_mtime_ns
        except OSError:
            return
        if mtime != self.hparams_mtime:
            self.hparams_mtime = mtime
            batch.config = lightning_hparams(self.key, batch.notes)

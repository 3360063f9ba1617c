"""One file of a rank's whole run: ``summaries/whole-r<rank>.parquet``.

A run of many shards keeps a summary beside each (:mod:`tuidiag.store.summary_files`); opening it
read every one of them and every shard's footer (a 1M-step run of 20 shards: 20 summaries, 20 footers,
then merging their levels and building the coarser ones: about 90 ms of the 130 ms the run view's data
took). The whole-run file holds what a reader makes of them: each metric's levels from the finest kept
up to one bucket, the (step, wall time) marks of the shards' row groups, and the shards it stands for,
by file name and size. The recorder writes it when it closes; ``tuidiag compact RUN`` too.

Its pages carry CRCs, checked as read, and a CRC covers the shard list and wall marks of its footer: a
damaged file is noticed, not drawn. It only ever saves time. A reader uses it when every shard it names
is still there at its size and no other shard holds rows older than its newest (shards written after it
are read after it); otherwise, or when it is missing, malformed, damaged or of another version, the
reader reads the shards.
The table has the summaries' schema and version (one row per metric, level and bucket).
"""

from __future__ import annotations

import base64
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from tuidiag.format import SUMMARIES_DIR
from tuidiag.store.decode import ShardError
from tuidiag.store.envelope import SHIFT_STEP, Pyramid
from tuidiag.store.summary_files import read_levels_and_metadata, summary_table

COVERS_KEY = b"tuidiag.covers"
"""JSON list of ``[file name, size in bytes]`` of the metrics shards the file stands for."""
WALL_STEPS_KEY = b"tuidiag.wall_steps"
WALL_TIMES_KEY = b"tuidiag.wall_times"
"""The marks of :meth:`~tuidiag.store.envelope_run.EnvelopeRun.wall_marks`: little-endian float64, base64."""
CRC_KEY = b"tuidiag.whole_crc"
"""CRC-32 of the three values above (the footer has no checksum of its own; the pages have theirs)."""


@dataclass(frozen=True)
class Whole:
    """What a whole-run file holds, read at a reader's floor."""

    pyramids: dict[str, Pyramid]
    covers: dict[str, int]
    """Shard file name -> size in bytes."""
    walls: tuple[np.ndarray, np.ndarray]
    """(steps, wall times)."""


def whole_path(run_dir: Path, rank: int) -> Path:
    """Where the whole-run file of ``rank`` lives."""
    return run_dir / SUMMARIES_DIR / f"whole-r{rank}.parquet"


def whole_table(pyramids: dict[str, Pyramid], covers: dict[str, int], walls: tuple[np.ndarray, np.ndarray]) -> pa.Table:
    """The whole-run table of ``pyramids`` (every level of each), standing for the shards ``covers`` (pure)."""
    rows = sum(pyramid.levels[min(pyramid.levels)].rows for pyramid in pyramids.values())
    table = summary_table(pyramids, rows)
    steps, times = (np.ascontiguousarray(a, dtype="<f8") for a in walls)
    values = {COVERS_KEY: json.dumps(sorted([name, size] for name, size in covers.items())).encode(),
              WALL_STEPS_KEY: base64.b64encode(steps.tobytes()), WALL_TIMES_KEY: base64.b64encode(times.tobytes())}
    return table.replace_schema_metadata({**table.schema.metadata, **values, CRC_KEY: str(_crc(values)).encode()})


def _crc(values: dict[bytes, bytes]) -> int:
    return zlib.crc32(b"\0".join(values[key] for key in (COVERS_KEY, WALL_STEPS_KEY, WALL_TIMES_KEY)))


def read_whole(path: Path, floor: int) -> Whole | None:
    """The whole-run file at ``path`` with each metric's levels from ``floor`` up, as written; ``None`` when a
    metric's levels do not run from ``floor`` up to one bucket (written for another floor: read the shards).
    Raises ``FileNotFoundError``, :class:`ShardError` (malformed, another version) or an Arrow error, as
    :func:`read_levels` does."""
    found, meta = read_levels_and_metadata(path, None, min_shift=floor, views=True)  # kept whole: views, not copies
    try:
        if int(meta[CRC_KEY]) != _crc(meta):
            raise ShardError("a whole-run file's metadata is damaged (its CRC differs)")
        covers_raw = json.loads(meta[COVERS_KEY])
        steps = np.frombuffer(base64.b64decode(meta[WALL_STEPS_KEY], validate=True), dtype="<f8")
        times = np.frombuffer(base64.b64decode(meta[WALL_TIMES_KEY], validate=True), dtype="<f8")
    except (KeyError, ValueError, TypeError) as exc:
        raise ShardError(f"not a whole-run file: {exc}") from exc
    if not (isinstance(covers_raw, list) and covers_raw and all(
            isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and type(item[1]) is int and item[1] >= 0
            for item in covers_raw)):
        raise ShardError("a whole-run file names no shards, or names them wrongly")
    if len(steps) != len(times) or not (np.all(np.isfinite(steps)) and np.all(np.isfinite(times))):
        raise ShardError("a whole-run file's wall marks do not pair up")
    pyramids = {}
    for name, by_shift in found.items():
        chain = range(floor, max(by_shift) + 1, SHIFT_STEP)
        if set(by_shift) != set(chain) or len(by_shift[max(by_shift)]) > 1:
            return None  # written for another floor (or not from the finest up to one bucket): read the shards
        pyramids[name] = Pyramid(dict(by_shift))
    return Whole(pyramids, {name: size for name, size in covers_raw}, (steps.astype(np.float64), times.astype(np.float64)))

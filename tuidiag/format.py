"""The on-disk contract of a tuidiag run directory: schemas, names and versions.

Everything that writes or reads a run goes through the constants here, so the
format is defined in exactly one place. ``docs/format.md`` describes the same
contract for people and for other tools (pandas, DuckDB, Polars).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

FORMAT_VERSION = 1
"""Bumped on any change a reader of the previous version could misread."""

FORMAT_VERSION_KEY = b"tuidiag.format_version"
TABLE_KIND_KEY = b"tuidiag.table"

MANIFEST_NAME = "run.json"
METRICS_DIR = "metrics"
EVENTS_DIR = "events"
CAPTURES_DIR = "captures"
SUMMARIES_DIR = "summaries"
"""Min/max envelopes of each metrics shard, one file per shard under the shard's name (format.md section 4b)."""
SUMMARY_VERSION_KEY = b"tuidiag.summary_version"
SUMMARY_FORMAT_VERSION = 1
"""Version of the ``summaries`` table, apart from ``FORMAT_VERSION``: a reader skips a summaries file of a
higher version (and reads its shard instead); nothing a format-1 reader reads changed when summaries came."""
SHARD_SUFFIX = ".parquet"
TEMP_PREFIX = "."

STATUS_RUNNING = "running"
STATUS_FINISHED = "finished"
STATUS_FAILED = "failed"
STATUS_CRASHED = "crashed"
STATUS_INTERRUPTED = "interrupted"
"""Written when the training ended by Ctrl-C (``KeyboardInterrupt``) or SIGTERM."""


def _schema(fields: list["pa.Field"], table: str) -> "pa.Schema":
    """Attach the format version and table kind to a schema's metadata."""
    import pyarrow as pa

    meta = {FORMAT_VERSION_KEY: str(FORMAT_VERSION).encode(), TABLE_KIND_KEY: table.encode()}
    return pa.schema(fields, metadata=meta)


def _metrics_schema() -> "pa.Schema":
    """Long-form metric rows. ``seq`` is the flush that produced the row; it
    survives compaction so a tailing reader neither misses nor double-counts."""
    import pyarrow as pa

    return _schema(
        [
            pa.field("step", pa.int64(), nullable=False),
            pa.field("wall_time", pa.float64(), nullable=False),
            pa.field("metric", pa.dictionary(pa.int32(), pa.string()), nullable=False),
            pa.field("value", pa.float64(), nullable=True),
            pa.field("rank", pa.int32(), nullable=False),
            pa.field("seq", pa.int64(), nullable=False),
        ],
        "metrics",
    )


def _events_schema() -> "pa.Schema":
    """One row per event; ``data`` holds a JSON object with event-specific details."""
    import pyarrow as pa

    return _schema(
        [
            pa.field("step", pa.int64(), nullable=False),
            pa.field("wall_time", pa.float64(), nullable=False),
            pa.field("kind", pa.dictionary(pa.int32(), pa.string()), nullable=False),
            pa.field("severity", pa.dictionary(pa.int32(), pa.string()), nullable=False),
            pa.field("message", pa.string(), nullable=False),
            pa.field("data", pa.string(), nullable=True),
            pa.field("rank", pa.int32(), nullable=False),
            pa.field("seq", pa.int64(), nullable=False),
        ],
        "events",
    )


def _summaries_schema() -> "pa.Schema":
    """One row per (metric, level, bucket) of one metrics shard: see :mod:`tuidiag.store.envelope`."""
    import pyarrow as pa

    schema = _schema(
        [
            pa.field("metric", pa.dictionary(pa.int32(), pa.string()), nullable=False),
            pa.field("shift", pa.int32(), nullable=False),
            *(pa.field(name, pa.int64(), nullable=False) for name in ("bucket", "count", "bad")),
            *(pa.field(name, pa.float64(), nullable=False) for name in ("lo", "hi", "total", "lo_pos")),
            *(pa.field(name, pa.int64(), nullable=False) for name in ("first_step", "first_bad", "last_step")),
            pa.field("last_value", pa.float64(), nullable=False),
        ],
        "summaries",
    )
    return schema.with_metadata({**schema.metadata, SUMMARY_VERSION_KEY: str(SUMMARY_FORMAT_VERSION).encode()})


_LAZY_SCHEMAS = {"METRICS_SCHEMA": _metrics_schema, "EVENTS_SCHEMA": _events_schema, "SUMMARIES_SCHEMA": _summaries_schema}
"""``METRICS_SCHEMA`` and ``EVENTS_SCHEMA`` are built on first use (PEP 562), so that the names and
constants here import without pyarrow: ``tuidiag status`` reads ``run.json`` only and starts in milliseconds."""


def __getattr__(name: str) -> Any:
    if name in _LAZY_SCHEMAS:
        value = globals()[name] = _LAZY_SCHEMAS[name]()
        return value
    raise AttributeError(f"module 'tuidiag.format' has no attribute {name!r}")

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_SHARD_RE = re.compile(r"^r(\d+)-(\d{9,})-(\d{9,})\.parquet$")


@dataclass(frozen=True, order=True)
class ShardName:
    """A shard's identity, parsed from its file name ``r<rank>-<first>-<last>.parquet``.

    ``first`` and ``last`` are the inclusive range of flush sequence numbers whose
    rows the shard holds: a fresh shard has ``first == last``; a compacted one spans
    the shards it replaced.
    """

    rank: int
    first: int
    last: int

    @property
    def filename(self) -> str:
        """The file name this shard is stored under."""
        return f"r{self.rank}-{self.first:09d}-{self.last:09d}{SHARD_SUFFIX}"

    @classmethod
    def parse(cls, filename: str) -> "ShardName | None":
        """Parse a shard file name; ``None`` for anything else (temp files, foreign files)."""
        match = _SHARD_RE.match(filename)
        if match is None:
            return None
        rank_text, first_text, last_text = match.groups()
        if len(rank_text) > 10 or len(first_text) > 19 or len(last_text) > 19:  # never parse a huge number
            return None
        rank, first, last = int(rank_text), int(first_text), int(last_text)
        if last < first or rank > _INT32_MAX or last > _INT64_MAX:  # the columns' types: int32, int64
            return None
        return cls(rank, first, last)


# Metric naming conventions (docs/format.md lists them for users).
LOSS = "train/loss"
GRAD_NORM_TOTAL = "grad_norm/total"
GRAD_NORM_PREFIX = "grad_norm/"
GRAD_CLIPPED = "grad/clipped"
GRAD_MAX_NORM = "grad/max_norm"
GRAD_NONE_COUNT = "grad/none_count"
WEIGHT_NORM_PREFIX = "weight_norm/"
UPDATE_RATIO_PREFIX = "update_ratio/"
LR_PREFIX = "lr/group"
LR_GROUP0 = LR_PREFIX + "0"
"""The first parameter group's learning rate: the LR a run is said to have (charts, rules, the overview)."""
MODEL_TRAINING = "model/training"
TIME_STEP = "time/step"
TIME_DATA_WAIT = "time/data_wait"
TIME_COMPUTE = "time/compute"
ACT_DEAD_PREFIX = "act/dead_frac/"
ACT_SATURATED_PREFIX = "act/saturated_frac/"
ACT_MEAN_PREFIX = "act/mean/"
ACT_STD_PREFIX = "act/std/"
INPUT_PREFIX = "input/"
TARGET_PREFIX = "target/"
SYS_PREFIX = "sys/"
SYS_CPU_PERCENT = "sys/cpu_percent"
"""The training process's CPU use since the previous sample, in % of one core (psutil; > 100 with threads)."""
SYS_RSS = "sys/rss_bytes"
"""The training process's resident memory, in bytes (psutil)."""
SYS_HOST_MEM_PERCENT = "sys/host_mem_percent"
"""Memory in use on the host, in % of its total (psutil)."""
SYS_CHILD_PROCESSES = "sys/child_processes"
"""Child processes of the training alive at the sample (psutil): DataLoader workers among them, so a worker that dies
shows as a drop. Not named for the workers: a child cannot be told to be one (Python keeps no record of what a
started child process runs), and a compile pool or a logger's subprocess counts too. Runs recorded before 2026-11-29
hold the same count as ``sys/dataloader_workers``."""
SYS_MEM_ALLOCATED = "sys/mem_allocated"
"""Bytes the CUDA allocator holds in tensors on the training's device (``torch.cuda.memory_allocated``)."""
SYS_MEM_RESERVED = "sys/mem_reserved"
"""Bytes the CUDA allocator reserved on the device (``torch.cuda.memory_reserved``)."""
SYS_MEM_PEAK = "sys/mem_peak"
"""The most bytes allocated in tensors on the device so far (``torch.cuda.max_memory_allocated``)."""
SYS_GPU_UTIL = "sys/gpu_util"
"""The GPU's utilisation, in % of the sample period a kernel ran (NVML)."""
SYS_GPU_MEM_UTIL = "sys/gpu_mem_util"
"""The GPU's memory-bus utilisation, in % (NVML)."""
RECORDER_DROPPED = "recorder/dropped_rows"
RECORDER_ERRORS = "recorder/errors"
RECORDER_REJECTED = "recorder/rejected_values"
RECORDER_LOST = "recorder/lost_rows"
# Probes for the silent bugs (gradients not zeroed, the loss function's inputs, batch order).
GRAD_STALE_NORM = "grad/stale_norm"
"""L2 norm of the gradients the optimizer's parameters still held when the first backward after an optimizer step began."""
TARGET_MAJORITY_CLASS = "target/majority_class"
LOSS_FN_PROB_ROWS = "loss_fn/prob_rows"
LOSS_FN_UNIT_SHARE = "loss_fn/unit_share"
LOSS_FN_CLASSES = "loss_fn/classes"
LOSS_FN_BROADCAST = "loss_fn/broadcast"

DIST_WEIGHT_PREFIX = "dist/weight/"
DIST_GRAD_PREFIX = "dist/grad/"
"""``histograms_every=N``: every N steps each parameter's weights and gradient are summarised as
``dist/weight/<param>/q0`` ... ``/q100``, ``/mean``, ``/nonfinite`` (and ``dist/grad/...``), as
``SummaryWriter.add_histogram`` users record them."""
SUMMARY_QUANTILES = {"q0": 0.0, "q5": 0.05, "q25": 0.25, "q50": 0.5, "q75": 0.75, "q95": 0.95, "q100": 1.0}
"""A multi-element tensor or array logged as ``name`` becomes ``name/q0`` ... ``name/q100``
(quantiles of its finite elements), ``name/mean`` (their mean) and ``name/nonfinite``."""
SUMMARY_MEAN = "mean"
SUMMARY_NONFINITE = "nonfinite"
SUMMARY_SUFFIXES = (*SUMMARY_QUANTILES, SUMMARY_MEAN, SUMMARY_NONFINITE)

# Event kinds.
EVENT_NONFINITE = "nonfinite"
EVENT_NO_GRAD = "no_grad"
EVENT_RECORDER_ERROR = "recorder_error"
EVENT_CAPTURE = "nan_capture"
EVENT_DROPPED = "dropped_rows"
EVENT_ACTION = "action"
"""A live action (LR change, clipping, checkpoint), written once the next steps showed whether it held:
``data`` holds ``action``, ``args``, ``request`` and ``status`` (``applied`` or ``failed``, with ``reason``)."""
EVENT_RESUMED = "resumed"
"""A recorder continued the run: ``data`` has ``from_step`` and the config keys that changed."""
EVENT_REJECTED = "rejected_value"
EVENT_LOST = "lost_rows"
EVENT_TEXT = "text"
EVENT_CONFIG = "config"
"""The config grew or changed during the run (``rec.config.update``, ``rec.log_hparams``); ``data.changes`` lists how."""
HPARAM_PREFIX = "hparam/"
"""Metrics given to ``rec.log_hparams`` (as TensorBoard's hparams metrics), one row each at the step of the call."""
EVENT_LOSS_FN = "loss_fn"
"""The loss function given to ``watch()``, at the first step its inputs were checked: ``data`` has ``key`` (its name)
and ``expects``."""
EVENT_LOSS_SHAPES = "loss_shapes"
"""The loss function's input and target shapes differ and broadcast: ``data`` has ``key`` (the shapes in words)
and both shapes."""

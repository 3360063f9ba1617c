"""Size and depth limits on every file tuidiag reads, checked before anything is parsed or allocated.

Run directories may be written by other programs, other users, or damaged: a
number a file claims (its size, a footer's row count, a record's length, a JSON
nesting) is checked against what the file can really hold before tuidiag acts on
it. A file over its limit raises :class:`LimitError` (a ``ValueError``, so every
reader's existing "malformed file" path skips it with a message naming it).
``docs/guarantees.md`` ("Limits") lists each file with its limit.

JSON is read by :func:`read_json_bounded`: the size comes from ``fstat`` on the
open file (no stat-then-open race, a FIFO never blocks), and the nesting depth is
measured without recursion before ``json.loads`` runs (its C decoder recurses, so a
deep document would otherwise end in ``RecursionError``).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

KiB, MiB = 1 << 10, 1 << 20

MAX_JSON_DEPTH = 64
"""Nesting of arrays and objects in any JSON tuidiag reads (``run.json`` and its config included)."""
MAX_MANIFEST_BYTES = 16 * MiB
"""``run.json``."""
MAX_JOB_RESULT_BYTES = 16 * MiB
"""``jobs/*.json``: a job's result."""
MAX_CONTROL_REQUEST_BYTES = 64 * KiB
"""``control/*.request.json``, read by the training: a job name and a few arguments."""
MAX_CONTROL_STATUS_BYTES = 1 * MiB
"""``control/*.status.json``, read by the CLI and the monitor."""
MAX_STATUS_CACHE_BYTES = 64 * KiB
"""One cached finding of ``tuidiag status``."""
MAX_EVENT_DATA_BYTES = 1 * MiB
"""The ``data`` JSON of one event row; over it (or too deep) the event keeps its message and
``data`` becomes ``{"raw": <its first 1,024 characters>}``."""
MAX_KERAS_HISTORY_BYTES = 64 * MiB
"""A Keras ``History`` JSON to import (one number per epoch and metric)."""
MAX_CSV_BYTES = 256 * MiB
"""A CSV metrics log to import (pandas holds every cell as text: several times the file in memory)."""
MAX_CSV_HEADER_BYTES = 64 * KiB
"""The header line read to guess a CSV's delimiter."""
MAX_HPARAMS_BYTES = 1 * MiB
"""Lightning's ``hparams.yaml`` beside an imported log."""
MAX_CONFIG_NODES = 100_000
"""Values in a config read from YAML, counting each visit (anchors and aliases can repeat or loop a subtree)."""
MAX_TFRECORD_BYTES = 16 * MiB
"""One record of a TensorBoard event file; longer ones (graphs, images) are skipped unread, never allocated."""
MAX_ROWS_PER_BYTE = 64
"""Rows a Parquet shard may claim per byte of file (tuidiag writes at most about 6; pyarrow, all columns constant, 50)."""
MAX_UNCOMPRESSED_PER_BYTE = 1024
"""Decompressed bytes a Parquet shard's footer may claim per byte of file (tuidiag's shards: under 10)."""
MAX_RESERVE_ROWS_PER_BYTE = 8
"""Rows per byte of a shard the reader reserves memory for ahead of reading (address space only, untouched;
when it cannot be had, buffers grow as rows arrive)."""
SHARD_THRIFT_STRING_BYTES = 16 * MiB
SHARD_THRIFT_CONTAINER_ITEMS = 100_000
"""Limits on a shard footer's strings and lists, passed to pyarrow's footer parser."""


class LimitError(ValueError):
    """A file over one of the limits above; the message names the file and the limit."""


def open_bounded(path: str | os.PathLike[str], max_bytes: int | None) -> BinaryIO:
    """``path`` opened for binary reading, once ``fstat`` shows a regular file of at most ``max_bytes``
    (``None``: any size, for files read as a stream); raises :class:`LimitError` otherwise.

    Opening never blocks (a FIFO is refused, not waited on). ``OSError`` passes through.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LimitError(f"{path} is not a regular file (a directory, FIFO or device); not read")
        if max_bytes is not None and info.st_size > max_bytes:
            raise LimitError(_too_large(path, info.st_size, max_bytes))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file ``path`` if it holds at most ``max_bytes``; raises :class:`LimitError`.

    The size is checked on the open file before reading (:func:`open_bounded`), and at
    most ``max_bytes + 1`` bytes are ever read (a file growing meanwhile is caught too).
    """
    with open_bounded(path, max_bytes) as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(min(size, max_bytes) + 1)  # one byte more: a file that grew is caught
        if len(data) > size and len(data) <= max_bytes:
            data += handle.read(max_bytes + 1 - len(data))
    if len(data) > max_bytes:
        raise LimitError(_too_large(path, len(data), max_bytes))
    return data


def read_json_bounded(path: str | os.PathLike[str], max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value in ``path``: at most ``max_bytes`` and ``max_depth`` levels, else :class:`LimitError`.

    Invalid UTF-8 or JSON raises ``ValueError``; ``OSError`` passes through.
    """
    text = read_bytes_bounded(path, max_bytes).decode("utf-8")
    return loads_bounded(text, max_depth, name=str(path))


def loads_bounded(text: str, max_depth: int = MAX_JSON_DEPTH, name: str = "JSON text") -> Any:
    """``json.loads(text)`` once :func:`json_depth` shows it nests at most ``max_depth`` levels."""
    depth = json_depth(text, stop_after=max_depth)
    if depth > max_depth:
        raise LimitError(f"{name} nests more than {max_depth} levels of arrays and objects (MAX_JSON_DEPTH)")
    return json.loads(text)


_ESCAPE = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*(?:"|\Z)')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_CHUNK = 1 << 20
_SMALL = 1 << 16
"""Brackets counted in plain Python; more go through numpy."""
_OPENING = frozenset(b"[{")


def json_depth(text: str, stop_after: int | None = None) -> int:
    """The deepest nesting of ``[``/``{`` in ``text`` outside strings, without recursion, in linear time.

    Escapes are dropped first (so ``\\"`` never ends a string), then strings (an
    unterminated one runs to the end), then everything but brackets; the depth is
    the running sum's maximum. Malformed text gets some number; ``json.loads`` rejects it after.
    With ``stop_after``, a text with no more than that many opening brackets returns early.
    """
    if stop_after is not None and text.count("[") + text.count("{") <= stop_after:
        return min(stop_after, text.count("[") + text.count("{"))
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPE.sub("", text))).encode("ascii")
    depth = deepest = 0
    if len(brackets) <= _SMALL:  # a run.json: no numpy import (``tuidiag status`` starts without it)
        for code in brackets:
            depth += 1 if code in _OPENING else -1
            deepest = max(deepest, depth)
        return deepest
    import numpy as np

    for start in range(0, len(brackets), _CHUNK):
        codes = np.frombuffer(brackets, np.uint8, count=min(_CHUNK, len(brackets) - start), offset=start)
        steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1).astype(np.int64)
        running = np.cumsum(steps) + depth
        deepest = max(deepest, int(running.max()))
        depth = int(running[-1])
    return deepest


def check_tree(value: Any, name: str, max_depth: int = MAX_JSON_DEPTH, max_nodes: int = MAX_CONFIG_NODES) -> None:
    """Raise :class:`LimitError` when ``value`` (dicts and lists) nests deeper than ``max_depth`` or,
    counting each visit, holds more than ``max_nodes`` values (a structure that refers to itself does).

    Iterative: no recursion, whatever the input. For values built by a parser that
    can share or loop subtrees (YAML anchors), where a byte limit alone bounds nothing.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > max_nodes:
            raise LimitError(f"{name} holds more than {max_nodes:,} values, counting repeats (MAX_CONFIG_NODES)")
        if isinstance(item, dict):
            children: Any = list(item.keys()) + list(item.values())
        elif isinstance(item, (list, tuple, set)):
            children = item
        else:
            continue
        if depth > max_depth:
            raise LimitError(f"{name} nests more than {max_depth} levels (MAX_JSON_DEPTH)")
        stack.extend((child, depth + 1) for child in children)


def _too_large(path: str | os.PathLike[str], size: int, max_bytes: int) -> str:
    return f"{Path(path)} is {size:,} bytes, over the limit of {max_bytes:,}; not read"

"""Which shards a reader takes and how it decodes them: read-ahead on a helper thread,
sequence filtering, row estimates. No torch, no UI.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from tuidiag.format import ShardName
from tuidiag.store.decode import ShardError, check_footer, check_regular_file, open_parquet
from tuidiag.store.limits import MAX_RESERVE_ROWS_PER_BYTE, SHARD_THRIFT_CONTAINER_ITEMS, SHARD_THRIFT_STRING_BYTES
from tuidiag.store.seqset import SeqSet

def read_ahead(tables: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """Iterate ``tables`` while a helper thread decodes the next ones (Arrow drops the GIL).

    The first two items are produced on the calling thread, so a small shard (one
    batch) costs no thread; exceptions reach the caller at the item where they happened.
    """
    first = next(tables, _DONE)
    if first is _DONE:
        return
    yield first
    second = next(tables, _DONE)  # most shards are one batch: no thread for those
    if second is _DONE:
        return
    yield second
    items: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(entry: tuple[Any, BaseException | None]) -> bool:
        """Queue ``entry`` unless the consumer went away (then never block)."""
        while not stop.is_set():
            try:
                items.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in tables:
                if not offer((item, None)):
                    return
        except BaseException as exc:  # handed to the consumer
            offer((_DONE, exc))
            return
        offer((_DONE, None))

    thread = threading.Thread(target=produce, name="tuidiag-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, exc = items.get()
            if exc is not None:
                raise exc
            if item is _DONE:
                return
            yield item
    finally:
        stop.set()
        thread.join()


_DONE = object()


def outside_seqs(seqs: np.ndarray, shard: ShardName) -> np.ndarray:
    """The sequence numbers among ``seqs`` outside the shard name's range (normally none)."""
    if not len(seqs) or (seqs.min() >= shard.first and seqs.max() <= shard.last):
        return seqs[:0]
    return seqs[(seqs < shard.first) | (seqs > shard.last)]


def rows_in(shards: list[tuple[ShardName, Path]]) -> int:
    """Rows the reader will take from these shards (sorted as ``_unread`` sorts them), from
    their footers: a shard whose flushes an earlier one in the list covers is not counted.

    Only an estimate to size buffers with: a footer that fails :func:`check_footer` counts
    nothing, and no shard counts for more than :data:`MAX_RESERVE_ROWS_PER_BYTE` rows per byte.
    """
    total = 0
    planned: dict[int, SeqSet] = {}
    for shard, path in shards:
        covered = planned.setdefault(shard.rank, SeqSet())
        if covered.covers(shard.first, shard.last):
            continue
        try:
            size = check_regular_file(path)
            with open_parquet(path, thrift_string_size_limit=SHARD_THRIFT_STRING_BYTES,
                                thrift_container_size_limit=SHARD_THRIFT_CONTAINER_ITEMS) as handle:
                total += min(check_footer(handle.metadata, size), size * MAX_RESERVE_ROWS_PER_BYTE)
        except (OSError, pa.ArrowException, ValueError, ShardError):
            continue
        covered.add_range(shard.first, shard.last)
    return total

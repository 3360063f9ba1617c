"""Reading a TFRecord file (a TensorBoard event file) record by record, trusting no length it claims.

A record is ``uint64 length``, ``uint32`` masked CRC-32C of those 8 bytes, ``length``
bytes of data and their masked CRC-32C. tensorboard's own reader allocates
``length`` bytes before reading them, so one forged length could ask for
exabytes. Here a length is checked against the bytes left in the file first (more
than that: the file is corrupt or truncated there, and reading stops), and a
record longer than :data:`~tuidiag.store.limits.MAX_TFRECORD_BYTES` (a graph, an
image: never a scalar) is stepped over without being read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tuidiag.store.limits import MAX_TFRECORD_BYTES, open_bounded

HEADER_BYTES = 12
"""Length (8 bytes) and its CRC (4)."""
FOOTER_BYTES = 4


@dataclass
class RecordScan:
    """What reading one file came to: bytes accounted for, and why reading stopped early (if it did)."""

    read: int = 0
    skipped: list[int] = field(default_factory=list)
    """Lengths of the records stepped over unread (over the record limit)."""
    stopped: str | None = None


def iter_records(path: Path, masked_crc32c: Callable[[bytes], int], scan: RecordScan,
                 max_record: int = MAX_TFRECORD_BYTES) -> Iterator[bytes]:
    """The data of each record of ``path`` in order; ``scan`` says how far it got and why it stopped.

    Reading stops, without raising, at a record whose length or CRC is wrong or that the
    file ends inside; ``scan.read`` counts the bytes of the whole records before it.
    Reading starts at ``scan.read`` (0 for a fresh scan): a file that grows is read on
    from where the last scan of it stopped.
    """
    with open_bounded(path, None) as handle:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(scan.read)
        while True:
            header = handle.read(HEADER_BYTES)
            if not header:
                return
            if len(header) < HEADER_BYTES:
                scan.stopped = "truncated record header"
                return
            length, length_crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != length_crc:
                scan.stopped = "record length fails its CRC"
                return
            if length > size - scan.read - HEADER_BYTES - FOOTER_BYTES:
                scan.stopped = f"record claims {length:,} bytes, more than the file has left"
                return
            if length > max_record:
                handle.seek(length + FOOTER_BYTES, os.SEEK_CUR)
                scan.read += HEADER_BYTES + length + FOOTER_BYTES
                scan.skipped.append(length)
                continue
            data = handle.read(length)
            footer = handle.read(FOOTER_BYTES)
            if len(data) < length or len(footer) < FOOTER_BYTES:
                scan.stopped = "truncated record"
                return
            if masked_crc32c(data) != struct.unpack("<I", footer)[0]:
                scan.stopped = "record data fails its CRC"
                return
            scan.read += HEADER_BYTES + length + FOOTER_BYTES
            yield data

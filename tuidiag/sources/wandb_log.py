"""The framing of a W&B transaction log (``run-<id>.wandb``), read incrementally from a byte offset.

The file is a LevelDB-style log: a 7-byte header (``:W&B``, magic ``0xBEE1``, version 0),
then 32 KiB blocks of physical records (CRC-32 of type and data, ``uint16`` length,
``uint8`` type: FULL, or FIRST, MIDDLE..., LAST for a record split across blocks), a
block's last bytes zero-padded when a header no longer fits. Each whole record is one
serialized ``wandb.proto.wandb_internal_pb2.Record``, decoded by the wandb package.

wandb 0.21 and later ship no Python reader of this file (it lives in the Go
``wandb-core``), so the framing is read here; what the records mean is left to wandb's
own protobuf classes. A record the writer has not finished is left for the next read,
which starts again at its first physical record.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tuidiag.store.limits import open_bounded

FILE_HEADER = struct.pack("<4sHB", b":W&B", 0xBEE1, 0)
BLOCK = 32768
RECORD_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}
MAX_RECORD_BYTES = 64 * 2**20
"""A logical record longer than this (a huge table or media blob: never a scalar) is skipped unread."""


@dataclass
class LogScan:
    """Where reading got to (the offset the next read starts at) and why it stopped, if not at the end."""

    offset: int = 0
    stopped: str | None = None
    skipped: int = 0
    """Logical records over :data:`MAX_RECORD_BYTES` stepped over."""


def iter_log_records(path: Path, scan: LogScan) -> Iterator[bytes]:
    """Each whole record's data from ``scan.offset`` on; ``scan.offset`` advances past every record yielded.

    Stops without raising at the end of what was written, or at a bad header, CRC or
    record type (``scan.stopped`` says which).
    """
    with open_bounded(path, None) as handle:
        size = os.fstat(handle.fileno()).st_size
        if scan.offset == 0:
            head = handle.read(len(FILE_HEADER))
            if len(head) < len(FILE_HEADER):
                return  # the writer has not written the header yet
            if head != FILE_HEADER:
                scan.stopped = "not a W&B transaction log (bad file header)"
                return
            scan.offset = len(FILE_HEADER)
        position = scan.offset
        handle.seek(position)
        parts: list[bytes] = []
        length = 0
        in_record = False
        while True:
            left_in_block = BLOCK - position % BLOCK
            if left_in_block < RECORD_HEADER:  # zero padding at a block's end
                if position + left_in_block > size:
                    return
                handle.seek(left_in_block, os.SEEK_CUR)
                position += left_in_block
                if not in_record:
                    scan.offset = position
                continue
            header = handle.read(RECORD_HEADER)
            if len(header) < RECORD_HEADER:
                return
            crc, size_of_data, kind = struct.unpack("<IHB", header)
            if kind not in TYPE_CRC or size_of_data > left_in_block - RECORD_HEADER:
                scan.stopped = f"bad record header at byte {position:,}"
                return
            data = handle.read(size_of_data)
            if len(data) < size_of_data:
                return  # cut off by the writer's flush: read again next time
            if zlib.crc32(data, TYPE_CRC[kind]) != crc:
                scan.stopped = f"record at byte {position:,} fails its CRC"
                return
            position += RECORD_HEADER + size_of_data
            if (kind in (FULL, FIRST)) == in_record:  # a new record inside one, or a piece outside one
                scan.stopped = f"record pieces out of order at byte {position:,}"
                return
            if kind == FULL:
                scan.offset = position
                yield data
                continue
            in_record = True
            length += len(data)
            if length <= MAX_RECORD_BYTES:
                parts.append(data)
            else:
                parts.clear()
            if kind == LAST:
                scan.offset = position
                if length <= MAX_RECORD_BYTES:
                    yield b"".join(parts)
                else:
                    scan.skipped += 1
                parts, length, in_record = [], 0, False

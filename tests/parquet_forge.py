"""Forging numbers in a Parquet footer, as an attacker with a hex editor would.

A Parquet file ends with its footer (Thrift compact protocol), its length (4 bytes,
little-endian) and ``PAR1``. :func:`int_fields` walks the footer and lists every
integer field with its path of field ids; :func:`forge` rewrites one of them (the
varint may change length: the footer length is fixed up), leaving the data pages
alone. No Thrift library is needed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

FILE_NUM_ROWS = (3,)
"""FileMetaData.num_rows."""
ROW_GROUP_NUM_ROWS = (4, 3)
"""RowGroup.num_rows (under FileMetaData.row_groups)."""
COLUMN_NUM_VALUES = (4, 1, 3, 5)
"""ColumnMetaData.num_values (row_groups -> columns -> meta_data -> num_values)."""


@dataclass(frozen=True)
class IntField:
    """An integer in the footer: where its varint starts and ends, its value, its field-id path."""

    start: int
    end: int
    value: int
    path: tuple[int, ...]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return result, pos


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


class _Walker:
    def __init__(self, footer: bytes) -> None:
        self.data, self.fields = footer, []

    def struct(self, pos: int, path: tuple[int, ...]) -> int:
        field_id = 0
        while True:
            header = self.data[pos]
            pos += 1
            if header == 0:
                return pos
            kind, delta = header & 0x0F, header >> 4
            if delta:
                field_id += delta
            else:
                raw, pos = _varint(self.data, pos)
                field_id = _unzigzag(raw)
            pos = self.value(pos, kind, path + (field_id,))

    def value(self, pos: int, kind: int, path: tuple[int, ...]) -> int:
        if kind in (1, 2):  # booleans live in the field header
            return pos
        if kind == 3:
            return pos + 1
        if kind in (4, 5, 6):
            start = pos
            raw, pos = _varint(self.data, pos)
            self.fields.append(IntField(start, pos, _unzigzag(raw), path))
            return pos
        if kind == 7:
            return pos + 8
        if kind == 8:
            size, pos = _varint(self.data, pos)
            return pos + size
        if kind in (9, 10):
            header = self.data[pos]
            pos += 1
            size, element = header >> 4, header & 0x0F
            if size == 15:
                size, pos = _varint(self.data, pos)
            for _ in range(size):
                pos = self.value(pos, element, path) if element not in (1, 2) else pos + 1
            return pos
        if kind == 11:
            size, pos = _varint(self.data, pos)
            if size:
                types = self.data[pos]
                pos += 1
                for _ in range(size):
                    pos = self.value(pos, types >> 4, path)
                    pos = self.value(pos, types & 0x0F, path)
            return pos
        if kind == 12:
            return self.struct(pos, path)
        raise ValueError(f"unknown Thrift compact type {kind}")


def _split(data: bytes) -> tuple[int, bytes]:
    if data[-4:] != b"PAR1":
        raise ValueError("not a Parquet file")
    length = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - length
    return start, data[start:-8]


def int_fields(data: bytes) -> list[IntField]:
    """Every integer field of the file's footer, positions relative to the footer's start."""
    _, footer = _split(data)
    walker = _Walker(footer)
    walker.struct(0, ())
    return walker.fields


def forge(data: bytes, path: tuple[int, ...], value: int, which: int | None = None) -> bytes:
    """``data`` with the integer field(s) at ``path`` set to ``value`` (all of them, or the ``which``-th)."""
    start, footer = _split(data)
    targets = [f for f in int_fields(data) if f.path == path]
    if not targets:
        raise ValueError(f"no integer field at {path}")
    if which is not None:
        targets = [targets[which]]
    out = bytearray(footer)
    for item in sorted(targets, key=lambda f: f.start, reverse=True):
        out[item.start : item.end] = _encode_varint(_zigzag(value))
    return data[:start] + bytes(out) + struct.pack("<I", len(out)) + b"PAR1"

"""Building Arrow arrays from numpy buffers and Python strings without importing pandas.

``pyarrow.array`` checks every input for pandas objects and so imports pandas the
first time it runs when pandas is installed: 1-2 seconds of the writer thread
holding the import lock (and the GIL for much of it) and some 60 MB in the
training process, just before the first shard is written. A training killed in
that time lost rows it should have had on disk. These builders go through
``pyarrow.Array.from_buffers``, which never looks at pandas.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

_NUMPY_TYPES = {pa.int32(): np.int32, pa.int64(): np.int64, pa.float64(): np.float64}


def numeric(values: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    """A non-null Arrow array of ``arrow_type`` (int32, int64 or float64) holding ``values``."""
    data = np.ascontiguousarray(values, dtype=_NUMPY_TYPES[arrow_type])
    return pa.Array.from_buffers(arrow_type, len(data), [None, pa.py_buffer(data)])


def strings(items: Sequence[str]) -> pa.Array:
    """A non-null Arrow string array; text that is not valid UTF-8 (lone surrogates) is replaced."""
    encoded = [item.encode("utf-8", "replace") for item in items]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("string column over 2 GiB")
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(encoded), buffers)


def dictionary(codes: np.ndarray, values: Sequence[str]) -> pa.DictionaryArray:
    """A dictionary<int32, string> array: ``codes`` index into ``values``."""
    return pa.DictionaryArray.from_arrays(numeric(codes, pa.int32()), strings(values))


def encoded(items: Sequence[str]) -> pa.DictionaryArray:
    """``items`` dictionary-encoded (each distinct string once)."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(item, len(index)) for item in items), dtype=np.int32, count=len(items))
    return dictionary(codes, list(index))

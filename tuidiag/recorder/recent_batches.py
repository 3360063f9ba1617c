"""The batches given to ``rec.batch()`` that the recorder keeps by reference.

The newest :data:`ALWAYS` are kept for the NaN capture (an asynchronously
detected non-finite step must still find its batch). A recorder that accepts
live jobs keeps more, up to :data:`FOR_JOBS`, so an LR sweep or a sharpness
estimate inside the training sees enough distinct data; the extra ones are
kept only while all kept batches together hold at most :data:`MAX_BYTES` of
tensors (references keep memory, on the GPU too, from being reused). Nothing is
copied.
"""

from __future__ import annotations

from collections import deque
from typing import Any

ALWAYS = 4
"""Batches always kept (the NaN capture's window)."""
FOR_JOBS = 16
"""Batches kept at most when live jobs are accepted."""
MAX_BYTES = 64 << 20
"""Beyond :data:`ALWAYS`, batches are kept only while all kept tensors total at most this many bytes."""


def tensor_bytes(value: Any) -> int:
    """Bytes held by the tensors (and numpy arrays) nested in lists, tuples and dicts of ``value``."""
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    nbytes = getattr(value, "nbytes", None)
    return int(nbytes) if isinstance(nbytes, int) else 0


class RecentBatches:
    """The newest batches by step: ``ALWAYS`` of them, up to ``most`` within ``max_bytes``."""

    def __init__(self, most: int = ALWAYS, max_bytes: int = MAX_BYTES) -> None:
        self.most, self.max_bytes = max(most, ALWAYS), max_bytes
        self._kept: deque[tuple[int, Any, int]] = deque()
        self._bytes = 0

    def add(self, step: int, batch: Any) -> None:
        """Keep ``batch`` (given at ``step``); drop the oldest beyond the count or the byte limit."""
        size = tensor_bytes(batch)
        self._kept.append((step, batch, size))
        self._bytes += size
        while len(self._kept) > self.most or (len(self._kept) > ALWAYS and self._bytes > self.max_bytes):
            self._bytes -= self._kept.popleft()[2]

    def of_step(self, step: int) -> Any:
        """The batch given at ``step``, if still kept."""
        return next((batch for s, batch, _ in self._kept if s == step), None)

    def batches(self) -> list[Any]:
        """The kept batches, oldest first."""
        return [batch for _, batch, _ in self._kept]

    def clear(self) -> None:
        """Forget every batch."""
        self._kept.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def nbytes(self) -> int:
        """Bytes of tensors kept now."""
        return self._bytes

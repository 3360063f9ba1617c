"""Statistics of the tensors a replay keeps, taken only when asked for or just before an op overwrites them.

Used by :class:`tuidiag.jobs.nan_trace.Tracer` for the inputs and outputs of every module call.
"""

from __future__ import annotations

from typing import Any

import torch

from tuidiag.jobs.tensors import float_tensors, named_stats


def _storage_key(t: torch.Tensor) -> int:
    """What tells tensors sharing memory apart (views of one tensor share it)."""
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return id(t)


class LazyStats:
    """Statistics of the tensors kept under a key, taken when asked for, or just before an op overwrites them.

    Computing them for every module call would cost more than the replay itself;
    the report needs them for one or two modules. An in-place op that writes into
    a kept tensor (or a view of it) makes them be taken first, so they still
    describe the values as they were kept.
    """

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, Any]] = {}
        self.taken: dict[str, dict[str, Any]] = {}
        self.by_storage: dict[int, set[str]] = {}

    def keep(self, key: str, **named: Any) -> None:
        """Remember the values ``named`` (stats named after each keyword) under ``key``, replacing earlier ones."""
        self.kept[key] = named
        self.taken.pop(key, None)
        for t in float_tensors(list(named.values())):
            self.by_storage.setdefault(_storage_key(t), set()).add(key)

    def before_write(self, tensors: list[torch.Tensor]) -> None:
        """Take the stats of every kept value that shares memory with ``tensors`` (about to be overwritten)."""
        for t in tensors:
            for key in self.by_storage.pop(_storage_key(t), set()):
                if key in self.kept and key not in self.taken:
                    self.taken[key] = self._stats(key)

    def get(self, key: str) -> dict[str, Any]:
        """The stats kept under ``key`` (empty when nothing was kept)."""
        if key not in self.taken and key in self.kept:
            self.taken[key] = self._stats(key)
        return self.taken.get(key, {})

    def _stats(self, key: str) -> dict[str, Any]:
        return {name: stats for prefix, value in self.kept[key].items() for name, stats in named_stats(value, prefix).items()}

    def __contains__(self, key: str) -> bool:
        return key in self.kept

"""System statistics sampled on the writer thread at each flush: device memory, GPU use."""

from __future__ import annotations

from typing import Any

_probes: dict[int, Any] = {}


def system_rows(watch: Any) -> tuple[list[str], list[float]]:
    """Metric names and values for the watched model's device (empty on CPU)."""
    if watch is None or watch.device.type != "cuda":
        return [], []
    from tuidiag.recorder.device import NvmlProbe, memory_stats

    stats = memory_stats(watch.device)
    probe = _probes.get(id(watch))
    if probe is None:
        probe = _probes[id(watch)] = NvmlProbe(watch.device)
    stats.update(probe.sample())
    return list(stats), list(stats.values())

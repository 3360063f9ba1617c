"""System statistics sampled on the writer thread at each flush: host CPU and memory, device memory, GPU use."""

from __future__ import annotations

from typing import Any

from tuidiag.recorder.host_probe import HostProbe

_probes: dict[int, Any] = {}


def system_rows(watch: Any, host: HostProbe | None) -> tuple[list[str], list[float]]:
    """Metric names and values: the process and host (``host``, when psutil is there), and the watched model's CUDA device."""
    stats: dict[str, float] = host.sample() if host is not None else {}
    if watch is not None and watch.device.type == "cuda":
        from tuidiag.recorder.device import NvmlProbe, memory_stats

        stats.update(memory_stats(watch.device))
        probe = _probes.get(id(watch))
        if probe is None:
            probe = _probes[id(watch)] = NvmlProbe(watch.device)
        stats.update(probe.sample())
    return list(stats), list(stats.values())

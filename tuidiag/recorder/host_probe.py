"""CPU-side system metrics of the training process, sampled on the writer thread at each flush.

Sampled for a training whose model is watched (``rec.watch``); a run fed only through
``rec.log`` holds only what it logs.

With psutil installed: the process's CPU use and resident memory, the host's memory
in use, and how many child processes are alive (DataLoader workers are among the training's
children, so a worker that dies shows as a drop; so are a compile pool's or a logger's). Without psutil nothing is sampled.
Sampling costs a few system calls per flush and never touches the training thread.
"""

from __future__ import annotations

from typing import Any

from tuidiag.format import SYS_CPU_PERCENT, SYS_CHILD_PROCESSES, SYS_HOST_MEM_PERCENT, SYS_RSS


class HostProbe:
    """Samples the training process through psutil; :meth:`sample` returns ``{}`` when psutil is missing."""

    def __init__(self) -> None:
        self._process: Any = None
        try:
            import psutil
        except ImportError:
            return
        self._psutil = psutil
        try:
            self._process = psutil.Process()
            self._process.cpu_percent(None)  # the first call starts the interval the next one measures
        except Exception:
            self._process = None

    def sample(self) -> dict[str, float]:
        """The metrics now; a metric the platform refuses is left out, never raised."""
        if self._process is None:
            return {}
        out: dict[str, float] = {}
        readers = (
            (SYS_CPU_PERCENT, lambda: self._process.cpu_percent(None)),
            (SYS_RSS, lambda: self._process.memory_info().rss),
            (SYS_HOST_MEM_PERCENT, lambda: self._psutil.virtual_memory().percent),
            (SYS_CHILD_PROCESSES, lambda: sum(1 for c in self._process.children() if c.is_running())),
        )
        for name, read in readers:
            try:
                out[name] = float(read())
            except Exception:
                continue
        return out

"""The recorder's side of ``run.json``: start (or resume), describe the model, beat, finish.

Only rank 0 writes the manifest. The dict is updated from the training thread
(``describe``) and written by the writer thread at each heartbeat.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tuidiag.store.manifest import jsonable, new_manifest, read_manifest, write_manifest


class RunManifest:
    """The manifest of one run, as the recording process sees it."""

    def __init__(self, run_dir: Path, rank: int, name: str, config: dict[str, Any], world_size: int, flush_interval: float, factory: str | None) -> None:
        self.run_dir = run_dir
        self.writes = rank == 0
        self.data = new_manifest(name, config, world_size, flush_interval)
        self.data["factory"] = factory
        self.resume_step = 0
        """The step a resumed run continues from (0 for a new run)."""
        self.start_error: OSError | None = None
        """Why the first write failed (disk full, read-only); the next heartbeat tries again."""
        if self.writes:
            self._resume()
            try:
                write_manifest(run_dir, self.data)
            except OSError as exc:  # never stop a training from starting
                self.start_error = exc

    def _resume(self) -> None:
        try:
            previous = read_manifest(self.run_dir)
        except (OSError, ValueError):
            return
        self.data.update(run_id=previous.get("run_id", self.data["run_id"]), created=previous.get("created", self.data["created"]))
        self.data["resumed"] = int(previous.get("resumed", 0)) + 1
        if isinstance(previous.get("last_step"), int):
            self.resume_step = previous["last_step"] + 1

    def describe(self, model: Any, optimizer: Any, max_grad_norm: float | None) -> None:
        """Add the model summary and optimizer settings (written at the next heartbeat)."""
        from tuidiag.recorder.model_summary import summarize

        self.data["model"] = summarize(model)
        if optimizer is not None:
            groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
            self.data["optimizer"] = {"class": type(optimizer).__name__, "param_groups": jsonable(groups)}
        self.data["max_grad_norm"] = max_grad_norm

    def allow_control(self, pid: int, uid: int, host: str, has_loss: bool, device: str) -> None:
        """Say that this training accepts control requests (jobs run in the live process)."""
        self.data["control"] = {"pid": pid, "uid": uid, "host": host, "loss_fn": has_loss, "device": device}

    def heartbeat(self, last_step: int, stats: dict[str, int]) -> None:
        """Write the manifest with a fresh heartbeat (rank 0 only)."""
        if not self.writes:
            return
        self.data.update(heartbeat=time.time(), last_step=last_step if last_step >= 0 else None, stats=stats)
        write_manifest(self.run_dir, self.data)

    def finish(self, status: str, last_step: int, stats: dict[str, int]) -> None:
        """Mark the run finished/failed and write it one last time."""
        self.data.update(status=status, ended=time.time())
        self.heartbeat(last_step, stats)

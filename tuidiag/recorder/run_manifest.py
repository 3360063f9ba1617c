"""The recorder's side of ``run.json``: start (or continue) a run, describe the model, beat, finish.

Only rank 0 writes the manifest. The dict is updated from the training thread
(``describe``) and written by the writer thread at each heartbeat. Which
directory it goes to is decided by :mod:`tuidiag.recorder.placement`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuidiag.format import STATUS_RUNNING
from tuidiag.recorder.arguments import STEP_LIMIT
from tuidiag.recorder.placement import Placement, ResumeError, UnusablePathError, launch_key, place, usable_dir
from tuidiag.store.manifest import effective_status, jsonable, new_manifest, write_manifest
from tuidiag.store.tail_summary import SUMMARY_KEY, read_summary
from tuidiag.store.progress import LOGGED_STEP_KEY

MAX_CONFIG_CHANGES = 100
"""Changed config keys listed in a ``resumed`` event; more are counted, not listed."""


@dataclass
class Resumed:
    """What continuing a run found: where the new session starts and what changed."""

    from_step: int
    previous_last_step: int | None
    previous_status: str
    count: int
    config_changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    more_changes: int = 0

    def message(self) -> str:
        """The ``resumed`` event's text."""
        last = "no steps" if self.previous_last_step is None else f"last step {self.previous_last_step}"
        text = f"resumed at step {self.from_step} (previous session {self.previous_status}, {last})"
        if self.config_changes:
            shown = ", ".join(change_text(k, v) for k, v in list(self.config_changes.items())[:5])
            extra = len(self.config_changes) + self.more_changes - 5
            text += f"; config changed: {shown}" + (f" and {extra} more" if extra > 0 else "")
        return text

    def data(self, mode: str) -> dict[str, Any]:
        """The ``resumed`` event's ``data``."""
        return {"from_step": self.from_step, "previous_last_step": self.previous_last_step,
                "previous_status": self.previous_status, "resumed": self.count, "resume": mode,
                "config_changes": self.config_changes, "more_config_changes": self.more_changes}


class RunManifest:
    """The manifest of one run, as the recording process sees it."""

    def __init__(self, requested: Path, rank: int, name: str | None, config: dict[str, Any], world_size: int,
                 flush_interval: float, factory: str | None, resume: str = "never", start_step: int | None = None) -> None:
        self.writes = rank == 0
        self.started = time.time()
        """When this session started: the ``resumed`` event's time, before any row of the session."""
        self.resumed: Resumed | None = None
        self.earlier_stats: dict[str, int] = {}
        """The counts (rows written, values rejected, errors, ...) of the sessions before this one."""
        """Set when this session continues an earlier one (rank 0 only)."""
        self.floor_step = -1
        """The last step kept from the sessions before this one: ``last_step`` never goes below it."""
        self.start_error: Exception | None = None
        """Why the directory or the first write failed (disk full, read-only); the next heartbeat tries again."""
        self.degraded: str | None = None
        """Why this run is not where it was asked to be (a path that cannot be used); said in ``run.json``."""
        key = launch_key(world_size)
        self.data = new_manifest(name or requested.name, config, world_size, flush_interval)
        self.data["factory"] = factory
        self.data["session"] = {"launch": key, "started": self.started, "start_step": start_step or 0}
        usable, problem = usable_dir(requested)
        if problem is not None:
            self.degraded = f"the path asked for {problem}"
            self.data["degraded"] = [self.degraded]
            self.start_error = UnusablePathError(f"the run directory {str(requested)!r} cannot be used: its path {problem}; "
                                                 f"recording into {str(usable)!r} instead")
            requested = usable
        try:
            placement = place(requested, resume, self._fresh_manifest(name), rank, key)
        except ResumeError:
            raise
        except Exception as exc:  # a damaged directory must not stop the training: record beside it
            placement = Placement(requested.parent / f"{requested.name}-{self.data['run_id'][:8]}", error=exc)
        self.run_dir = placement.run_dir
        self.lock = placement.lock
        """The run directory's lock (rank 0), held until :meth:`release`."""
        self.note = placement.note
        """One line for stderr when the run went to another directory than asked."""
        self.start_error = self.start_error or placement.error
        self.resume_step = start_step or 0
        """The step this session's ``step()`` counts from."""
        if not self.writes:
            self._follow(placement)
        elif placement.previous is not None:
            try:
                self._continue(placement.previous, name, start_step)
            except Exception as exc:  # a run.json edited by hand: start this session afresh, in the same run
                self.start_error = self.start_error or exc
                self.resumed = None
                self.resume_step = start_step or 0
            try:
                write_manifest(self.run_dir, self.data)
            except (OSError, ValueError) as exc:  # never stop a training from starting
                self.start_error = self.start_error or exc

    def _fresh_manifest(self, name: str | None) -> Any:
        def build(path: Path) -> dict[str, Any]:
            self.data["name"] = name or path.name
            return self.data

        return build

    def _follow(self, placement: Placement) -> None:
        """A rank other than 0 counts its steps from where rank 0's session starts."""
        session = (placement.previous or {}).get("session")
        start = session.get("start_step") if isinstance(session, dict) else None
        if isinstance(start, int) and not isinstance(start, bool):
            self.resume_step = start

    def _continue(self, previous: dict[str, Any], name: str | None, start_step: int | None) -> None:
        """Merge the previous session's manifest into this one and note what changed.

        Every field of ``previous`` is checked: one of the wrong type or out of range (a
        ``run.json`` edited by hand or damaged) counts as missing."""
        last = previous.get("last_step")
        if not _is_count(last, STEP_LIMIT):
            last = _last_step_on_disk(self.run_dir)
        logged = previous.get(LOGGED_STEP_KEY)
        if last is not None and _is_count(logged, STEP_LIMIT):
            last = max(last, logged)  # count on past every step written: no earlier row is replaced
        count = previous.get("resumed", 0)
        count = (count if _is_count(count, 2**31) else 0) + 1
        config, changes = merge_config(previous.get("config"), self.data["config"])
        from_step = start_step if start_step is not None else (last + 1 if last is not None else 0)
        run_id, created, old_name = previous.get("run_id"), previous.get("created"), previous.get("name")
        self.data.update(
            run_id=run_id if isinstance(run_id, str) and run_id else self.data["run_id"],
            created=created if _is_time(created) else self.data["created"],
            name=name or (old_name if isinstance(old_name, str) and old_name else self.run_dir.name),
            resumed=count, config=config, last_step=from_step - 1 if from_step > 0 else None,
        )
        self.data[LOGGED_STEP_KEY] = self.data["last_step"]
        degraded = previous.get("degraded")
        earlier = [d for d in degraded if isinstance(d, str)] if isinstance(degraded, list) else []
        if earlier:  # a session that recorded beside the path asked for: still true of the run
            self.data["degraded"] = list(dict.fromkeys(earlier + self.data.get("degraded", [])))[:10]
        self.data["session"]["start_step"] = from_step
        if read_summary(previous) is not None:  # the newest values on disk stand until this session writes newer ones
            self.data[SUMMARY_KEY] = previous[SUMMARY_KEY]
        stats = previous.get("stats")
        self.earlier_stats = {k: v for k, v in (stats if isinstance(stats, dict) else {}).items()
                              if isinstance(v, int) and not isinstance(v, bool) and v > 0}
        self.floor_step = from_step - 1  # a rewind to an older step drops the abandoned steps from ``last_step``
        self.resume_step = from_step
        listed = dict(list(changes.items())[:MAX_CONFIG_CHANGES])
        try:
            status = effective_status(previous) if previous else "unknown"
        except Exception:  # odd types in a hand-edited run.json
            status = "unknown"
        self.resumed = Resumed(from_step, last, "crashed" if status == STATUS_RUNNING else status[:40], count,
                               listed, len(changes) - len(listed))

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

    def heartbeat(
        self, last_step: int, stats: dict[str, int], logged_step: int | None = None, summary: dict[str, Any] | None = None
    ) -> None:
        """Write the manifest with a fresh heartbeat (rank 0 only).

        ``last_step``: the last training step (:mod:`tuidiag.store.progress`); ``logged_step``:
        the highest step of any row written (default: ``last_step``); ``summary``: the newest rows
        on disk (:mod:`tuidiag.store.tail_summary`), if given."""
        if not self.writes:
            return
        last_step = max(last_step, self.floor_step)
        logged_step = max(last_step if logged_step is None else logged_step, self.floor_step)
        stats = {key: self.earlier_stats.get(key, 0) + value for key, value in stats.items()}  # the whole run's counts
        self.data.update(heartbeat=time.time(), last_step=last_step if last_step >= 0 else None, stats=stats)
        self.data[LOGGED_STEP_KEY] = logged_step if logged_step >= 0 else None
        if summary is not None:
            self.data[SUMMARY_KEY] = summary
        write_manifest(self.run_dir, self.data)

    def finish(self, status: str, last_step: int, stats: dict[str, int], logged_step: int | None = None) -> None:
        """Mark the run finished/failed and write it one last time."""
        self.data.update(status=status, ended=time.time())
        self.heartbeat(last_step, stats, logged_step)

    def release(self) -> None:
        """Give up the run directory's lock (after the last write); safe to call twice."""
        if self.lock is not None:
            self.lock.release()


def merge_config(previous: Any, new: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``previous`` updated with ``new`` (nested dicts merged key by key), and the changes.

    Changes are keyed by the ``/``-joined path of each leaf whose value differs or is
    new: ``{"old": ..., "new": ...}`` (no ``old`` for a key the previous session lacked).
    Keys only the previous session had are kept and are not changes.
    """
    merged = dict(previous) if isinstance(previous, dict) else {}
    changes: dict[str, dict[str, Any]] = {}
    _merge_into(merged, new, "", changes)
    return merged, changes


def _merge_into(target: dict[str, Any], new: dict[str, Any], prefix: str, changes: dict[str, dict[str, Any]]) -> None:
    for key, value in new.items():
        path = f"{prefix}{key}"
        old = target.get(key, _MISSING)
        if isinstance(old, dict) and isinstance(value, dict):
            inner = dict(old)
            _merge_into(inner, value, path + "/", changes)
            target[key] = inner
            continue
        if old is _MISSING:
            changes[path] = {"new": value}
        elif old != value or type(old) is not type(value):
            changes[path] = {"old": old, "new": value}
        target[key] = value


_MISSING = object()


def change_text(key: str, change: dict[str, Any]) -> str:
    """One config change in words: ``lr 0.1 -> 0.01`` or ``warmup = 100 (new)``."""
    new = _short(change.get("new"))
    return f"{key} {_short(change['old'])} -> {new}" if "old" in change else f"{key} = {new} (new)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _last_step_on_disk(run_dir: Path) -> int | None:
    """The highest recorded step, read from the shards (a run whose manifest does not say).

    ``None`` when there is none, or it leaves no room to count on (beyond ``STEP_LIMIT``)."""
    from tuidiag.store.reader import open_run

    try:
        last = open_run(run_dir).last_step
    except Exception:  # a damaged run: start counting at 0 rather than fail the training
        return None
    return last if _is_count(last, STEP_LIMIT) else None


def _is_count(value: Any, limit: int) -> bool:
    """An ``int`` (not a ``bool``) in ``[0, limit)``."""
    return type(value) is int and 0 <= value < limit


def _is_time(value: Any) -> bool:
    """A finite number of seconds since the epoch (not a ``bool``)."""
    return type(value) in (int, float) and math.isfinite(value) and 0 <= value < 1e11

"""Control requests: how the monitor or the CLI asks a live training to run a job.

A requester writes ``RUN/control/<id>.request.json``; the recorder inside the
training lists that directory at flush cadence, accepts only requests **owned
by the user the training runs as** (regular files, not symlinks, not writable by
group or others), runs the job at its next step boundary and reports through
``RUN/control/<id>.status.json``::

    {"id": "...", "job": "lr_find", "state": "running", "done": 40, "total": 100,
     "message": "...", "result": "jobs/lr_find-....json", "updated": 1715379302.1}

``state`` goes ``accepted`` -> ``running`` (or ``armed`` for a NaN hunt waiting
for a non-finite step, ``checking`` for a live action applied whose effect the next
steps must still show) -> one of ``done``, ``failed``, ``cancelled``, ``refused``,
``expired``. A requester cancels by creating ``RUN/control/<id>.cancel``. Every
file is written under a ``.``-prefixed temporary name and renamed into place, so
a reader sees a whole file or none. This module does not need torch.

A request runs **at most once**, whatever happens to its files: its id (inside the
file, equal to the file's name) is bound to its first execution in the training's
memory and in the append-only ``RUN/control/executed.jsonl``, written before it
runs; a request whose id is there is refused. Requests are taken only from a
control directory that the training's user owns and nobody else can write.

Every request is answered (:data:`FINAL_STATES`): a request the training cannot
read or understand is ``refused``, one whose job raises ``failed``, and one not run
before its deadline (the request's ``expires``), or still pending when the training
ends, ``expired``. The training *takes* a request (:func:`take`: an atomic rename)
when it starts it and a requester that gives up *withdraws* it (an unlink), so
exactly one of the two happens. A requester stops waiting when the training has
said nothing about the request for its deadline ("no answer from the training
within 60 s: it may be busy or gone") or when the run is no longer live; a
request never taken up it marks ``expired`` itself.
"""

from __future__ import annotations

import json
import math
import os
import socket
import stat
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuidiag import action_kinds, job_kinds
from tuidiag.format import STATUS_RUNNING
from tuidiag.store.limits import MAX_CONTROL_REQUEST_BYTES, MAX_CONTROL_STATUS_BYTES, loads_bounded, read_json_bounded
from tuidiag.store.manifest import effective_status, jsonable, read_manifest
from tuidiag.store.safe_write import append_line, rename_within, write_text_atomic
from tuidiag.store.trust import WRITABLE_BY_OTHERS, file_problem, info_problem

CONTROL_DIR = "control"
REQUEST_SUFFIX = ".request.json"
STATUS_SUFFIX = ".status.json"
CANCEL_SUFFIX = ".cancel"
LIVE_ACTIONS = action_kinds.names()
"""Changes to the live training itself (a diagnosis's fix tried without a restart), applied at the next step and
logged as ``action`` events (:mod:`tuidiag.action_kinds`)."""
FINAL_STATES = ("done", "failed", "cancelled", "refused", "expired")
TAKEN_SUFFIX = ".taken.json"
"""A request the training has taken up is renamed ``.<id>.taken.json`` (hidden: never listed again)."""
EXECUTED_LOG = "executed.jsonl"
"""Append-only log, one JSON line per request id a training took: each id runs at most once."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
POLL_SECONDS = 0.2
"""How often a requester reads the status file while it waits."""
LIVE_CHECK_SECONDS = 1.0
"""How often a waiting requester reads ``run.json`` to tell whether the training is still live."""
REQUEST_WAIT = 60.0
"""Default seconds a requester waits for the training to say anything about its request."""


def requestable() -> tuple[str, ...]:
    """What a request may name: every job kind a live training runs (:mod:`tuidiag.job_kinds`) and every live action."""
    return job_kinds.live_names() + LIVE_ACTIONS


class ControlError(Exception):
    """A request could not be written or read (a message a user can act on)."""


def control_dir(run_dir: str | os.PathLike[str]) -> Path:
    """``RUN/control``."""
    return Path(run_dir) / CONTROL_DIR


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` (in ``RUN/control``) atomically, readable and writable by the owner only."""
    write_text_atomic(path, json.dumps(jsonable(payload), allow_nan=False), mode=0o600, root=path.parent.parent)


def live_problem(manifest: dict[str, Any]) -> str | None:
    """Why a run with this manifest cannot take a job request now (None when it can)."""
    status = effective_status(manifest)
    if status != STATUS_RUNNING:
        return f"the run is {status}, not live"
    if not isinstance(manifest.get("control"), dict):
        return ("its recorder does not accept requests (Recorder(control=False), an older tuidiag, "
                "or no rec.watch(model, optimizer))")
    return None


def write_request(run_dir: str | os.PathLike[str], job: str, args: dict[str, Any] | None = None,
                  expires_in: float | None = None) -> str:
    """Ask the live training of ``run_dir`` to run ``job`` with ``args``; return the request id.

    ``expires_in``: seconds after which the training must no longer start it (it answers ``expired``)."""
    if job not in requestable():
        raise ControlError(f"unknown job {job!r}; one of {', '.join(requestable())}")
    directory = control_dir(run_dir)
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
        request_id = f"{job}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"
        payload = {"id": request_id, "job": job, "args": dict(args or {}), "created": time.time(),
                   "requested_by": {"uid": os.geteuid(), "pid": os.getpid(), "host": socket.gethostname()}}
        if expires_in is not None and math.isfinite(expires_in):
            payload["expires"] = payload["created"] + expires_in
        _write_json(directory / f"{request_id}{REQUEST_SUFFIX}", payload)
    except OSError as exc:
        raise ControlError(f"cannot write a control request in {directory}: {exc.strerror or exc}") from exc
    return request_id


def owner_problem(path: Path, uid: int) -> str | None:
    """Why ``path`` may not be trusted by a process running as ``uid`` (None when it may):
    :func:`tuidiag.store.trust.file_problem`."""
    return file_problem(path, uid)


def control_dir_problem(run_dir: str | os.PathLike[str], uid: int) -> str | None:
    """Why requests in ``RUN/control`` may not be trusted: the directory must be a real directory
    of the training's user that nobody else can write (else another user could rename files in it)."""
    directory = control_dir(run_dir)
    try:
        info = os.lstat(directory)
    except OSError as exc:
        return f"{directory} is unreadable ({exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory (symlinks are refused)"
    if info.st_uid != uid:
        return f"{directory} is owned by uid {info.st_uid}, not by the training's user (uid {uid})"
    if info.st_mode & WRITABLE_BY_OTHERS:
        return f"{directory} is writable by group or others"
    return None


def request_id_of(path: Path) -> str:
    """The request id a request file's name gives."""
    return path.name[: -len(REQUEST_SUFFIX)]


def read_request(path: Path, uid: int) -> dict[str, Any]:
    """The request in ``path`` if its owner may ask; raises :class:`ControlError` with the reason otherwise.

    The file is opened without following a link and judged by what was opened. A request
    carries its own id (equal to its file's name) and its creation time, and no state:
    a status file, a cancel file or a request renamed to another name is refused."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ControlError(f"unreadable ({exc.strerror or exc}; symlinks are refused)") from exc
    try:
        problem = info_problem(os.fstat(fd), uid)
        if problem is not None:
            raise ControlError(problem.replace(f"not by uid {uid}", f"not by the training's user (uid {uid})"))
        data = os.read(fd, MAX_CONTROL_REQUEST_BYTES + 1)
    except OSError as exc:
        raise ControlError(f"unreadable request ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if len(data) > MAX_CONTROL_REQUEST_BYTES:
        raise ControlError(f"over the limit of {MAX_CONTROL_REQUEST_BYTES:,} bytes for a request; not read")
    try:
        request = loads_bounded(data.decode("utf-8"), name=path.name)
    except ValueError as exc:
        raise ControlError(f"unreadable request ({exc})") from exc
    if not isinstance(request, dict) or request.get("job") not in requestable() or not isinstance(request.get("args", {}), dict):
        raise ControlError("malformed request")
    expires = request.get("expires")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, (int, float)) or not math.isfinite(expires)):
        raise ControlError("malformed request: 'expires' is not a time")
    request_id = request_id_of(path)
    if "state" in request or not isinstance(request.get("created"), (int, float)):
        raise ControlError("not a request (a status or result file renamed to a request's name?)")
    if request.get("id") != request_id:
        raise ControlError(f"its id {str(request.get('id'))[:80]!r} is not its file's name (a renamed request?)")
    return request


def executed_ids(run_dir: str | os.PathLike[str], uid: int) -> set[str]:
    """Ids of every request a training of this run has taken, from ``RUN/control/executed.jsonl``.

    Raises :class:`ControlError` when the log exists but cannot be trusted or read: then no
    request can be proven new."""
    path = control_dir(run_dir) / EXECUTED_LOG
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise ControlError(f"the log of executed requests is unreadable ({exc.strerror or exc})") from exc
    try:
        problem = info_problem(os.fstat(fd), uid)
        if problem is not None:
            raise ControlError(f"the log of executed requests {path} is {problem}")
        with os.fdopen(os.dup(fd), "rb") as fh:
            lines = fh.read().decode("utf-8", "replace").splitlines()
    finally:
        os.close(fd)
    ids = set()
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut by a crash: its request never ran past being taken
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            ids.add(entry["id"])
    return ids


def record_execution(run_dir: str | os.PathLike[str], request_id: str, job: str) -> None:
    """Append ``request_id`` to the log of executed requests (before it runs); raises ``OSError``."""
    line = json.dumps({"id": request_id, "job": job, "pid": os.getpid(), "time": time.time()})
    append_line(control_dir(run_dir) / EXECUTED_LOG, line, mode=0o600, root=Path(run_dir))


def request_files(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Request files waiting in ``RUN/control``, oldest name first ([] when there is no such directory)."""
    try:
        with os.scandir(control_dir(run_dir)) as entries:
            names = [e.name for e in entries if e.name.endswith(REQUEST_SUFFIX) and not e.name.startswith(".")]
    except OSError:
        return []
    return [control_dir(run_dir) / name for name in sorted(names)]


def write_status(run_dir: str | os.PathLike[str], request_id: str, job: str, state: str, **fields: Any) -> None:
    """Report a request's state (the training side)."""
    payload = {"id": request_id, "job": job, "state": state, "updated": time.time(), **fields}
    _write_json(control_dir(run_dir) / f"{request_id}{STATUS_SUFFIX}", payload)


def take(run_dir: str | os.PathLike[str], request_id: str) -> bool:
    """The training starts a request: hide its file (atomically). False when a requester withdrew it first."""
    directory = control_dir(run_dir)
    try:
        rename_within(directory, f"{request_id}{REQUEST_SUFFIX}", f".{request_id}{TAKEN_SUFFIX}")
    except FileNotFoundError:
        return False
    return True


def expire(run_dir: str | os.PathLike[str], request_id: str, job: str, message: str) -> dict[str, Any]:
    """Answer ``expired`` unless the request already has a final status; return its final status."""
    status = read_status(run_dir, request_id)
    if status is not None and status.get("state") in FINAL_STATES:
        return status
    status = {"id": request_id, "job": job, "state": "expired", "message": message}
    try:
        write_status(run_dir, request_id, job, "expired", message=message)
    except OSError:  # the answer stands for this requester even where it cannot be written
        pass
    withdraw(run_dir, request_id)
    return status


def no_answer(seconds: float) -> str:
    """What a requester says when the training has said nothing for ``seconds``."""
    return f"no answer from the training within {seconds:.0f} s: it may be busy or gone"


def read_status(run_dir: str | os.PathLike[str], request_id: str) -> dict[str, Any] | None:
    """A request's latest status, or None before the training has answered."""
    try:
        status = read_json_bounded(control_dir(run_dir) / f"{request_id}{STATUS_SUFFIX}", MAX_CONTROL_STATUS_BYTES)
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def await_answer(run_dir: str | os.PathLike[str], request_id: str, wait: float, total_wait: float = math.inf,
                 on_status: Callable[[dict[str, Any]], None] | None = None,
                 stop: Callable[[], bool] | None = None) -> dict[str, Any]:
    """Poll a request's status until its final state and return it.

    Gives up when the training has said nothing about the request for ``wait`` seconds,
    when ``total_wait`` seconds have passed, or at once when the run is no longer live
    (finished, failed, crashed). A request the training has not taken up then is
    withdrawn and answered ``expired`` here; one it is still running comes back as
    ``{"state": "unanswered", ...}`` (the training answers it later). ``on_status`` sees
    every new status read on the way. When ``stop()`` turns true (the monitor quits) it stops
    following at once and answers ``unanswered``, leaving the request to the training.
    """
    started = last_news = next_check = time.monotonic()
    last: dict[str, Any] | None = None
    while True:
        status = read_status(run_dir, request_id)
        now = time.monotonic()
        if status is not None and status != last:
            last, last_news = status, now
            if on_status is not None:
                on_status(status)
        if status is not None and status.get("state") in FINAL_STATES:
            return status
        if stop is not None and stop():
            return {"id": request_id, "job": str((last or {}).get("job", "")), "state": "unanswered",
                    "message": "stopped following; the training answers it in RUN/control"}
        if now >= next_check:
            next_check = now + LIVE_CHECK_SECONDS
            ended = _run_ended(run_dir)
            if ended is not None:
                return _give_up(run_dir, request_id, last, f"the training ended before answering: the run is {ended}", True)
        if now - last_news > wait:
            return _give_up(run_dir, request_id, last, no_answer(wait), False)
        if now - started > total_wait:
            untouched = last is None or last.get("state") == "accepted"
            message = no_answer(total_wait) if untouched else f"the training has not finished it within {total_wait:.0f} s"
            return _give_up(run_dir, request_id, last, message, False)
        time.sleep(POLL_SECONDS)


def _run_ended(run_dir: str | os.PathLike[str]) -> str | None:
    """The run's status when its training is no longer live (None while it is, or cannot be told)."""
    try:
        status = effective_status(read_manifest(Path(run_dir)))
    except Exception:  # unreadable for a moment (a rename in flight): ask again at the next check
        return None
    return None if status == STATUS_RUNNING else status


def _give_up(run_dir: str | os.PathLike[str], request_id: str, last: dict[str, Any] | None, message: str, ended: bool) -> dict[str, Any]:
    """Stop waiting: withdraw a request not taken up and answer it ``expired``; one the training took up
    is ``expired`` too when the training ended, else ``unanswered`` (the training will answer it)."""
    job = str((last or {}).get("job") or request_id.split("-", 1)[0])
    try:
        (control_dir(run_dir) / f"{request_id}{REQUEST_SUFFIX}").unlink()
        withdrawn = True
    except FileNotFoundError:
        withdrawn = False
    except OSError:
        withdrawn = ended
    if withdrawn or ended:
        return expire(run_dir, request_id, job, message)
    state = (last or {}).get("state", "taken up")
    return {"id": request_id, "job": job, "state": "unanswered", "message": f"{message} (the request was {state})"}


def send_and_wait(run_dir: str | os.PathLike[str], job: str, args: dict[str, Any], wait: float) -> tuple[bool, str]:
    """Send a request and wait up to ``wait`` seconds for its final state: ``(done, what the training said)``.

    A live action still ``checking`` (applied, the steps after it not seen yet) when the wait
    ends is not done: the answer says so, and that its event will tell."""
    try:
        request_id = write_request(run_dir, job, args, expires_in=wait)
    except ControlError as exc:
        return False, str(exc)
    seen: list[dict[str, Any]] = []
    status = await_answer(run_dir, request_id, wait, wait, on_status=seen.append)
    if status["state"] == "unanswered" and seen and seen[-1].get("state") == "checking":
        return False, (f"{seen[-1].get('message')}; not confirmed within {wait:.0f} s "
                       "(the training steps slowly?): its action event in the run will say whether it held")
    return status["state"] == "done", str(status.get("message", status["state"]))


def request_cancel(run_dir: str | os.PathLike[str], request_id: str) -> None:
    """Ask the training to stop a request (it stops at the job's next progress point)."""
    _write_json(control_dir(run_dir) / f"{request_id}{CANCEL_SUFFIX}", {"id": request_id, "created": time.time()})


def cancel_requested(run_dir: str | os.PathLike[str], request_id: str, uid: int) -> bool:
    """True when a cancel file for ``request_id`` exists and its owner may cancel."""
    path = control_dir(run_dir) / f"{request_id}{CANCEL_SUFFIX}"
    return path.exists() and owner_problem(path, uid) is None


def withdraw(run_dir: str | os.PathLike[str], request_id: str) -> None:
    """Remove a request (and its cancel file) that was answered or given up."""
    for name in (f"{request_id}{REQUEST_SUFFIX}", f"{request_id}{CANCEL_SUFFIX}", f".{request_id}{TAKEN_SUFFIX}"):
        try:
            (control_dir(run_dir) / name).unlink(missing_ok=True)
        except OSError:
            pass

"""The recorder's side of control requests (:mod:`tuidiag.store.control_channel`): jobs in the live training.

The writer thread lists ``RUN/control`` once per flush (:meth:`RequestRunner.poll`)
and queues requests whose file the training's own user owns; others are refused
with a status and an event. A request id runs at most once: it is bound to its
first execution in :attr:`RequestRunner.executed` and in ``RUN/control/executed.jsonl``
before it runs, and a file carrying an id seen before is removed with an event. The training thread runs queued jobs at the end of
``rec.step()`` (:meth:`RequestRunner.run_pending`): after backward, before the
optimizer step, with the recorder's own hooks paused, on the live model,
optimizer, loss and the recent batches. Every job restores model, optimizer and
RNG, gradients included, so the step that follows is the one that would have run.

A live action (:mod:`tuidiag.recorder.actions`) whose effect must show in the next
steps stays *checking* until they tell (:mod:`tuidiag.recorder.action_checks`); its
``action`` event is written then, at the step it was applied, saying whether it held.

A NaN hunt with no capture yet *arms* the run: it waits up to ``steps`` steps
(default 200) for the recorder's next non-finite capture and hunts on it at once.
Nothing is hooked while armed; the hunt's hooks exist only during its replay.

Every request gets a final status: one that raises anywhere is ``failed`` with the
reason (the others queued behind it still run), one past its ``expires`` or
withdrawn by its requester is not started (``expired``), and whatever is pending or
armed when the recorder closes is ``expired`` with the step the training ended at.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from tuidiag import job_kinds
from tuidiag.format import EVENT_ACTION
from tuidiag.job_kinds.configs import ARM_STEPS
from tuidiag.store import control_channel as ctl
from tuidiag.store.job_results import save_result

if TYPE_CHECKING:
    from tuidiag.recorder.action_checks import Verdict
    from tuidiag.recorder.actions import Applied

PROGRESS_EVERY = 0.5
"""Seconds between status-file updates (and cancel checks) while a job runs."""
OVERDUE_GRACE = 5.0
"""Seconds past a request's deadline before the writer thread answers it while no step comes: a requester
still waiting withdraws it first, with its own words."""


@dataclass
class Armed:
    """A NaN hunt waiting for a non-finite step."""

    request: dict[str, Any]
    first: int
    last: int
    cancelled: Callable[[], bool]


@dataclass
class Checking:
    """A live action applied at ``step`` whose effect the next steps must still show."""

    request: dict[str, Any]
    step: int
    applied: Applied


class RequestRunner:
    """Polls control requests and runs them in the training thread for one recorder."""

    def __init__(self, run_dir: Path, event: Callable[..., None], report: Callable[[str, BaseException], None]) -> None:
        self.run_dir = run_dir
        self.uid = os.geteuid()
        self.pending: deque[dict[str, Any]] = deque()
        self.armed: Armed | None = None
        self.checking: list[Checking] = []
        self._event, self._report = event, report
        self._listed: set[tuple[str, int, int]] = set()
        """Request files already looked at, by (name, inode, mtime): each file is read once."""
        self.executed: set[str] = set()
        """Ids this process took: each runs at most once (also in ``RUN/control/executed.jsonl``)."""
        self._armed_said = 0.0

    # ---- writer thread ---------------------------------------------------------------
    def poll(self) -> None:
        """Queue new requests from the training's user; refuse the others (never raises)."""
        try:
            for path in ctl.request_files(self.run_dir):
                try:
                    info = os.lstat(path)
                except OSError:
                    continue  # gone since listed
                key = (path.name, info.st_ino, info.st_mtime_ns)
                if key not in self._listed:
                    self._listed.add(key)
                    self._take(path, ctl.request_id_of(path))
        except Exception as exc:
            self._report("control", exc)

    def _take(self, path: Path, request_id: str) -> None:
        try:
            if request_id in self.executed or request_id in ctl.executed_ids(self.run_dir, self.uid):
                # the id's status belongs to its first execution: leave it, remove only this file
                with contextlib.suppress(OSError):
                    path.unlink(missing_ok=True)
                self._event("control_refused", f"refused control request {request_id}: it was executed once already "
                            "(a replayed request)", "warning")
                return
            problem = ctl.control_dir_problem(self.run_dir, self.uid)
            if problem is not None:
                raise ctl.ControlError(problem)
            request = ctl.read_request(path, self.uid)  # its id, inside, must be its file's name
            try:
                ctl.record_execution(self.run_dir, request_id, request["job"])  # bound before it runs
            except OSError as exc:
                raise ctl.ControlError(f"its id cannot be logged, so it could run twice ({exc.strerror or exc})") from exc
        except ctl.ControlError as exc:
            self._refuse(request_id, str(exc))
            return
        self.executed.add(request_id)
        ctl.write_status(self.run_dir, request_id, request["job"], "accepted", message="waiting for the next step")
        self.pending.append(request)

    def _refuse(self, request_id: str, reason: str) -> None:
        self._finish({"id": request_id, "job": "?"}, "refused", f"request refused: {reason}")
        self._event("control_refused", f"refused control request {request_id}: {reason}", "warning")

    # ---- training thread -------------------------------------------------------------
    def run_pending(self, step: int, job_runner: Callable[[dict[str, Any], Any], dict[str, Any]],
                    action_runner: Callable[[dict[str, Any]], Applied]) -> None:
        """Run every queued request now; ``job_runner(request, control)`` does a job,
        ``action_runner(request)`` applies a live action and says what changed."""
        while self.pending:
            request = self.pending.popleft()
            if not self._claim(request):
                continue
            try:
                self._start(request, step, job_runner, action_runner)
            except Exception as exc:  # malformed arguments and the like: answer, and go on with the next one
                self._finish(request, "failed", f"{type(exc).__name__}: {exc}")

    def _start(self, request: dict[str, Any], step: int, job_runner: Callable[[dict[str, Any], Any], dict[str, Any]],
               action_runner: Callable[[dict[str, Any]], Applied]) -> None:
        if request["job"] in ctl.LIVE_ACTIONS:
            self._act(request, step, action_runner)
            return
        if job_kinds.get(request["job"]).needs_capture:
            from tuidiag.jobs.nan_hunt import find_capture

            capture = find_capture(self.run_dir)
            if capture is None and self.armed is not None:
                self._finish(request, "failed", f"a NaN hunt is already armed (request {self.armed.request['id']})")
                return
            if capture is None:
                self._arm(request, step)
                return
            request = {**request, "capture": str(capture)}
        self._run(request, job_runner, step)

    def _run(self, request: dict[str, Any], job_runner: Callable[[dict[str, Any], Any], dict[str, Any]], step: int) -> None:
        """Run one job at ``step``; its result is saved with that step (it counts from there on)."""
        from tuidiag.jobs import JobHandle, JobCancelled, JobError

        job = request["job"]
        ctl.write_status(self.run_dir, request["id"], job, "running", done=0, total=0)
        try:
            result = job_runner({**request, "step": step}, JobHandle(self._progress(request), self._cancelled(request)))
        except JobCancelled as exc:
            self._finish(request, "cancelled", str(exc))
        except JobError as exc:
            self._finish(request, "failed", str(exc))
        except Exception as exc:  # the user's model or loss failed inside the job: report, keep training
            self._finish(request, "failed", f"{type(exc).__name__}: {exc}")
        else:
            path = save_result(self.run_dir, job, result, run=self.run_dir.name, device=result.get("device"), source="live",
                               step=step)
            kind = job_kinds.find(job)  # without a summary of its own, the event says its verdict (pass, fail, ...)
            summary = str(result.get("summary") or result.get("comparison") or (kind.verdict(result).text if kind else "finished"))
            # the event first: once the final status says done, a Ctrl-C that follows cannot lose the event
            self._event("job", f"{job.replace('_', ' ')} (live): {summary}", "info", {"result": str(path.name)})
            self._finish(request, "done", summary, result=str(path.relative_to(self.run_dir)))

    def _act(self, request: dict[str, Any], step: int, action_runner: Callable[[dict[str, Any]], Applied]) -> None:
        try:
            applied = action_runner(request)
        except Exception as exc:  # bad arguments or parts, or no effect possible: say so, keep training
            self._finish(request, "failed", f"{type(exc).__name__}: {exc}")
            return
        if applied.check is None:
            self._conclude(Checking(request, step, applied), None)
            return
        from tuidiag.recorder.action_checks import VERIFY_STEPS

        self.checking.append(Checking(request, step, applied))
        ctl.write_status(self.run_dir, request["id"], request["job"], "checking", applied_step=step,
                         message=f"applied at step {step}: {applied.message}; checking that the next {VERIFY_STEPS} steps show it")

    def check(self, step: int) -> None:
        """Called in ``rec.step(step)``: conclude the actions whose checks the steps so far decide."""
        for item in list(self.checking):
            verdict = item.applied.check.observe(step) if item.applied.check is not None else None
            if verdict is not None:
                self.checking.remove(item)
                self._conclude(item, verdict)

    def end_checks(self, step: int) -> None:
        """The training ends: conclude every action still being checked with what is known."""
        for item in self.checking:
            self._conclude(item, item.applied.check.end(step) if item.applied.check is not None else None)
        self.checking = []

    def _conclude(self, item: Checking, verdict: Verdict | None) -> None:
        """Final status and the ``action`` event (at the step it was applied) of a live action."""
        request, step = item.request, item.step
        failed = verdict is not None and not verdict.held
        message = item.applied.message + (f"; FAILED: {verdict.message}" if failed else f"; {verdict.message}" if verdict else "")
        data = {"action": request["job"], "args": request.get("args", {}), "request": request["id"],
                "status": "failed" if failed else "applied"}
        if failed:
            data["reason"] = verdict.message
        # the event first: once the final status says done, a Ctrl-C that follows cannot lose the event
        self._event(EVENT_ACTION, f"live action at step {step}: {message}", "error" if failed else "warning", data, step)
        self._finish(request, "failed" if failed else "done", message, applied_step=step)

    def _arm(self, request: dict[str, Any], step: int) -> None:
        steps = int(request.get("args", {}).get("steps", ARM_STEPS))
        self.armed = Armed(request, step + 1, step + max(1, steps), self._cancelled(request))
        message = f"armed: waiting up to {steps} steps for a non-finite loss or gradient"
        ctl.write_status(self.run_dir, request["id"], request["job"], "armed", message=message, done=0, total=steps)
        self._event("job", f"NaN hunt armed for steps {self.armed.first}-{self.armed.last}", "info")

    def on_capture(self, capture: Path | None, job_runner: Callable[[dict[str, Any], Any], dict[str, Any]], step: int) -> None:
        """The recorder captured the non-finite ``step``: run the armed NaN hunt on it."""
        armed, self.armed = self.armed, None
        if armed is None:
            return
        if capture is None:
            self._finish(armed.request, "failed", "the non-finite step could not be captured (see the run's events)")
            return
        self._run({**armed.request, "capture": str(capture)}, job_runner, step)

    def expire(self, step: int) -> None:
        """End an armed NaN hunt whose window has passed or that was cancelled."""
        armed = self.armed
        if armed is None:
            return
        if armed.cancelled():
            self.armed = None
            self._finish(armed.request, "cancelled", f"cancelled while armed, at step {step}")
            return
        if step < armed.last:
            return
        self.armed = None
        from tuidiag.jobs.in_training import nothing_found

        result = nothing_found(armed.last - armed.first + 1, armed.first, armed.last)
        path = save_result(self.run_dir, armed.request["job"], result, run=self.run_dir.name, source="live", step=step)
        self._finish(armed.request, "done", result["summary"], result=str(path.relative_to(self.run_dir)))

    # ---- deadlines: every request ends with a final status ------------------------------
    def _claim(self, request: dict[str, Any]) -> bool:
        """Take a queued request up to start it now; False (and it is answered) when it expired or was withdrawn."""
        if _overdue(request):
            self._expire(request, "not started before its deadline (the training reached no step in time)")
            return False
        if not ctl.take(self.run_dir, request["id"]):
            self._expire(request, "withdrawn by the requester before the training reached a step")
            return False
        return True

    def expire_overdue(self) -> None:
        """Writer thread, each flush: answer queued requests past their deadline while no step comes
        (a training busy elsewhere, a requester gone); never raises."""
        try:
            for request in list(self.pending):
                if _overdue(request, OVERDUE_GRACE) and ctl.take(self.run_dir, request["id"]):
                    self._expire(request, "not started before its deadline (the training reached no step in time)")
        except Exception as exc:
            self._report("control", exc)

    def armed_progress(self, step: int) -> None:
        """Tell the requester of an armed NaN hunt, now and then, how many steps it has waited."""
        armed = self.armed
        if armed is None:
            return
        now = time.monotonic()
        if now - self._armed_said < PROGRESS_EVERY:
            return
        self._armed_said = now
        message = f"armed: waiting up to {armed.last - armed.first + 1} steps for a non-finite loss or gradient"
        try:
            ctl.write_status(self.run_dir, armed.request["id"], armed.request["job"], "armed", message=message,
                             done=max(0, step - armed.first + 1), total=armed.last - armed.first + 1)
        except OSError as exc:
            self._report("control", exc)

    def expire_leftovers(self) -> None:
        """A new session of a run: answer what an earlier session took up and never finished (it died)."""
        try:
            for path in ctl.control_dir(self.run_dir).glob(f"*{ctl.STATUS_SUFFIX}"):
                request_id = path.name[: -len(ctl.STATUS_SUFFIX)]
                status = ctl.read_status(self.run_dir, request_id)
                if status is not None and status.get("state") not in ctl.FINAL_STATES:
                    ctl.expire(self.run_dir, request_id, str(status.get("job", "?")),
                               "the training that took it up ended before answering")
        except Exception as exc:
            self._report("control", exc)

    def close(self, step: int, status: str) -> None:
        """The training ends (``close()`` or exit): every request still pending or armed is answered
        ``expired`` with the step it ended at; requests that arrived since the last poll too. Never raises."""
        try:
            self.poll()
            why = f"the training ended ({status}) at step {step} before running it"
            while self.pending:
                self._expire(self.pending.popleft(), why)
            armed, self.armed = self.armed, None
            if armed is not None:
                self._expire(armed.request, f"the training ended ({status}) at step {step} while the NaN hunt waited "
                                            f"for a non-finite step (armed for steps {armed.first}-{armed.last})")
        except Exception as exc:
            self._report("control", exc)

    def _expire(self, request: dict[str, Any], message: str) -> None:
        try:
            ctl.expire(self.run_dir, request["id"], request["job"], message)
        except OSError as exc:
            self._report("control", exc)

    # ---- status --------------------------------------------------------------------
    def _finish(self, request: dict[str, Any], state: str, message: str, **fields: Any) -> None:
        try:
            ctl.write_status(self.run_dir, request["id"], request["job"], state, message=message, **fields)
            ctl.withdraw(self.run_dir, request["id"])
        except OSError as exc:
            self._report("control", exc)

    def _progress(self, request: dict[str, Any]) -> Callable[[int, int], None]:
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY or done == total:
                last[0] = now
                ctl.write_status(self.run_dir, request["id"], request["job"], "running", done=done, total=total)

        return progress

    def _cancelled(self, request: dict[str, Any]) -> Callable[[], bool]:
        last, answer = [0.0], [False]

        def cancelled() -> bool:
            now = time.monotonic()
            if not answer[0] and now - last[0] >= PROGRESS_EVERY:
                last[0] = now
                answer[0] = ctl.cancel_requested(self.run_dir, request["id"], self.uid)
            return answer[0]

        return cancelled


def _overdue(request: dict[str, Any], grace: float = 0.0) -> bool:
    """True when the request's ``expires`` (epoch seconds, set by its requester), plus ``grace``, has passed."""
    expires = request.get("expires")
    return isinstance(expires, (int, float)) and not isinstance(expires, bool) and time.time() > expires + grace


def job_runner_for(watch: Any, loss_fn: Any, batches: Callable[[], list[Any]],
                   forward: Callable[[Any, Any], Any] | None = None,
                   step: Callable[[], int] | None = None,
                   run_dir: Path | None = None) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    """How the recorder runs one request on the live parts (the output of a batch by ``forward(model, x)``,
    default ``model(x)``), with its own hooks paused; ``step()`` is the step the job runs at (its result
    says it measured the live weights of that step); ``run_dir`` the run's directory."""

    def run(request: dict[str, Any], control: Any) -> dict[str, Any]:
        from tuidiag.jobs import JobError
        from tuidiag.jobs.factory import Parts
        from tuidiag.jobs.in_training import run_request
        from tuidiag.jobs.weights import live_weights

        if watch is None or watch.optimizer is None:
            raise JobError("jobs need rec.watch(model, optimizer, loss_fn=criterion) in the training")
        model = getattr(watch.model, "module", watch.model)  # DDP: run on the local replica, no collectives
        parts = Parts(model, watch.optimizer, loss_fn, batches(), forward, live_weights(step()) if step else None)
        watch.paused = True
        try:
            return run_request(request, parts, watch.device, control, model.training, run_dir)
        finally:
            watch.paused = False

    return run

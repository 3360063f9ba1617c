"""The monitor's jobs: confirming one, running it in the live training or on the run's factory, following it, cancelling it.

A mixin of :class:`tuidiag.app.app.TuidiagApp`. One job at a time: a live training
gets the job's request through its control channel (:mod:`tuidiag.app.job_requests`),
any other run's factory runs it in a CLI process (:mod:`tuidiag.app.job_runner`); the
run view's bar shows its progress and the notification its verdict. Workers read and
wait; handlers on the UI thread only draw.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.timer import Timer
from textual.worker import get_current_worker

from tuidiag import job_kinds
from tuidiag.app import job_requests, job_runner
from tuidiag.app.screens.job_confirm import JobConfirmScreen
from tuidiag.app.screens.run_screen import CANCEL_KEY, RunScreen
from tuidiag.store.control_channel import ControlError, live_problem
from tuidiag.store.manifest import read_manifest
from tuidiag.viewmodel.job_progress import JobTracker, JobView
from tuidiag.viewmodel.job_progress import outcome as job_outcome
from tuidiag.viewmodel.snapshot import RunSummary

if TYPE_CHECKING:
    from tuidiag.app.app import TuidiagApp


class MonitorJobs:
    """The app's job handling (the app's state is its own: see ``TuidiagApp.__init__``)."""

    summaries: list[RunSummary]
    job: JobTracker | None
    _job_process: subprocess.Popen[str] | None
    _job_timer: Timer | None

    def on_run_screen_job_requested(self, message: RunScreen.JobRequested) -> None:
        if self.job is not None:
            title = job_kinds.get(self.job.job).title
            self.notify(f"{title} is already running ({CANCEL_KEY} cancels it)", severity="warning")
            return
        self.prepare_job(message.job, message.key, self._steps_per_s(message.key))

    @work(thread=True, exclusive=True, group="job-prepare", exit_on_error=False)
    def prepare_job(self, job: str, key: str, steps_per_s: float | None) -> None:
        """Worker: read the run's manifest: whether the job runs in the live training or from the run's factory."""
        try:
            manifest = read_manifest(Path(key))
        except (OSError, ValueError):
            manifest = {}
        kind = job_kinds.get(job)
        live = kind.live and live_problem(manifest) is None
        problem = None
        if not live and not manifest.get("factory"):
            problem = ("this run is not live and names no factory to rebuild its model: record it with "
                       "Recorder(..., factory='train:build')")
        where = job_runner.live_where(manifest, job, steps_per_s) if live else None
        self.post_message(self.JobPrepared(job, key, str(manifest.get("factory")), where, problem))

    def on_tuidiag_app_job_prepared(self, message: TuidiagApp.JobPrepared) -> None:
        if message.problem is not None:
            self.notify(message.problem, severity="error", timeout=8, markup=False)
            return
        live = message.where is not None
        command = (job_runner.live_command if live else job_runner.job_command)(message.job, message.key)
        screen = JobConfirmScreen(message.job, job_runner.shown(command), message.factory, message.key, message.where)
        self.push_screen(screen, lambda ok: self._start_job(message.key, message.job, live, command) if ok else None)

    def _start_job(self, key: str, job: str, live: bool, command: list[str]) -> None:
        """Track the job, show its bar, and start the worker that sends or runs it."""
        self.job = JobTracker(key, job, time.monotonic(), live)
        self._job_timer = self.set_interval(1.0, self._show_job)  # elapsed time moves between statuses
        self._show_job()
        if live:
            self.run_live_job(key, job)
        else:
            self.run_job(job, command)

    @work(thread=True, exclusive=True, group="job", exit_on_error=False)
    def run_live_job(self, key: str, job: str) -> None:
        """Worker: write the request to the live training, follow its status, report its end."""
        worker = get_current_worker()
        run_dir = Path(key)
        try:
            request_id = job_requests.send(run_dir, job)
            self.post_message(self.JobSent(request_id))
            status = job_requests.follow(run_dir, request_id, lambda news: self.post_message(self.JobStatus(news)),
                                         lambda: worker.is_cancelled)
            result = job_requests.result_of(run_dir, status)
        except (ControlError, OSError) as exc:  # the slot is freed whatever happens
            self.post_message(self.JobFinished("error", f"{job_kinds.get(job).title} not followed: {exc}"))
            return
        self.post_message(self.JobFinished(*job_outcome(job, str(status.get("state")), str(status.get("message", "")), result)))

    @work(thread=True, exclusive=True, group="job", exit_on_error=False)
    def run_job(self, job: str, command: list[str]) -> None:
        """Worker: run the job process on the run's factory, follow its progress lines, report its end."""
        try:
            process = self._job_process = job_runner.start(command, Path.cwd())
            returncode, lines = job_runner.follow(process, lambda news: self.post_message(self.JobStatus(news)))
        except OSError as exc:  # the slot is freed whatever happens
            self.post_message(self.JobFinished("error", f"{job_kinds.get(job).title} could not start: {exc}"))
            return
        status = job_runner.final_status(returncode, lines)
        result = job_runner.result_of(status)
        self.post_message(self.JobFinished(*job_outcome(job, status["state"], str(status.get("message", "")), result)))

    def _job_view(self, key: str) -> JobView | None:
        """The progress bar's content for run ``key`` now (None: no job of this monitor runs on it)."""
        if self.job is None or self.job.key != key:
            return None
        return self.job.view(time.monotonic(), self._steps_per_s(key))

    def _steps_per_s(self, key: str) -> float | None:
        """Run ``key``'s steps/s as its overview row shows it (None: unknown, or no row yet)."""
        summary = next((s for s in self.summaries if s.key == key), None)
        return summary.steps_per_s if summary else None

    def _show_job(self) -> None:
        """Redraw the job's progress bar on its run's view."""
        for screen in self.screen_stack:
            if isinstance(screen, RunScreen):
                screen.show_job(self._job_view(screen.key))

    def on_tuidiag_app_job_status(self, message: TuidiagApp.JobStatus) -> None:
        if self.job is not None:
            self.job.update(message.status, time.monotonic())
            self._show_job()

    def on_tuidiag_app_job_sent(self, message: TuidiagApp.JobSent) -> None:
        if self.job is not None:
            self.job.request_id = message.request_id

    def on_tuidiag_app_job_finished(self, message: TuidiagApp.JobFinished) -> None:
        key = self.job.key if self.job is not None else None
        self.job, self._job_process = None, None
        if self._job_timer is not None:
            self._job_timer.stop()
            self._job_timer = None
        self._show_job()
        for screen in self.screen_stack:  # a failure stays on the run's Jobs tab; a job that finished clears it
            if isinstance(screen, RunScreen) and screen.key == key:
                screen.show_job_failure(message.text if message.severity == "error" else None)
        self.notify(message.text, severity=message.severity, timeout=12 if message.severity == "error" else 8,
                    markup=False)  # a job's message quotes commands: 'tuidiag[torch]' is not markup
        self.request_refresh({Path(key)} if key else None)

    def action_cancel_job(self) -> None:
        if self.job is None:
            self.notify("no job is running")
        elif self._job_process is not None and self._job_process.poll() is None:
            self._job_process.terminate()
        elif self.job.request_id is not None:
            self.cancel_live_job(self.job.key, self.job.request_id)
            self.notify(f"asked the training to stop {job_kinds.get(self.job.job).title}")
        else:
            self.notify(f"the job is starting: press {CANCEL_KEY} again in a moment")

    @work(thread=True, group="job-cancel", exit_on_error=False)
    def cancel_live_job(self, key: str, request_id: str) -> None:
        """Worker: ask the training to stop the request (it stops at the job's next progress point)."""
        job_requests.cancel(Path(key), request_id)

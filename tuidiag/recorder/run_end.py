"""How a recording ends: ``close()``, the context manager, SIGTERM and interpreter exit.

A mixin of :class:`tuidiag.recorder.recorder.Recorder`: each way flushes what is queued,
answers the control requests still pending, writes the run's final status into
``run.json`` and frees the run directory, once whatever calls it first.
"""

from __future__ import annotations


from tuidiag.format import STATUS_FAILED, STATUS_FINISHED, STATUS_INTERRUPTED
from tuidiag.recorder.errors import ErrorReporter, Rejections
from tuidiag.recorder.process import exit_status, interrupted_now, keep_sigint_exit
from tuidiag.recorder.request_runner import RequestRunner
from tuidiag.recorder.run_manifest import RunManifest
from tuidiag.recorder.writer import ShardWriter

CLOSE_STATUSES = (STATUS_FINISHED, STATUS_FAILED, STATUS_INTERRUPTED)
"""What ``close(status)`` may write; the reader tells a ``crashed`` run by itself."""
SIGTERM_FLUSH_SECONDS = 20.0
"""At most this long, on SIGTERM, to write the rows queued before the process ends: within the 30 s that
Kubernetes and Slurm give a process between SIGTERM and SIGKILL. The usual write takes milliseconds; 5 s
lost the last steps on a loaded 2-core machine."""


class RunEnd:
    """The recorder's ways to end the run (the recorder's state is its own: see ``Recorder.__init__``)."""

    _closed: bool
    _watch: object
    _writer: ShardWriter
    _manifest: RunManifest
    _control: RequestRunner | None
    _current_step: int
    errors: ErrorReporter
    rejections: Rejections

    def close(self, status: str | None = None) -> None:
        """Flush, compact and mark the run finished (or ``status``: ``"finished"``, ``"failed"`` or
        ``"interrupted"``; another value is reported and the default written); safe to call twice.

        The default is ``"interrupted"`` once SIGTERM arrived or while a ``KeyboardInterrupt`` is
        being handled (``close()`` in ``except KeyboardInterrupt:``), else ``"finished"``."""
        if self._closed:
            return
        self._closed = True
        default = STATUS_INTERRUPTED if interrupted_now() else STATUS_FINISHED
        try:
            if status is not None and (type(status) is not str or status not in CLOSE_STATUSES):
                self.rejections.reject("close", "status", f"is not one of {', '.join(map(repr, CLOSE_STATUSES))}: "
                                       f"{default!r} was written")
                status = None
            if self._control is not None:
                self._control.end_checks(self._current_step)
            if self._watch is not None:
                self._watch.close()
            self._writer.close()
        except Exception as exc:
            self.errors.report("close", exc)
        self._mark_ended(status or default)

    def _mark_ended(self, status: str) -> None:
        """Answer pending requests, write ``status`` into ``run.json`` and free the run directory."""
        if self._control is not None:  # answered before run.json says the run ended: a requester that sees it
            self._control.close(self._current_step, status)  # ended finds every answer there
        try:
            self._manifest.finish(status, self._writer.progress_step, self._stats(), self._writer.last_step)
        except Exception as exc:
            self.errors.report("close", exc)
        finally:
            self._manifest.release()  # the run directory is free for the next writer

    def _close_on_sigterm(self) -> None:
        """SIGTERM is about to end the process: write what is queued (within :data:`SIGTERM_FLUSH_SECONDS`,
        no compaction) and mark the run interrupted."""
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.flush(SIGTERM_FLUSH_SECONDS)
        except Exception as exc:
            self.errors.report("close", exc)
        self._mark_ended(STATUS_INTERRUPTED)

    def _close_at_exit(self) -> None:
        self.close(exit_status())
        keep_sigint_exit()

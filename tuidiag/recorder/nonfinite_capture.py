"""When the recorder saves the state of the first non-finite step (a capture), and how.

A mixin of :class:`tuidiag.recorder.recorder.Recorder`: once per run, when capturing is
switched on or a NaN hunt is armed, the first step whose loss or gradients are not
finite is saved with its batch (:func:`tuidiag.recorder.capture.save_capture`) and
recorded as a ``capture`` event; a batch that cannot be saved leaves the state saved
without it, a disk error leaves the event saying so.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from tuidiag.format import EVENT_CAPTURE
from tuidiag.recorder.errors import ErrorReporter, Rejections
from tuidiag.recorder.layouts import LayoutCache
from tuidiag.recorder.recent_batches import RecentBatches
from tuidiag.recorder.request_runner import RequestRunner
from tuidiag.recorder.writer import EventRow, ShardWriter


class NonfiniteCapture:
    """The recorder's capture of the first non-finite step (the recorder's state is its own: see ``Recorder.__init__``)."""

    _watch: Any
    _writer: ShardWriter
    _layouts: LayoutCache
    _control: RequestRunner | None
    _recent_batches: RecentBatches
    _captured: bool
    run_dir: Path
    rank: int
    capture_nonfinite: bool
    capture_max_bytes: int
    errors: ErrorReporter
    rejections: Rejections

    def _wants_capture(self) -> bool:
        """Capture the next non-finite step: switched on, or a NaN hunt is armed; once per run."""
        armed = self._control is not None and self._control.armed is not None
        return (self.capture_nonfinite or armed) and not self._captured

    def _maybe_capture(self, s: int, layout: Any, vector: Any) -> None:
        """On CPU check now (pre-step state); on CUDA act on what the writer found (post-step)."""
        if vector.device.type == "cpu":
            if not math.isfinite(vector.numpy()[layout.check].sum()):
                self._capture(s, pre_step=True)
        elif self._layouts.nonfinite_step is not None:
            self._capture(self._layouts.nonfinite_step, pre_step=False)

    def _capture(self, s: int, pre_step: bool) -> None:
        from tuidiag.recorder.capture import save_capture

        self._captured = True
        watch = self._watch
        model, optimizer = (watch.model, watch.optimizer) if watch else (None, None)
        batch = self._batch_of(s)
        path: Path | None = None
        try:
            path, note = save_capture(self.run_dir, s, self.rank, model, optimizer, batch, pre_step, self.capture_max_bytes)
        except OSError as exc:  # the disk: the step and its event still count
            self.errors.report("capture", exc)
            note = f"capture failed: {type(exc).__name__}: {str(exc)[:200]}"
        except Exception as exc:  # a batch that cannot be copied (a cycle, a repr that raises): the state without it
            if batch is None:
                self.errors.report("capture", exc)
                note = f"capture failed: {type(exc).__name__}: {str(exc)[:200]}"
            else:
                self.rejections.reject("capture", "batch", f"could not be saved ({type(exc).__name__}): the state was captured without it")
                try:
                    path, note = save_capture(self.run_dir, s, self.rank, model, optimizer, None, pre_step, self.capture_max_bytes)
                    note += "; the batch could not be saved"
                except Exception as again:
                    self.errors.report("capture", again)
                    note = f"capture failed: {type(again).__name__}: {str(again)[:200]}"
        data = {"path": str(path.relative_to(self.run_dir)) if path else None, "pre_step": pre_step}
        self._writer.submit(EventRow(s, time.time(), EVENT_CAPTURE, "info" if path else "warning", note, data))
        if self._control is not None and self._control.armed:
            self._control.on_capture(path, self._job_runner(), s)
        self._recent_batches.clear()

    def _batch_of(self, s: int) -> Any:
        """The batch passed to ``batch()`` for step ``s``, if still among the recent ones."""
        return self._recent_batches.of_step(s)

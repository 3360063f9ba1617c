"""``tuidiag.Recorder``: the few lines a training loop calls to record its health.

The public API is ``Recorder``, ``watch``, ``batch``, ``step``, ``log``, ``event``,
``flush`` and ``close`` (plus the context manager). Every public method swallows
and reports its own errors, and accepts or rejects each value it is given on its
own: the recorder never raises into the training loop and never blocks it. Only the
constructor raises, for a wrong argument (:mod:`tuidiag.recorder.arguments`). torch
is optional: without it ``log`` and ``step(float)`` work.
"""

from __future__ import annotations

import atexit
import math
import os
import socket
import sys
import time
from types import TracebackType
from typing import Any, Mapping

from tuidiag.format import EVENT_RESUMED, LOSS
from tuidiag.recorder.actions import LiveChanges
from tuidiag.recorder.arguments import Arguments, check_arguments
from tuidiag.recorder.errors import ErrorReporter, Rejections, guarded
from tuidiag.recorder.layouts import LayoutCache
from tuidiag.recorder.logged_values import LoggedValues
from tuidiag.recorder.nonfinite_capture import NonfiniteCapture
from tuidiag.recorder.placement import RESUME_NEVER, ResumeError
from tuidiag.recorder.process import detect_rank, end_status, import_torch, install_excepthook, watch_sigterm
from tuidiag.recorder.recent_batches import FOR_JOBS, RecentBatches
from tuidiag.recorder.request_runner import RequestRunner
from tuidiag.recorder.run_config import RunConfig
from tuidiag.recorder.run_end import RunEnd
from tuidiag.recorder.run_manifest import RunManifest
from tuidiag.recorder.step_rows import StepRows
from tuidiag.recorder.step_timer import StepTimer
from tuidiag.recorder.user_json import config_json, event_data
from tuidiag.recorder.values import Rejected, one_number
from tuidiag.recorder.writer import EventRow, MetricBatch, ShardWriter
from tuidiag.recorder.writer_items import NO_ROWS
from tuidiag.recorder.writer_hooks import WriterHooks

CAPTURE_MAX_BYTES = 1 << 30
STEP_RANGE = range(-(2**63), 2**63)
"""Steps the int64 ``step`` column can hold."""
STEP_MAX = STEP_RANGE[-1]


class Recorder(LoggedValues, StepRows, NonfiniteCapture, WriterHooks, RunEnd):
    """Records a training run into Parquet shards under ``run_dir``.

    Args:
        run_dir: the run directory asked for (created if needed). ``rec.run_dir`` is
            the directory actually written: see ``resume``.
        config: hyperparameters to store in the manifest (merged into the previous
            session's when a run is continued; the changed keys go into the ``resumed`` event).
        resume: ``"never"`` (default): if ``run_dir`` already holds a run, record into
            the next free ``run_dir-N`` and say so once on stderr; ``"allow"``: continue
            the run in ``run_dir`` if there is one, else start it; ``"must"``: continue
            it, and raise ``ResumeError`` here if there is none. A continued run counts
            its steps on from its last step + 1 and records a ``resumed`` event.
        start_step: the step ``step()`` counts from when given no index (default: 0,
            or the last recorded step + 1 of a continued run); a training resumed from
            an older checkpoint passes the checkpoint's step.
        name: display name (default: the directory name).
        flush_interval: seconds between shard writes.
        grads_every / weights_every / activations_every / inputs_every: record
            that part every N steps; 0 switches it off.
        histograms_every: every N steps (default 0: never), the distribution of every
            parameter's weights and gradient as quantile rows (``dist/weight/<param>/q50``, ...),
            computed on the device without a sync, as ``SummaryWriter.add_histogram`` users record them.
        capture_nonfinite: save batch and state at the first non-finite step.
        factory: ``"module:function"`` that rebuilds model, optimizer, loss and data
            for jobs run after the training has ended.
        control: accept job requests (LR finder, NaN hunt, ...) from the training's
            own user through ``RUN/control`` and run them in this process at a step
            boundary; keeps references to the last batches given to ``batch()`` (up to 16,
            within 64 MiB of tensors; see :mod:`tuidiag.recorder.recent_batches`).

    Raises (here only, before anything is created):
        ArgumentError: an argument of the wrong type or out of range.
        ResumeError: ``resume="must"`` and no run to continue.

    A ``run_dir`` whose path holds a NUL or a byte that is not UTF-8 is not an error: it is
    reported at once and the run is recorded at the same path with those bytes written ``%XX``
    (``rec.run_dir``), its ``run.json`` saying ``degraded``.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        config: Mapping[str, Any] | None = None,
        *,
        resume: str = RESUME_NEVER,
        start_step: int | None = None,
        name: str | None = None,
        flush_interval: float = 1.0,
        grads_every: int = 1,
        weights_every: int = 25,
        activations_every: int = 50,
        inputs_every: int = 1,
        capture_nonfinite: bool = True,
        capture_max_bytes: int = CAPTURE_MAX_BYTES,
        max_queue: int = 10_000,
        factory: str | None = None,
        control: bool = True,
        histograms_every: int = 0,
    ) -> None:
        args = check_arguments(run_dir, resume, start_step, name, flush_interval, grads_every, weights_every,
                               activations_every, inputs_every, capture_nonfinite, capture_max_bytes, max_queue, factory, control,
                               histograms_every)
        self.errors = ErrorReporter()
        self.rejections = Rejections()
        self.grads_every, self.weights_every = args.grads_every, args.weights_every
        self.histograms_every = args.histograms_every
        self.activations_every, self.inputs_every = args.activations_every, args.inputs_every
        self.capture_nonfinite, self.capture_max_bytes = args.capture_nonfinite, args.capture_max_bytes
        self._torch = import_torch()
        self.rank, self.world_size = detect_rank(self._torch)
        self._closed = False
        self._watch: Any = None
        self._max_grad_norm: float | None = None
        self._forward: Any = None
        """``watch(..., forward=)``: how live jobs get a batch's output (None: ``model(x)``)."""
        self._next_step, self._current_step = 0, -1
        self._timer = StepTimer()
        self._recent_batches = RecentBatches(FOR_JOBS if args.control and self.rank == 0 else 0)
        self._uses_batch = False
        self._input_parts: tuple[list[str], list[Any]] = ([], [])
        self._missing_grads: list[str] | None = None
        self._captured = False
        self._last_flushed_step = -1
        self._host: Any = None
        self._written_rejections = 0
        self._layouts = LayoutCache(self)
        self._changes = LiveChanges(self.world_size)
        self.loss_fn: Any = None
        self._control: RequestRunner | None = None
        self.run_dir = args.run_dir
        self.config = RunConfig(self._manifest_data, self.rejections.reject, self._config_changed)
        """The run's config (read like a dict); ``rec.config.update(...)`` adds to it during the run."""
        config_value, config_notes = config_json(config)
        try:
            self._start(args, config_value)
        except ResumeError:
            raise
        except Exception as exc:  # a fault of the recorder's own: reported now, the training goes on
            self.errors.report("start", exc)
        for key, reason in config_notes:
            self.rejections.reject("config", key, reason)
        install_excepthook()
        atexit.register(self._close_at_exit)
        try:
            watch_sigterm(self._close_on_sigterm)
        except Exception as exc:  # a signal module that refuses: SIGTERM then reads as crashed, nothing else changes
            self.errors.report("start", exc)

    def _start(self, args: Arguments, config: dict[str, Any]) -> None:
        """Place the run, write its manifest, start the writer thread (and the control channel)."""
        self._manifest = RunManifest(args.run_dir, self.rank, args.name, config, self.world_size, args.flush_interval,
                                     args.factory, args.resume, args.start_step)
        self.run_dir = self._manifest.run_dir
        self._next_step = self._manifest.resume_step
        self._writer = ShardWriter(self.run_dir, self.rank, args.flush_interval, args.max_queue, self._on_flush, self.errors.report,
                                   on_written=self._on_written)
        self._writer.tail.seed(self._manifest.data)
        self.errors.sink = self.rejections.sink = self._error_event
        if self._manifest.note:
            print(self._manifest.note, file=sys.stderr)
        if self._manifest.start_error is not None:
            self.errors.report("start", self._manifest.start_error)
        resumed = self._manifest.resumed
        if resumed is not None:
            self._writer.submit(EventRow(resumed.from_step, self._manifest.started, EVENT_RESUMED, "info", resumed.message(),
                                         event_data(resumed.data(args.resume))[0]))
        if args.control and self.rank == 0:
            try:
                self._control = RequestRunner(self.run_dir, self.event, self.errors.report)
                if self._manifest.resumed is not None:
                    self._control.expire_leftovers()  # what a dead earlier session took up and never answered
            except Exception as exc:  # no control channel: jobs cannot reach this training, the recording goes on
                self.errors.report("control", exc)

    # ---- public API ------------------------------------------------------------
    @guarded
    def watch(self, model: Any, optimizer: Any = None, max_grad_norm: float | None = None, loss_fn: Any = None,
              scheduler: Any = None, forward: Any = None) -> None:
        """Record gradients, weights, updates and activations of ``model`` (and ``optimizer``).

        ``loss_fn(output, y)`` lets jobs run inside this training, and has its inputs checked on
        every 10th step (probabilities where logits are expected, shapes that broadcast): a module
        through a hook, a plain function when called as ``rec.loss_fn(output, y)``. ``forward(model, x)``
        is how those jobs get the output of a batch ``x`` given to ``rec.batch(x, y)`` (default
        ``model(x)``; ``lambda m, x: m(**x)`` for a model called with keyword arguments, as
        Transformers models are), the same hook as the factory's ``forward``. ``scheduler`` lets a
        live LR change scale the scheduler's own LRs too (else a scheduler that computes the
        LR from them puts the old one back, and the change is reported failed)."""
        if self._torch is None:
            raise RuntimeError("torch is not installed: watch() needs it; log() still works")
        from tuidiag.recorder.arguments import check_watch
        from tuidiag.recorder.torch_watch import TorchWatch

        checked = check_watch(self._torch, model, optimizer, max_grad_norm, forward)
        for key, reason in checked.rejected:
            self.rejections.reject("watch", key, reason)
        if checked.model is None:
            return
        model, optimizer = checked.model, checked.optimizer
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        self._max_grad_norm = checked.max_grad_norm
        self._forward = checked.forward
        self._changes.scheduler = scheduler
        self._changes.own_clip = self._max_grad_norm
        self._watch = TorchWatch(
            model, optimizer, self.weights_every, self.activations_every, self._submit_weights,
            lambda: self._current_step, self._timer.mark_optimizer, loss_fn, self.errors.report,
        )
        self.loss_fn = self._watch.loss_fn  # a plain function comes back wrapped: rec.loss_fn(out, y) has its inputs checked
        self._manifest.describe(model, optimizer, self._max_grad_norm)
        if self._control is not None and optimizer is not None:
            self._manifest.allow_control(os.getpid(), os.geteuid(), socket.gethostname(), loss_fn is not None, str(self._watch.device))
        if not self._uses_batch:
            self._watch.arm_activations(self._next_step)

    @guarded
    def batch(self, x: Any, y: Any = None) -> None:
        """Mark the start of a step's compute and record input health of ``x`` (and ``y``)."""
        self._timer.mark_batch()
        self._uses_batch = True
        if self._timer.several_batches and self._watch is not None:
            self._watch.mark_backward_ends(self._timer.mark_used)
        if (self.capture_nonfinite and not self._captured) or self._control is not None:
            try:
                self._recent_batches.add(self._next_step, (x, y))
            except Exception as exc:  # a batch that contains itself, a size that raises: not kept for capture or jobs
                self.rejections.reject("batch", "<batch>", f"could not be kept ({type(exc).__name__}: {str(exc)[:200]})")
        if self._watch is not None:
            self._watch.arm_activations(self._next_step)  # armed here, validation passes stay unhooked
        if self._torch is not None and self.inputs_every > 0 and self._next_step % self.inputs_every == 0:
            from tuidiag.recorder.inputs import input_parts

            try:
                self._input_parts = input_parts(x, y)
            except Exception as exc:  # a complex, sparse or meta tensor: no input rows for this batch
                self.rejections.reject("batch", "<batch>", f"could not be summarised ({type(exc).__name__}: {str(exc)[:200]})")

    @guarded
    def step(self, loss: Any = None, step: int | None = None) -> int:
        """Record one training step; call after ``backward()`` and before clipping.

        ``loss`` must be one number (a float, a one-element tensor or array) or ``None``;
        anything else is refused, counted and reported once, and the step still counts."""
        now = time.perf_counter()
        s = self._next_step if step is None else self._step_arg("step", step, 1 + (loss is not None))
        if s is None or s > STEP_MAX:  # counted on past 2**63 - 1 (explicit steps were checked)
            if s is not None:
                self.rejections.reject("step", "step", "would be beyond the 64-bit integer range (the step before was 2**63 - 1)",
                                       1 + (loss is not None))
            return None
        self._current_step, self._next_step = s, s + 1
        host_names, host_values = self._timer.step(now)
        dev_names, dev_values = self._input_parts
        self._input_parts = ([], [])
        value = None if loss is None else one_number(loss, self._torch)
        if isinstance(value, Rejected):
            self.rejections.reject("step", LOSS, value.reason)
        elif self._is_tensor(value):
            dev_names.append(LOSS)
            dev_values.append(value)
        elif value is not None:
            host_names.append(LOSS)
            host_values.append(value)
            if not math.isfinite(value) and self._wants_capture():
                self._capture(s, pre_step=True)
        if self._watch is not None:
            self._watch_parts(s, host_names, host_values, dev_names, dev_values)
            if self.histograms_every and s % self.histograms_every == 0:
                self._record_distributions(s)
        wall = time.time()
        if host_names:
            self._writer.submit(MetricBatch(s, wall, self._layouts.host(host_names), host_values, trained=True), len(host_names))
        if dev_names:
            self._submit_device(s, wall, dev_names, dev_values, trained=True)
        if not host_names and not dev_names:  # nothing to record yet, but the step counts (run.json's last_step)
            self._writer.submit(MetricBatch(s, wall, NO_ROWS, (), trained=True), 0)
        self._changes.clip_now(self._watch)  # a clip_grad action counts from the step after it
        if self._control is not None and (self._control.pending or self._control.armed or self._control.checking):
            self._control.check(s)  # did the actions of earlier steps hold?
            self._control.run_pending(s, self._job_runner(), lambda request: self._changes.apply(request, s, self._watch, self.run_dir))
            self._control.expire(s)
            self._control.armed_progress(s)
        if self._watch is not None and not self._uses_batch:
            self._watch.arm_activations(s + 1)
        return s

    @guarded
    def flush(self, timeout: float = 10.0) -> None:
        """Write everything recorded so far to disk now (blocks up to ``timeout`` seconds;
        a ``timeout`` that is not a number >= 0 is rejected and 10 s used)."""
        try:
            seconds = float(timeout) if not isinstance(timeout, (str, bytes)) else math.nan
        except Exception:
            seconds = math.nan
        if not seconds >= 0:
            self.rejections.reject("flush", "timeout", f"is not a number of seconds >= 0 (a {type(timeout).__name__}): 10 s used")
            seconds = 10.0
        self._writer.flush(min(seconds, 86_400.0))

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close(end_status(exc_type))

    @property
    def step_index(self) -> int:
        """The index of the last recorded step (-1 before the first)."""
        return self._current_step

    @property
    def dropped_rows(self) -> int:
        """Rows dropped because the queue was full (training is never blocked)."""
        writer = getattr(self, "_writer", None)
        return writer.dropped_rows if writer is not None else 0

    @property
    def rejected_values(self) -> int:
        """Values refused at the call (``log``, ``step``): not numbers, complex, empty, ..."""
        return self.rejections.count

    @property
    def lost_rows(self) -> int:
        """Rows accepted but not written because the writer could not convert them."""
        writer = getattr(self, "_writer", None)
        return writer.lost_rows if writer is not None else 0

    # ---- internals --------------------------------------------------------------
    def _manifest_data(self) -> dict[str, Any] | None:
        manifest = getattr(self, "_manifest", None)
        return manifest.data if manifest is not None else None

    def _implicit_step(self) -> int:
        """The step of a ``log`` or ``event`` without one: the last step, or before the first the one to come."""
        return self._current_step if self._current_step >= 0 else max(self._next_step, 0)

    def _step_arg(self, where: str, step: Any, values: int) -> int | None:
        """``step`` as an int the step column can hold; otherwise the call's values are rejected."""
        try:
            s = int(step)
        except Exception as exc:
            self.rejections.reject(where, "step", f"is of type {type(step).__name__}, not an integer ({type(exc).__name__})", values)
            return None
        if s not in STEP_RANGE:
            self.rejections.reject(where, "step", "is outside the 64-bit integer range", values)
            return None
        return s

    def _job_runner(self) -> Any:
        from tuidiag.recorder.request_runner import job_runner_for

        return job_runner_for(self._watch, self.loss_fn, self._recent_batches.batches, self._forward, lambda: self._current_step,
                              self.run_dir)


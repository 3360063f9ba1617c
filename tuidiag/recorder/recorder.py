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
from pathlib import Path
from types import TracebackType
from typing import Any, Mapping

import numpy as np

from tuidiag.format import (
    EVENT_CAPTURE,
    EVENT_CONFIG,
    EVENT_NO_GRAD,
    EVENT_RESUMED,
    EVENT_TEXT,
    GRAD_MAX_NORM,
    HPARAM_PREFIX,
    GRAD_NONE_COUNT,
    LOSS,
    LR_PREFIX,
    MODEL_TRAINING,
    RECORDER_ERRORS,
    RECORDER_REJECTED,
    STATUS_FAILED,
    STATUS_FINISHED,
    STATUS_INTERRUPTED,
)
from tuidiag.recorder.actions import LiveChanges
from tuidiag.recorder.request_runner import RequestRunner
from tuidiag.recorder.errors import ErrorReporter, Rejections, guarded
from tuidiag.recorder.layouts import LayoutCache
from tuidiag.recorder.writer import NO_ROWS, EventRow, MetricBatch, ShardWriter
from tuidiag.recorder.process import (
    detect_rank,
    end_status,
    exit_status,
    import_torch,
    install_excepthook,
    interrupted_now,
    watch_sigterm,
)
from tuidiag.recorder.arguments import Arguments, check_arguments
from tuidiag.recorder.user_json import config_json, event_data, event_texts
from tuidiag.recorder.placement import RESUME_NEVER, ResumeError
from tuidiag.recorder.recent_batches import FOR_JOBS, RecentBatches
from tuidiag.recorder.run_config import Changes, RunConfig, hparams_record
from tuidiag.recorder.run_manifest import RunManifest, change_text
from tuidiag.recorder.step_timer import StepTimer
from tuidiag.recorder.values import Rejected, convert, leaves, one_number

CAPTURE_MAX_BYTES = 1 << 30
STEP_RANGE = range(-(2**63), 2**63)
"""Steps the int64 ``step`` column can hold."""
STEP_MAX = STEP_RANGE[-1]
CLOSE_STATUSES = (STATUS_FINISHED, STATUS_FAILED, STATUS_INTERRUPTED)
"""What ``close(status)`` may write; the reader tells a ``crashed`` run by itself."""
SIGTERM_FLUSH_SECONDS = 20.0
"""At most this long, on SIGTERM, to write the rows queued before the process ends: within the 30 s that
Kubernetes and Slurm give a process between SIGTERM and SIGKILL. The usual write takes milliseconds; 5 s
lost the last steps on a loaded 2-core machine."""


class Recorder:
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
    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record values under the names given, verbatim; nested mappings are joined with ``/``.

        Numbers and one-element tensors or arrays are one row each, multi-element ones
        summary rows (``name/q0`` ... ``name/q100``, ``name/mean``, ``name/nonfinite``),
        strings ``text`` events, ``None`` is skipped; anything else is refused here,
        counted and reported once per name (README "Logging values").
        """
        s = self._implicit_step() if step is None else self._step_arg("log", step, leaves(metrics))
        if s is None:
            return
        values = convert(metrics, self._torch)
        for key, reason in values.rejected:
            self.rejections.reject("log", key, reason)
        wall = time.time()
        for key, text in values.texts:
            self._writer.submit(EventRow(s, wall, EVENT_TEXT, "info", text, {"key": key}))
        if values.host_names:
            host = np.asarray(values.host_values, np.float64)
            self._writer.submit(MetricBatch(s, wall, self._layouts.host(values.host_names), host), len(host))
        if values.dev_names:
            self._submit_device(s, wall, values.dev_names, values.dev_values, derive=False)

    @guarded
    def event(self, kind: str, message: str, severity: str = "info", data: Mapping[str, Any] | None = None, step: int | None = None) -> None:
        """Record an event (shown in the monitor's events panel).

        Whatever ``data`` holds, the event is stored: the parts of ``data`` that cannot be
        JSON (a cycle, a ``repr`` that raises, ...) are replaced by placeholders and counted
        as rejected values. Only an event whose kind, severity or message cannot be text is refused."""
        s = self._implicit_step() if step is None else self._step_arg("event", step, 1)
        if s is None:
            return
        texts = event_texts(kind, severity, message)
        if isinstance(texts, str):
            self.rejections.reject("event", "<event>", texts)
            return
        kind, severity, message = texts
        value, notes = event_data(data)
        for path, reason in notes:
            self.rejections.reject("event", f"{kind[:100]}: data/{path}", reason)
        self._writer.submit(EventRow(s, time.time(), kind, severity, message, value))

    @guarded
    def log_text(self, key: str, text: Any, step: int | None = None) -> None:
        """Record ``text`` as a ``text`` event named ``key`` (``SummaryWriter.add_text``'s counterpart);
        a value that is not a string is stored as its ``str()``."""
        self.log({key: text if isinstance(text, str) else str(text)}, step=step)

    @guarded
    def log_hparams(self, params: Mapping[str, Any], metrics: Mapping[str, Any] | None = None) -> None:
        """Record the run's hyperparameters and their final metrics, as TensorBoard's ``add_hparams``.

        ``params`` and ``metrics`` are kept in ``run.json``'s ``hparams`` (shown by
        ``tuidiag compare`` and ``tuidiag query``), ``params`` also join the config, and each
        metric is a ``hparam/<name>`` row at the current step. Call again to replace them.
        """
        stored, numbers = hparams_record(params, metrics, self._torch, self.rejections.reject)
        data = self._manifest_data()
        if data is None:
            return
        data["hparams"] = {"params": stored, "metrics": numbers}  # replaced whole: the writer sees one or the other
        self.config.update(stored)
        if numbers:
            self.log({HPARAM_PREFIX + key: value for key, value in numbers.items()})

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
    def _record_distributions(self, s: int) -> None:
        """``histograms_every``: each parameter's weights and gradient as summary rows (on the device, no sync)."""
        from tuidiag.recorder.distributions import distribution_values

        values = convert(distribution_values(self._watch.named_params), self._torch)
        if values.dev_names:
            self._submit_device(s, time.time(), values.dev_names, values.dev_values, derive=False)
        if values.host_names:
            host = np.asarray(values.host_values, np.float64)
            self._writer.submit(MetricBatch(s, time.time(), self._layouts.host(values.host_names), host), len(host))

    def _manifest_data(self) -> dict[str, Any] | None:
        manifest = getattr(self, "_manifest", None)
        return manifest.data if manifest is not None else None

    def _config_changed(self, changes: Changes) -> None:
        """A ``config`` event at the current step that says what changed (the manifest follows at the flush)."""
        shown = "; ".join(change_text(key, change) for key, change in list(changes.items())[:5])
        more = f" and {len(changes) - 5} more" if len(changes) > 5 else ""
        self._writer.submit(EventRow(self._implicit_step(), time.time(), EVENT_CONFIG, "info", f"config: {shown}{more}",
                                     {"changes": changes}))

    def _implicit_step(self) -> int:
        """The step of a ``log`` or ``event`` without one: the last step, or before the first the one to come."""
        return self._current_step if self._current_step >= 0 else max(self._next_step, 0)

    def _is_tensor(self, value: Any) -> bool:
        return self._torch is not None and isinstance(value, self._torch.Tensor)

    def _watch_parts(self, s: int, host_names: list[str], host_values: list[Any], dev_names: list[str], dev_values: list[Any]) -> None:
        watch = self._watch
        lrs: list[float | None] = []
        for i, group in enumerate(getattr(watch.optimizer, "param_groups", [])):
            lr = group.get("lr")
            if self._is_tensor(lr):
                dev_names.append(f"{LR_PREFIX}{i}")
                dev_values.append(lr)
                lrs.append(None)
            elif lr is not None:
                host_names.append(f"{LR_PREFIX}{i}")
                host_values.append(float(lr))
                lrs.append(host_values[-1])
            else:
                lrs.append(None)
        self._changes.note_lrs(lrs)
        host_names.append(MODEL_TRAINING)
        host_values.append(1.0 if watch.model.training else 0.0)
        limits = [x for x in (self._max_grad_norm, self._changes.clip) if x is not None]
        if limits:  # the tightest clipping applied to this step: the training's own or a live action's
            host_names.append(GRAD_MAX_NORM)
            host_values.append(min(limits))
        if self.grads_every > 0 and s % self.grads_every == 0:
            names, tensors, missing = watch.grad_parts()
            dev_names.extend(names)
            dev_values.extend(tensors)
            host_names.append(GRAD_NONE_COUNT)
            host_values.append(float(len(missing)))
            self._note_missing_grads(s, missing)
        names, tensors = watch.activation_parts()
        dev_names.extend(names)
        dev_values.extend(tensors)
        probed = watch.probe_parts()  # stale gradients, the loss function's inputs (tuidiag.recorder.stale_grads, .loss_probe)
        host_names.extend(probed.host_names)
        host_values.extend(probed.host_values)
        dev_names.extend(probed.dev_names)
        dev_values.extend(probed.dev_values)
        for kind, severity, message, data in probed.events:
            self._writer.submit(EventRow(s, time.time(), kind, severity, message, data))

    def _note_missing_grads(self, s: int, missing: list[str]) -> None:
        if missing == self._missing_grads:
            return
        self._missing_grads = missing
        if missing:
            shown = ", ".join(missing[:20]) + (" ..." if len(missing) > 20 else "")
            message = f"{len(missing)} parameters got no gradient: {shown}"
            self._writer.submit(EventRow(s, time.time(), EVENT_NO_GRAD, "warning", message, {"params": missing}))

    def _submit_device(self, s: int, wall: float, names: list[str], values: list[Any], derive: bool = True,
                       trained: bool = False) -> None:
        from tuidiag.recorder.device import AsyncHostCopy, stack_scalars

        device = self._watch.device if self._watch is not None else values[0].device
        vector = stack_scalars(values, device)
        if vector.numel() != len(names):  # a value of several elements among the scalars
            names, values = self._single_elements(names, values)
            if not names:
                return
            vector = stack_scalars(values, device)
        layout = self._layouts.device(names) if derive else self._layouts.host(names)
        self._writer.submit(MetricBatch(s, wall, layout, AsyncHostCopy(vector), trained=trained), len(names))
        if derive and self._wants_capture():
            self._maybe_capture(s, layout, vector)

    def _single_elements(self, names: list[str], values: list[Any]) -> tuple[list[str], list[Any]]:
        """Keep the one-element values of a per-step vector, reject the others by name."""
        if len(names) != len(values):  # parts of several elements each: no name maps to one part
            self.rejections.reject("step", "<per-step values>", f"are {len(values)} tensors for {len(names)} names", len(names))
            return [], []
        kept: tuple[list[str], list[Any]] = ([], [])
        for name, value in zip(names, values):
            if value.numel() == 1 and not value.is_complex():
                kept[0].append(name)
                kept[1].append(value.reshape(()))
            else:
                self.rejections.reject("step", name, f"is a tensor of shape {tuple(value.shape)}, not one number")
        return kept

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

    def _submit_weights(self, names: list[str], vector: Any) -> None:
        try:
            self._submit_device(self._current_step, time.time(), names, [vector], derive=False)
        except Exception as exc:
            self.errors.report("optimizer_hook", exc)

    def _job_runner(self) -> Any:
        from tuidiag.recorder.request_runner import job_runner_for

        return job_runner_for(self._watch, self.loss_fn, self._recent_batches.batches, self._forward, lambda: self._current_step)

    def _error_event(self, kind: str, message: str, data: dict[str, Any]) -> None:
        self._writer.submit(EventRow(self._implicit_step(), time.time(), kind, "error", message, data))

    def _on_flush(self, writer: ShardWriter) -> None:
        """Writer thread, each flush before its shards are written: system stats, error count."""
        from tuidiag.recorder.system import system_rows

        if self._control is not None:
            self._control.poll()
            self._control.expire_overdue()
        step = writer.progress_step  # system rows at the training step, not at a later step given to log()
        if step > self._last_flushed_step:  # nothing new while idle: write nothing
            self._last_flushed_step = step
            if self._host is None and self._watch is not None:  # a training: created here, so psutil's import
                from tuidiag.recorder.host_probe import HostProbe  # costs the writer thread, not the training

                self._host = HostProbe()
            names, values = system_rows(self._watch, self._host)
            if self.errors.count:
                names.append(RECORDER_ERRORS)
                values.append(float(self.errors.count + self._manifest.earlier_stats.get("errors", 0)))
            if names:
                writer.add_rows(step, time.time(), names, np.asarray(values, np.float64))
        rejected = self.rejections.count
        if rejected != self._written_rejections:
            self._written_rejections = rejected
            earlier = self._manifest.earlier_stats.get("rejected_values", 0)  # the counters count the whole run
            writer.add_rows(max(step, 0), time.time(), [RECORDER_REJECTED], np.array([float(rejected + earlier)]))

    def _on_written(self, writer: ShardWriter) -> None:
        """Writer thread, each flush once its shards are on disk: the heartbeat, with the summary of the newest rows."""
        self._manifest.heartbeat(writer.progress_step, self._stats(), writer.last_step, writer.tail.to_json())

    def _stats(self) -> dict[str, int]:
        writer = self._writer
        return {"rows_written": writer.rows_written, "dropped_rows": writer.dropped_rows, "errors": self.errors.count,
                "rejected_values": self.rejections.count, "lost_rows": writer.lost_rows}

    def _close_at_exit(self) -> None:
        self.close(exit_status())

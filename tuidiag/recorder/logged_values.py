"""What a training records besides its steps: ``log``, ``log_text``, ``event``, ``log_hparams`` and config changes.

A mixin of :class:`tuidiag.recorder.recorder.Recorder`. Each value is accepted or
refused on its own (refusals counted and reported once per name, README "Logging
values"); a call without a step records at the last step, or before the first at the
one to come.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from tuidiag.format import EVENT_CONFIG, EVENT_TEXT, HPARAM_PREFIX
from tuidiag.recorder.errors import Rejections, guarded
from tuidiag.recorder.run_config import Changes, RunConfig, hparams_record
from tuidiag.recorder.run_manifest import change_text
from tuidiag.recorder.user_json import event_data, event_texts
from tuidiag.recorder.values import convert, leaves
from tuidiag.recorder.writer import EventRow, ShardWriter


class LoggedValues:
    """The recorder's logging calls (the recorder's state is its own: see ``Recorder.__init__``)."""

    _torch: Any
    _writer: ShardWriter
    config: RunConfig
    rejections: Rejections

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
        self._submit_values(s, wall, values)

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

    def _config_changed(self, changes: Changes) -> None:
        """A ``config`` event at the current step that says what changed (the manifest follows at the flush)."""
        shown = "; ".join(change_text(key, change) for key, change in list(changes.items())[:5])
        more = f" and {len(changes) - 5} more" if len(changes) > 5 else ""
        self._writer.submit(EventRow(self._implicit_step(), time.time(), EVENT_CONFIG, "info", f"config: {shown}{more}",
                                     {"changes": changes}))

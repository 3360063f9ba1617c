"""How the recorder turns one step's values into rows: the watched model's parts, device values, weights, distributions.

A mixin of :class:`tuidiag.recorder.recorder.Recorder`: the values the training gives
``step()`` and what :class:`~tuidiag.recorder.torch_watch.TorchWatch` gathers (LRs,
gradients, activations, probes) go to the writer as host rows or as one device vector
copied to the host without a sync; a value of several elements among the scalars is
rejected by name, the others kept.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tuidiag.format import EVENT_NO_GRAD, GRAD_MAX_NORM, GRAD_NONE_COUNT, LR_PREFIX, MODEL_TRAINING
from tuidiag.recorder.actions import LiveChanges
from tuidiag.recorder.errors import ErrorReporter, Rejections
from tuidiag.recorder.layouts import LayoutCache
from tuidiag.recorder.values import Converted
from tuidiag.recorder.writer import EventRow, MetricBatch, ShardWriter


class StepRows:
    """The recorder's step values as writer rows (the recorder's state is its own: see ``Recorder.__init__``)."""

    _torch: Any
    _watch: Any
    _writer: ShardWriter
    _layouts: LayoutCache
    _changes: LiveChanges
    _max_grad_norm: float | None
    _missing_grads: list[str] | None
    _current_step: int
    grads_every: int
    errors: ErrorReporter
    rejections: Rejections

    def _record_distributions(self, s: int) -> None:
        """``histograms_every``: each parameter's weights and gradient as summary rows (on the device, no sync).

        A tensor that cannot be summarised is a rejected value (counted, reported once per name); anything
        raised here is a recorder error: neither costs the step's other rows, written after these."""
        from tuidiag.recorder.distributions import distribution_values

        try:
            values = distribution_values(self._watch.named_params, self._torch)
            for key, reason in values.rejected:
                self.rejections.reject("histograms", key, reason)
            self._submit_values(s, time.time(), values)
        except Exception as exc:  # a device error while stacking the summaries: the step's own rows are still written
            self.errors.report("histograms", exc)

    def _submit_values(self, s: int, wall: float, values: Converted) -> None:
        """The numbers of converted values (:func:`~tuidiag.recorder.values.convert`) as rows at step ``s``:
        host values as one batch, device values as one vector copied without a sync."""
        if values.host_names:
            host = np.asarray(values.host_values, np.float64)
            self._writer.submit(MetricBatch(s, wall, self._layouts.host(values.host_names), host), len(host))
        if values.dev_names:
            self._submit_device(s, wall, values.dev_names, values.dev_values, derive=False)

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

    def _submit_weights(self, names: list[str], vector: Any) -> None:
        try:
            self._submit_device(self._current_step, time.time(), names, [vector], derive=False)
        except Exception as exc:
            self.errors.report("optimizer_hook", exc)

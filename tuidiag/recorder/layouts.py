"""Row layouts of the per-step vectors, built once per distinct set of names.

A device layout also derives rows on the writer thread, once the values are on
the host: whether the step was clipped, and the first non-finite loss or
gradient (which becomes a ``nonfinite`` event naming the parameters).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from tuidiag.format import EVENT_NONFINITE, GRAD_CLIPPED, GRAD_NORM_PREFIX, GRAD_NORM_TOTAL, LOSS
from tuidiag.recorder.writer import EventRow, Layout


class LayoutCache:
    """Layouts keyed by their names; owned by one recorder."""

    def __init__(self, recorder: Any) -> None:
        self._recorder = recorder
        self._host: dict[tuple[str, ...], Layout] = {}
        self._device: dict[tuple[str, ...], Layout] = {}
        self.nonfinite_step: int | None = None
        """Set on the writer thread at the first non-finite loss or gradient norm."""

    def host(self, names: list[str]) -> Layout:
        """A plain layout: the values are written as they are."""
        key = tuple(names)
        layout = self._host.get(key)
        if layout is None:
            layout = self._host[key] = Layout(list(names))
        return layout

    def device(self, names: list[str]) -> Layout:
        """A layout for the per-step device vector, with total norm, clipping and non-finite checks."""
        key = tuple(names)
        layout = self._device.get(key)
        if layout is None:
            params = [i for i, n in enumerate(names) if n.startswith(GRAD_NORM_PREFIX)]
            check = [i for i, n in enumerate(names) if n == LOSS] + params
            layout = self._device[key] = Layout(list(names), self._make_derive(list(names), params), check)
        return layout

    def _make_derive(self, names: list[str], params: list[int]) -> Any:
        loss_at = names.index(LOSS) if LOSS in names else None
        param_names = [(i, names[i][len(GRAD_NORM_PREFIX):]) for i in params]

        def derive(step: int, values: np.ndarray) -> tuple[list[str], list[float]]:
            extra_names: list[str] = []
            extra_values: list[float] = []
            if params:
                total = float(np.sqrt(np.sum(np.square(values[params]))))
                extra_names.append(GRAD_NORM_TOTAL)
                extra_values.append(total)
                max_norm = self._recorder._max_grad_norm
                if max_norm is not None and math.isfinite(total):
                    extra_names.append(GRAD_CLIPPED)
                    extra_values.append(1.0 if total > max_norm else 0.0)
            else:
                total = 0.0
            loss = float(values[loss_at]) if loss_at is not None else None
            if self.nonfinite_step is None and not (math.isfinite(total) and (loss is None or math.isfinite(loss))):
                self._report_nonfinite(step, loss, values, param_names)
            return extra_names, extra_values

        return derive

    def _report_nonfinite(self, step: int, loss: float | None, values: np.ndarray, params: list[tuple[int, str]]) -> None:
        """Writer thread: emit the one ``nonfinite`` event of the run."""
        self.nonfinite_step = step
        norms = [(name, float(values[i])) for i, name in params]
        message = nonfinite_message(step, loss, norms)
        data = {"loss": None if loss is None else repr(loss), "params": [n for n, v in norms if not math.isfinite(v)]}
        self._recorder._writer.add_event(EventRow(step, time.time(), EVENT_NONFINITE, "critical", message, data))


def nonfinite_message(step: int, loss: float | None, norms: list[tuple[str, float]]) -> str:
    """The ``nonfinite`` event's text from what the recorder has on the host: the loss and each parameter's
    gradient norm (float32 on the way to the host). It says only what the norms show: a NaN norm means a NaN
    gradient element; an inf norm is an inf element or finite elements whose norm overflows float32 (the
    lr-too-high demo's gradients reached 1.6e27, every element finite), which the norm cannot tell apart."""
    nan = [name for name, value in norms if math.isnan(value)]
    inf = [name for name, value in norms if math.isinf(value)]
    what = "loss" if loss is not None and not math.isfinite(loss) else "gradient norm"
    message = f"first non-finite {what} at step {step}"
    if nan:
        message += f"; NaN gradients in {_listed(nan)}"
    if inf:
        message += (f"; gradient norm inf in {_listed(inf)} (its elements may be finite: "
                    "a norm beyond float32's range overflows)")
    return message


def _listed(names: list[str]) -> str:
    """Up to 10 names, then a count."""
    return ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")

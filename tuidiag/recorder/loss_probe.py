"""What the loss function is given, checked on sampled steps: probabilities where it expects logits, shapes that broadcast.

Given ``rec.watch(..., loss_fn=criterion)``, the probe looks at the first call of the
loss function on every :data:`EVERY`-th step: an ``nn.Module`` loss through a forward
pre-hook that exists only on those steps, a plain function through the wrapper that
``rec.loss_fn`` becomes (the training's own reference to the function is untouched, so
a plain function is seen only when called as ``rec.loss_fn(output, y)``). The wrapper
passes every argument through and returns the function's own result; the probe's own
errors are reported, never raised.

The shapes are host metadata (no synchronisation); the share of probability rows is
computed on the device from at most :data:`MAX_ROWS` rows and handed to the step's
asynchronous copy, like every other per-step value.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch import nn

from tuidiag.format import (
    EVENT_LOSS_FN, EVENT_LOSS_SHAPES, LOSS_FN_BROADCAST, LOSS_FN_CLASSES, LOSS_FN_PROB_ROWS, LOSS_FN_UNIT_SHARE,
)
from tuidiag.recorder.probe_parts import ProbeParts

EVERY = 10
"""The loss function's inputs are checked on every 10th step."""
MAX_ROWS = 64
"""Rows (or 64x as many elements) of the loss input that the probability checks look at, evenly strided."""
SUM_TOLERANCE = 1e-2
"""A row sums to 1 within this (softmax in half precision is that far off)."""
MAX_SHAPE_EVENTS = 10

EXPECTS: dict[str, str] = {
    **dict.fromkeys(("CrossEntropyLoss", "cross_entropy"), "class logits"),
    **dict.fromkeys(("NLLLoss", "nll_loss"), "log-probabilities"),
    **dict.fromkeys(("BCEWithLogitsLoss", "binary_cross_entropy_with_logits", "MultiLabelSoftMarginLoss",
                     "multilabel_soft_margin_loss"), "logits"),
    **dict.fromkeys(("MSELoss", "mse_loss", "L1Loss", "l1_loss", "SmoothL1Loss", "smooth_l1_loss", "HuberLoss", "huber_loss",
                     "BCELoss", "binary_cross_entropy"), "input and target of one shape"),
}
"""What a known loss expects its input to be; the name of a module's class or of a function."""
CLASS_INDEX = ("CrossEntropyLoss", "cross_entropy", "NLLLoss", "nll_loss")
"""Losses over class scores along dimension 1: their rows must not be probabilities (``loss_fn/prob_rows``)."""
BINARY_LOGITS = ("BCEWithLogitsLoss", "binary_cross_entropy_with_logits", "MultiLabelSoftMarginLoss",
                 "multilabel_soft_margin_loss")
"""Losses over logits element by element: their inputs must not all lie in [0, 1] (``loss_fn/unit_share``)."""
ELEMENTWISE = ("MSELoss", "mse_loss", "L1Loss", "l1_loss", "SmoothL1Loss", "smooth_l1_loss", "HuberLoss", "huber_loss",
               "BCELoss", "binary_cross_entropy", *BINARY_LOGITS)
"""Losses that compare input and target element by element: any difference of shape is a broadcast."""


def loss_name(loss_fn: Any) -> str:
    """The class name of a module (or callable object), the name of a function (through ``functools.partial``)."""
    inner = loss_fn
    while isinstance(inner, functools.partial):
        inner = inner.func
    if isinstance(inner, nn.Module) or not hasattr(inner, "__name__"):
        return type(inner).__name__
    return str(inner.__name__)


def shapes_broadcast(kind: str, a: torch.Size, b: torch.Size) -> torch.Size | None:
    """The shape ``a`` and ``b`` broadcast to when that is a silent mistake for a loss ``kind``, else ``None``.

    A mistake: the shapes differ and broadcast to more elements than either has (the
    ``(N, 1)`` against ``(N,)`` pattern, which compares every prediction with every
    target), or, for a loss that compares element by element, they differ at all.
    """
    if a == b:
        return None
    try:
        wide = torch.broadcast_shapes(a, b)
    except RuntimeError:
        return None  # the loss itself raises, loudly
    grows = wide.numel() > max(a.numel(), b.numel())
    return wide if grows or kind in ELEMENTWISE else None


def _strided(x: torch.Tensor, limit: int) -> torch.Tensor:
    """At most ``limit`` entries of ``x`` along its first dimension, evenly strided."""
    return x[:: max(1, -(-x.shape[0] // limit))][:limit]


def probability_rows(x: torch.Tensor) -> torch.Tensor:
    """On the device: the share of rows along dimension 1 that lie in [0, 1] and sum to 1 (of at most 64 rows)."""
    if x.dim() > 2:
        x = _strided(x, 2).movedim(1, -1)
    rows = _strided(x.reshape(-1, x.shape[-1]), MAX_ROWS).float()
    inside = ((rows >= 0) & (rows <= 1)).all(dim=1)
    return (inside & ((rows.sum(dim=1) - 1).abs() <= SUM_TOLERANCE)).float().mean()


def unit_share(x: torch.Tensor) -> torch.Tensor:
    """On the device: the share of (at most 4,096 strided) elements that lie in [0, 1]."""
    flat = _strided(x.reshape(-1), MAX_ROWS * MAX_ROWS).float()
    return ((flat >= 0) & (flat <= 1)).float().mean()


def _shape_text(shape: torch.Size) -> str:
    return str(tuple(shape))


class LossProbe:
    """Checks the inputs of one loss function on sampled steps; ``loss_fn`` is what the recorder should call it by."""

    def __init__(self, loss_fn: Any, paused: Callable[[], bool], report: Callable[[str, BaseException], None]) -> None:
        self.kind = loss_name(loss_fn)
        self.expects = EXPECTS.get(self.kind, "unknown")
        self._paused, self._report = paused, report
        self._module = loss_fn if isinstance(loss_fn, nn.Module) else None
        self.loss_fn = loss_fn if self._module is not None else self._wrap(loss_fn)
        self._handle: Any = None
        self._armed = self._broken = False
        self._parts = ProbeParts()
        self._described = False
        self._last_shapes: tuple[torch.Size, torch.Size] | None = None
        self._shape_events = 0

    def arm(self, next_step: int) -> None:
        """Look at the next call of the loss function when ``next_step`` is a sampled step."""
        if next_step % EVERY or self._armed or self._broken:
            return
        try:
            if self._module is not None:
                self._handle = self._module.register_forward_pre_hook(self._pre_hook, with_kwargs=True)
            self._armed = True
        except Exception as exc:  # an odd module: stop checking it, never stop the step
            self._broken = True
            self._report("loss_probe", exc)

    def parts(self) -> ProbeParts:
        """The values seen since the last call (if the loss function was called), and disarm."""
        self._disarm()
        parts, self._parts = self._parts, ProbeParts()
        return parts

    def close(self) -> None:
        """Remove the hook, if one is installed."""
        self._disarm()

    def _disarm(self) -> None:
        self._armed = False
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def checked(*args: Any, **kwargs: Any) -> Any:
            if self._armed:
                self._observe(args, kwargs)
            return fn(*args, **kwargs)

        try:
            return functools.wraps(fn)(checked)
        except Exception:  # an odd callable whose attributes cannot be copied
            return checked

    def _pre_hook(self, _module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._observe(args, kwargs)

    def _observe(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The first call after arming: record what it was given. Never raises."""
        if not self._armed or self._paused():
            return
        self._disarm()
        try:
            x = args[0] if args else kwargs.get("input")
            y = args[1] if len(args) > 1 else kwargs.get("target")
            if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
                self._parts.add(self._record(x.detach(), y.detach()))  # all of a call's values, or none
        except Exception as exc:
            self._report("loss_probe", exc)

    def _record(self, x: torch.Tensor, y: torch.Tensor) -> ProbeParts:
        """The call's values and events; what may fail runs first, so a failure leaves no trace."""
        rows = share = None
        floating = x.is_floating_point() and x.numel() > 0
        with torch.no_grad():
            if floating and self.kind in CLASS_INDEX and x.dim() >= 2 and x.shape[1] >= 2:
                rows = probability_rows(x)
            elif floating and self.kind in BINARY_LOGITS:
                share = unit_share(x)
        wide = shapes_broadcast(self.kind, x.shape, y.shape)
        parts = ProbeParts([LOSS_FN_BROADCAST], [0.0 if wide is None else 1.0])
        if rows is not None:
            parts.host_names.append(LOSS_FN_CLASSES)
            parts.host_values.append(float(x.shape[1]))
            parts.dev_names.append(LOSS_FN_PROB_ROWS)
            parts.dev_values.append(rows)
        if share is not None:
            parts.dev_names.append(LOSS_FN_UNIT_SHARE)
            parts.dev_values.append(share)
        if not self._described:
            self._described = True
            message = f"loss function {self.kind} (expects {self.expects})"
            parts.events.append((EVENT_LOSS_FN, "info", message, {"key": self.kind, "expects": self.expects}))
        if wide is not None and (x.shape, y.shape) != self._last_shapes and self._shape_events < MAX_SHAPE_EVENTS:
            self._last_shapes, self._shape_events = (x.shape, y.shape), self._shape_events + 1
            words = f"input {_shape_text(x.shape)} and target {_shape_text(y.shape)} broadcast to {_shape_text(wide)}"
            data = {"key": words, "input_shape": list(x.shape), "target_shape": list(y.shape), "broadcast_shape": list(wide)}
            parts.events.append((EVENT_LOSS_SHAPES, "warning", f"{self.kind}: {words}", data))
        return parts

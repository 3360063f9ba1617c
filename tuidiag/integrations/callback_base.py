"""What the framework callbacks share: the error guard, JSON-safe configs and batch splitting.

Nothing here imports a training framework; torch is imported only where a
tensor has to be recognised.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, TypeVar

from tuidiag.recorder.errors import ErrorReporter

F = TypeVar("F", bound=Callable[..., Any])

INPUT_KEYS = ("input_ids", "inputs_embeds", "pixel_values", "input_values", "input_features", "x", "inputs", "input")
"""Keys of a dict batch tried, in order, for the model input."""
TARGET_KEYS = ("labels", "label", "y", "target", "targets")
"""Keys of a dict batch tried, in order, for the targets."""
_DROP = object()


class GuardedCallback:
    """Base of the callbacks: owns the recorder (once created) and an error reporter for before that."""

    def __init__(self) -> None:
        self.recorder: Any = None
        self._errors = ErrorReporter()

    @property
    def errors(self) -> ErrorReporter:
        """The recorder's error reporter (errors become run events), else the callback's own."""
        return self.recorder.errors if self.recorder is not None else self._errors

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (``ddp_spawn``) without the live recorder: each process makes its own."""
        state = dict(self.__dict__)
        state["recorder"] = None
        state.pop("_errors", None)  # holds a lock
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled callback with a fresh error reporter."""
        self.__dict__.update(state)
        self._errors = ErrorReporter()


def guarded_hook(fn: F) -> F:
    """Decorate a callback hook so that no exception from tuidiag reaches the training.

    The error is counted and reported once (stderr, and a ``recorder_error`` event
    once the recorder exists), like the recorder's own errors.
    """

    @functools.wraps(fn)
    def wrapper(self: GuardedCallback, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except Exception as exc:
            self.errors.report(f"callback.{fn.__name__}", exc)
            return None

    return wrapper  # type: ignore[return-value]


def recorder_arguments(recorder_kwargs: Mapping[str, Any], global_step: Any) -> dict[str, Any]:
    """The recorder's arguments for a training whose trainer starts at ``global_step``.

    A trainer resumed from a checkpoint (``global_step > 0``) continues the run in
    the directory (``resume="allow"``) from that step (``start_step``), so the steps
    it redoes replace those recorded after the checkpoint; a new trainer never mixes
    with a run already there (``resume="never"``). What the user passed wins.
    """
    kwargs = dict(recorder_kwargs)
    step = global_step if isinstance(global_step, int) and not isinstance(global_step, bool) else 0
    kwargs.setdefault("resume", "allow" if step > 0 else "never")
    if step > 0:
        kwargs.setdefault("start_step", step)
    return kwargs


def json_safe(value: Any) -> Any:
    """``value`` reduced to what JSON can hold; anything else (objects, tensors, enums...) is dropped.

    Returns a private sentinel for a dropped value; use :func:`json_safe_dict` at the top.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        items = [json_safe(v) for v in value]
        return [v for v in items if v is not _DROP]
    if isinstance(value, Mapping):
        return json_safe_dict(value)
    return _DROP


def json_safe_dict(mapping: Mapping[Any, Any] | None) -> dict[str, Any]:
    """The entries of ``mapping`` with string keys and JSON-safe values (others dropped)."""
    out: dict[str, Any] = {}
    for key, value in (mapping or {}).items():
        safe = json_safe(value)
        if isinstance(key, str) and safe is not _DROP:
            out[key] = safe
    return out


def split_batch(batch: Any) -> tuple[Any, Any]:
    """``(x, y)`` tensors of a batch for ``Recorder.batch``; ``None`` where none is found.

    A tensor is ``x``; a list or tuple gives its first two items; a dict (or a
    ``BatchEncoding``) gives the first of :data:`INPUT_KEYS` and :data:`TARGET_KEYS`.
    """
    import torch

    if isinstance(batch, torch.Tensor):
        return batch, None
    if isinstance(batch, (list, tuple)) and batch:
        x = batch[0] if isinstance(batch[0], torch.Tensor) else None
        y = batch[1] if len(batch) > 1 and isinstance(batch[1], torch.Tensor) else None
        return x, y
    if isinstance(batch, Mapping):
        x = next((batch[k] for k in INPUT_KEYS if isinstance(batch.get(k), torch.Tensor)), None)
        y = next((batch[k] for k in TARGET_KEYS if isinstance(batch.get(k), torch.Tensor)), None)
        return x, y
    return None, None


def base_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside a framework wrapper (Accelerate, Lightning), else ``optimizer``."""
    inner = getattr(optimizer, "optimizer", None)
    return inner if inner is not None and hasattr(inner, "param_groups") else optimizer


def base_scheduler(scheduler: Any) -> Any:
    """The torch LR scheduler inside a framework wrapper (Accelerate's ``AcceleratedScheduler``), else ``scheduler``."""
    inner = getattr(scheduler, "scheduler", None)
    return inner if inner is not None and hasattr(inner, "get_last_lr") else scheduler


def take_activations(recorder: Any) -> dict[str, Any]:
    """Collect and disarm the activation hooks that ``recorder.batch()`` armed, as ``{name: tensor}``.

    With gradient accumulation the callbacks call ``batch()`` at a step's *first*
    micro-batch (so ``time/data_wait`` is the wait for data, not the earlier
    micro-batches' compute) and take the activations right after its forward pass:
    the later micro-batches would otherwise add ``#2``, ``#3``... entries. The
    callback logs them at the step. Reaches into the recorder's watch, which has
    no public accessor.
    """
    watch = getattr(recorder, "_watch", None)
    if watch is None:
        return {}
    names, values = watch.activation_parts()
    return dict(zip(names, values, strict=True))

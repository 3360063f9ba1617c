"""The ``Recorder(...)`` arguments checked at construction: the only errors the recorder raises.

Once constructed, a recorder never raises into the training loop. Its constructor
raises, before any training step and before anything is written, only for a
mistake in the call itself:

- :class:`ArgumentError` (a ``TypeError`` and a ``ValueError``): an argument of the
  wrong type or out of range (:func:`check_arguments` lists each);
- :class:`tuidiag.ResumeError` (a ``ValueError``): ``resume="must"`` and no run to continue.

``config`` is never a reason to raise: whatever it holds is stored as JSON, and what
cannot be is replaced by a placeholder and reported (``tuidiag.store.json_values``).
"""

from __future__ import annotations

import math
import numbers
import operator
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuidiag.recorder.placement import RESUME_MODES

STEP_LIMIT = 2**62
"""``start_step`` lies within ``±STEP_LIMIT``: room for 2**62 steps before the int64 step column ends."""
MAX_FLUSH_INTERVAL = 86_400.0
MAX_QUEUE = 100_000_000


class ArgumentError(TypeError, ValueError):
    """A ``Recorder(...)`` argument of the wrong type or out of range (raised at construction only)."""


@dataclass(frozen=True)
class Arguments:
    """The constructor's arguments, checked and normalised."""

    run_dir: Path
    resume: str
    start_step: int | None
    name: str | None
    flush_interval: float
    grads_every: int
    weights_every: int
    activations_every: int
    inputs_every: int
    capture_nonfinite: bool
    capture_max_bytes: int
    max_queue: int
    factory: str | None
    control: bool
    histograms_every: int = 0


def check_arguments(run_dir: Any, resume: Any, start_step: Any, name: Any, flush_interval: Any, grads_every: Any,
                    weights_every: Any, activations_every: Any, inputs_every: Any, capture_nonfinite: Any,
                    capture_max_bytes: Any, max_queue: Any, factory: Any, control: Any, histograms_every: Any = 0) -> Arguments:
    """The arguments normalised; :class:`ArgumentError` names the first one that is wrong.

    - ``run_dir``: a non-empty ``str``, ``bytes`` or ``os.PathLike`` (a path that cannot
      be used is not an argument error: the recorder reports it and records beside it);
    - ``resume``: ``"never"``, ``"allow"`` or ``"must"``;
    - ``start_step``: ``None`` or an integer within ``±2**62``;
    - ``name``, ``factory``: ``None`` or a ``str``;
    - ``flush_interval``: a real number of seconds, ``0 < x <= 86400``;
    - ``grads_every``, ``weights_every``, ``activations_every``, ``inputs_every``, ``histograms_every``,
      ``capture_max_bytes``: integers ``>= 0``; ``max_queue``: an integer, ``1 <= x <= 10**8``;
    - ``capture_nonfinite``, ``control``: anything with a truth value.
    """
    return Arguments(
        run_dir=_path(run_dir),
        resume=_mode(resume),
        start_step=None if start_step is None else _integer("start_step", start_step, -STEP_LIMIT, STEP_LIMIT),
        name=_optional_text("name", name),
        flush_interval=_seconds("flush_interval", flush_interval),
        grads_every=_integer("grads_every", grads_every, 0),
        weights_every=_integer("weights_every", weights_every, 0),
        activations_every=_integer("activations_every", activations_every, 0),
        inputs_every=_integer("inputs_every", inputs_every, 0),
        capture_nonfinite=_flag("capture_nonfinite", capture_nonfinite),
        capture_max_bytes=_integer("capture_max_bytes", capture_max_bytes, 0),
        max_queue=_integer("max_queue", max_queue, 1, MAX_QUEUE),
        factory=_optional_text("factory", factory),
        control=_flag("control", control),
        histograms_every=_integer("histograms_every", histograms_every, 0),
    )


def _path(value: Any) -> Path:
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise ArgumentError(f"run_dir must be a path (str or os.PathLike), not {type(value).__name__}")
    try:
        text = os.fsdecode(os.fspath(value))
    except Exception as exc:  # a PathLike whose __fspath__ raises or returns something else
        raise ArgumentError(f"run_dir could not be read as a path ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not text:
        raise ArgumentError("run_dir is empty")
    return Path(text)


def _mode(value: Any) -> str:
    if type(value) is not str or value not in RESUME_MODES:
        shown = repr(value) if type(value) is str else f"a {type(value).__name__}"
        raise ArgumentError(f"resume must be one of {', '.join(map(repr, RESUME_MODES))}, not {shown[:100]}")
    return value


def _integer(name: str, value: Any, low: int, high: int | None = None) -> int:
    try:
        number = operator.index(value)
    except Exception:
        raise ArgumentError(f"{name} must be an integer, not {type(value).__name__}") from None
    if number < low or (high is not None and number > high):
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise ArgumentError(f"{name} must be {bounds}, not {number}")
    return int(number)


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentError(f"{name} must be a number of seconds, not {type(value).__name__}")
    try:
        seconds = float(value)
    except Exception:
        raise ArgumentError(f"{name} must be a number of seconds") from None
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_FLUSH_INTERVAL):
        raise ArgumentError(f"{name} must be more than 0 and at most {MAX_FLUSH_INTERVAL:g} seconds, not {seconds!r}")
    return seconds


def _optional_text(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ArgumentError(f"{name} must be a str or None, not {type(value).__name__}")
    return str.__str__(value)


def _flag(name: str, value: Any) -> bool:
    try:
        return bool(value)
    except Exception:
        raise ArgumentError(f"{name} must be True or False, not {type(value).__name__} without a truth value") from None


@dataclass
class WatchArguments:
    """What ``watch()`` keeps of its arguments, and what it rejected (``(name, reason)``)."""

    model: Any
    optimizer: Any
    max_grad_norm: float | None
    rejected: list[tuple[str, str]]
    forward: Any = None


def check_watch(torch: Any, model: Any, optimizer: Any, max_grad_norm: Any, forward: Any = None) -> WatchArguments:
    """Each ``watch()`` argument accepted or rejected on its own (``watch`` never raises).

    ``model`` must be a ``torch.nn.Module`` (else nothing is watched); ``optimizer``
    ``None`` or a ``torch.optim.Optimizer`` (or an object with its ``param_groups`` and step
    hooks, as framework wrappers have; else the model is watched without it);
    ``max_grad_norm`` ``None`` or a number ``> 0`` (``inf``: no clipping, as ``None``;
    else it is rejected and taken as ``None``); ``forward`` ``None`` or a callable
    (else it is rejected and live jobs call ``model(x)``).
    """
    rejected: list[tuple[str, str]] = []
    if forward is not None and not callable(forward):
        rejected.append(("forward", f"is a {type(forward).__name__}, not a callable forward(model, x): live jobs call model(x)"))
        forward = None
    if not isinstance(model, torch.nn.Module):
        rejected.append(("model", f"is a {type(model).__name__}, not a torch.nn.Module: nothing is watched"))
        model = None
    if optimizer is not None and not _optimizer_like(torch, optimizer):
        rejected.append(("optimizer", f"is a {type(optimizer).__name__}, not a torch.optim.Optimizer: the model is watched without it"))
        optimizer = None
    norm: float | None = None
    if max_grad_norm is not None:
        try:
            norm = float(max_grad_norm) if not isinstance(max_grad_norm, (str, bytes, complex)) else math.nan
        except Exception:
            norm = math.nan
        if math.isnan(norm) or norm <= 0:
            rejected.append(("max_grad_norm", f"is {str(max_grad_norm)[:40]!r} (of type {type(max_grad_norm).__name__}), "
                                              "not a number > 0: taken as no clipping"))
            norm = None
        elif math.isinf(norm):
            norm = None  # clip_grad_norm_ with an infinite limit never clips
    return WatchArguments(model, optimizer, norm, rejected, forward)


def _optimizer_like(torch: Any, optimizer: Any) -> bool:
    if isinstance(optimizer, torch.optim.Optimizer):
        return True
    try:
        return isinstance(optimizer.param_groups, list) and callable(optimizer.register_step_pre_hook)
    except Exception:  # a wrapper whose attributes raise
        return False

"""Which weights a job measured, said in its result, and loading a checkpoint's weights into the model.

A job starts from the model it is given: the factory's (its initial weights unless
the factory loads a checkpoint itself), a checkpoint's loaded into the factory's
model (``tuidiag sharpness --checkpoint PATH``), or, inside a live training, the
training's own at the step the job ran (before that step's optimizer update). The
result's ``weights`` says which: ``{"kind": "factory" | "checkpoint" | "live" | "given",
"text": ...}``.

A checkpoint is loaded like a NaN capture, with ``torch.load(weights_only=True)`` on
the CPU (nothing in it runs): a ``state_dict``, or a dict holding one under
``"model"`` (or ``"model_state_dict"``, ``"state_dict"``, as common training loops
save them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from tuidiag.jobs.job_handle import JobError

STATE_KEYS = ("model", "model_state_dict", "state_dict")
"""Keys under which a checkpoint dict may hold the model's ``state_dict``."""


def given_weights() -> dict[str, str]:
    """The model as a caller passed it (a job called from Python)."""
    return {"kind": "given", "text": "the weights of the model as passed to the job"}


def factory_weights(spec: str) -> dict[str, str]:
    """The weights of the model the factory ``spec`` built."""
    return {"kind": "factory",
            "text": f"the factory's model as {spec} built it (its initial weights, unless the factory loads a checkpoint)"}


def checkpoint_weights(path: str | os.PathLike[str]) -> dict[str, str]:
    """The weights of the checkpoint at ``path``, loaded into the factory's model."""
    return {"kind": "checkpoint", "text": f"checkpoint {os.path.abspath(path)}"}


def live_weights(step: int) -> dict[str, str]:
    """The live training's weights when the job ran, after ``step``'s backward and before its update."""
    return {"kind": "live", "text": f"the live training's weights at step {step} (before its optimizer step)"}


def _is_state_dict(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The model ``state_dict`` in the checkpoint at ``path``; :class:`JobError` when there is none."""
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise JobError(f"cannot load checkpoint {path}: {type(exc).__name__}: {exc}") from exc
    if _is_state_dict(loaded):
        return dict(loaded)
    if isinstance(loaded, Mapping):
        for key in STATE_KEYS:
            if _is_state_dict(loaded.get(key)):
                return dict(loaded[key])
    found = f"a dict with keys {', '.join(map(str, list(loaded)[:8]))}" if isinstance(loaded, Mapping) else f"a {type(loaded).__name__}"
    raise JobError(f"{path} holds {found}: expected a model state_dict, or a dict with one under "
                   f"{', '.join(repr(k) for k in STATE_KEYS)}")


def apply_checkpoint(model: nn.Module, state: Mapping[str, torch.Tensor], path: str | os.PathLike[str]) -> None:
    """Load ``state`` into ``model`` (every key must match); :class:`JobError` saying what differs otherwise."""
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()
        raise JobError(f"checkpoint {path} does not fit the factory's model: {' '.join(first[:4])[:600]}") from exc

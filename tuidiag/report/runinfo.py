"""The facts about a run that a report reader needs: identity, timing, model, optimizer, config.

Returns plain (field, value) text pairs taken from the manifest and the events;
the caller escapes them for its medium.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from tuidiag.diagnosis.view import RunView

Row = tuple[str, str]

_OPTIMIZER_NOISE = {"foreach", "differentiable", "fused", "capturable", "maximize", "initial_lr", "params"}
"""Optimizer param-group keys that say nothing about the training when left at their defaults."""


def _when(stamp: Any) -> str:
    if not isinstance(stamp, (int, float)):
        return "unknown"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def identity_rows(view: RunView) -> list[Row]:
    """Name, directory, status, steps, timing, host and command."""
    m = view.manifest
    rows = [("name", view.run.name), ("directory", str(view.run.path)), ("status", view.run.status)]
    steps = view.loss[0]
    rows.append(("steps", f"{len(steps)} with a loss, last step {view.last_step}" if len(steps) else f"last step {view.last_step}"))
    rows.append(("started", _when(m.get("created"))))
    end = m.get("ended") or m.get("heartbeat")
    if isinstance(end, (int, float)) and isinstance(m.get("created"), (int, float)):
        rows.append(("ended" if m.get("ended") else "last heartbeat", f"{_when(end)} ({_duration(end - m['created'])} after start)"))
    if m.get("host"):
        rows.append(("host", f"{m['host']} (pid {m.get('pid')}, world size {m.get('world_size', 1)})"))
    if isinstance(m.get("command"), list):
        rows.append(("command", " ".join(str(part) for part in m["command"])))
    versions = m.get("versions")
    if isinstance(versions, dict):
        rows.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    return rows


def model_rows(view: RunView) -> list[Row]:
    """Model class and size, layers and activations, from the recorder's model summary."""
    model = view.model
    if not model:
        return [("model", "not recorded (call rec.watch(model, ...))")]
    n_params, n_train = model.get("n_params"), model.get("n_trainable")
    rows = [("model", str(model.get("class", "unknown")))]
    if isinstance(n_params, int):
        size = f"{n_params:,} parameters ({n_params * 4 / 2**20:.2f} MiB in float32)"
        if isinstance(n_train, int) and n_train != n_params:
            size += f", {n_train:,} trainable"
        rows.append(("model size", size))
    layers = model.get("weight_layers")
    acts = ", ".join(str(a) for a in model.get("activations") or []) or "none seen"
    rows.append(("layers", f"{layers} weight layers; activations: {acts}; "
                           f"normalization: {'yes' if model.get('has_norm') else 'no'}; dropout: {'yes' if model.get('has_dropout') else 'no'}"))
    return rows


def optimizer_rows(view: RunView) -> list[Row]:
    """Optimizer class and the hyperparameters of each param group, and the clip threshold."""
    opt = view.manifest.get("optimizer")
    rows: list[Row] = []
    if isinstance(opt, dict):
        groups = [g for g in opt.get("param_groups") or [] if isinstance(g, dict)]
        for i, group in enumerate(groups):
            params = ", ".join(f"{k}={_value(v)}" for k, v in group.items() if k not in _OPTIMIZER_NOISE and v is not None)
            label = "optimizer" if len(groups) == 1 else f"optimizer group {i}"
            rows.append((label, f"{opt.get('class', 'unknown')}: {params}"))
        if not groups:
            rows.append(("optimizer", str(opt.get("class", "unknown"))))
    else:
        rows.append(("optimizer", "not recorded (pass the optimizer to rec.watch)"))
    clip = view.manifest.get("max_grad_norm")
    rows.append(("gradient clipping", f"max_grad_norm={clip}" if clip is not None else "none recorded"))
    return rows


def config_rows(view: RunView) -> list[Row]:
    """Each entry of the user's config, as ``config.<key>``."""
    config = view.manifest.get("config")
    if not isinstance(config, dict) or not config:
        return [("config", "none given (Recorder(path, config={...}))")]
    return [(f"config.{key}", _value(value)) for key, value in config.items()]


def activity_rows(view: RunView) -> list[Row]:
    """Events by kind, NaN captures and the recorder's own counters."""
    rows = []
    kinds = Counter(e.kind for e in view.run.events)
    rows.append(("events", ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())) or "none"))
    captures = view.run.captures
    if captures:
        rows.append(("captures", ", ".join(str(p.relative_to(view.run.path)) for p in captures)))
    stats = view.manifest.get("stats")
    if isinstance(stats, dict):
        rows.append(("recorder", ", ".join(f"{k} {v}" for k, v in stats.items())))
    return rows


def run_info(view: RunView) -> list[Row]:
    """Every row of the run info table, in reading order."""
    return identity_rows(view) + model_rows(view) + optimizer_rows(view) + config_rows(view) + activity_rows(view)

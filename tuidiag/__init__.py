"""tuidiag: record a PyTorch training's health and find out why it is failing.

Training side::

    with tuidiag.Recorder("runs/exp1", config={"lr": 3e-4}) as rec:
        rec.watch(model, optimizer, max_grad_norm=1.0)
        ...
        rec.step(loss)

Reading side: ``tuidiag.open_run(path)`` and ``tuidiag.find_runs(root)``.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

__version__ = "0.1.0"

__all__ = ["ArgumentError", "Event", "Recorder", "ResumeError", "Run", "Series", "__version__", "find_runs", "open_run"]

_EXPORTS = {"ArgumentError": "tuidiag.recorder", "Recorder": "tuidiag.recorder", "ResumeError": "tuidiag.recorder", "Event": "tuidiag.store", "Run": "tuidiag.store", "Series": "tuidiag.store",
            "find_runs": "tuidiag.store", "open_run": "tuidiag.store"}
"""Loaded on first use, so ``tuidiag status`` and other commands start without the recorder's imports."""

if _typing.TYPE_CHECKING:
    from tuidiag.recorder import ArgumentError, Recorder, ResumeError
    from tuidiag.store import Event, Run, Series, find_runs, open_run


def __getattr__(name: str) -> _typing.Any:
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tuidiag' has no attribute {name!r}")


def __dir__() -> list[str]:
    """What completion offers: the public API (loaded lazily), not this module's own imports."""
    return sorted(__all__)

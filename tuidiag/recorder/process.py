"""Facts about the recording process: is torch there, which rank is this, did it die of an exception."""

from __future__ import annotations

import os
import sys
from types import TracebackType
from typing import Any

_state = {"uncaught": False, "hooked": False}


def import_torch() -> Any:
    """The torch module, or ``None`` when it is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def detect_rank(torch: Any) -> tuple[int, int]:
    """(rank, world size) from torch.distributed when initialised, else the launcher's env."""
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def died_of_exception() -> bool:
    """True once an uncaught exception reached ``sys.excepthook`` (needs ``install_excepthook``)."""
    return _state["uncaught"]


def install_excepthook() -> None:
    """Remember an uncaught exception so a run closed at exit reads as failed (installed once)."""
    if _state["hooked"]:
        return
    _state["hooked"] = True
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        _state["uncaught"] = True
        previous(exc_type, exc, tb)

    sys.excepthook = hook

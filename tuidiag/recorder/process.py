"""Facts about the recording process: is torch there, which rank is this, how did it end.

How it ended decides the status ``run.json`` gets (:func:`end_status`): ``interrupted``
after Ctrl-C (a ``KeyboardInterrupt``) or SIGTERM, ``failed`` after another uncaught
exception, else ``finished``. Nothing here changes how the training reacts to a signal:

- Ctrl-C is seen as the ``KeyboardInterrupt`` Python raises anyway (``sys.excepthook``,
  ``Recorder.__exit__``, or ``close()`` called while it is being handled).
- SIGTERM: :func:`watch_sigterm` puts a handler in front of the one the process had.
  Before a handler of the training's (or its framework's) it notes the signal and calls
  that handler. Before the default action it writes what each open recorder has queued
  (a few seconds at most), marks the runs ``interrupted``, and then ends the process by
  SIGTERM as the default action would (exit status -15, no ``finally`` or ``atexit``).
  Called by a handler installed later that chains to it, it only notes the signal: that
  handler decides. In a forked child (a DataLoader worker) it does the default action alone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import weakref
from types import FrameType, TracebackType
from typing import Any, Callable

from tuidiag.format import STATUS_FAILED, STATUS_FINISHED, STATUS_INTERRUPTED

_state: dict[str, Any] = {"uncaught": None, "hooked": False, "sigterm": False, "watching": False, "pid": None}
_closers: list[weakref.WeakMethod[Callable[[], None]]] = []
"""What ends each open recorder on SIGTERM (weak: a recorder collected is gone from it)."""


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


def end_status(exc_type: type[BaseException] | None) -> str:
    """The status of a run ending now, after ``exc_type`` (None: no exception, or none known).

    ``interrupted`` for a ``KeyboardInterrupt``, or once SIGTERM arrived (a framework's
    ``SIGTERMException`` included); ``failed`` for any other exception; else ``finished``."""
    if (exc_type is not None and issubclass(exc_type, KeyboardInterrupt)) or _state["sigterm"]:
        return STATUS_INTERRUPTED
    return STATUS_FAILED if exc_type is not None else STATUS_FINISHED


def exit_status() -> str:
    """:func:`end_status` of the interpreter exiting now (from ``atexit``)."""
    return end_status(_state["uncaught"])


def interrupted_now() -> bool:
    """True once SIGTERM arrived, or while the calling code handles a ``KeyboardInterrupt`` (in its ``except``)."""
    return end_status(sys.exc_info()[0]) == STATUS_INTERRUPTED


def install_excepthook() -> None:
    """Remember an uncaught exception so a run closed at exit reads as failed or interrupted (installed once)."""
    if _state["hooked"]:
        return
    _state["hooked"] = True
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        _state["uncaught"] = exc_type
        previous(exc_type, exc, tb)

    sys.excepthook = hook


def watch_sigterm(close: Callable[[], None]) -> None:
    """Call ``close`` (a bound method) if SIGTERM would end the process; installs the handler once.

    Only from the main thread (Python takes signal handlers there only); a process whose
    SIGTERM is ignored, or handled outside Python, is left alone."""
    _closers[:] = [ref for ref in _closers if ref() is not None]
    _closers.append(weakref.WeakMethod(close))  # type: ignore[arg-type]
    if _state["watching"] or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN or previous is None:
        return
    _state["watching"], _state["pid"] = True, os.getpid()

    def on_sigterm(signum: int, frame: FrameType | None) -> Any:
        ours = os.getpid() == _state["pid"]  # else a forked child (a DataLoader worker): the runs are its parent's
        if ours:
            _state["sigterm"] = True
        if callable(previous):
            return previous(signum, frame)
        if signal.getsignal(signal.SIGTERM) is not on_sigterm:
            return None  # chained to by a handler installed later: it decides what SIGTERM does
        if ours:
            _close_all()
        _default_action(signum)
        return None

    signal.signal(signal.SIGTERM, on_sigterm)


def _close_all() -> None:
    for ref in list(_closers):
        close = ref()
        if close is not None:
            try:
                close()
            except Exception:  # the process ends next whatever happens
                pass


def _default_action(signum: int) -> None:
    """End the process by ``signum`` as if no handler had been installed."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def keep_sigint_exit() -> None:
    """After an uncaught ``KeyboardInterrupt``, make sure the process still ends by SIGINT.

    CPython ends a script whose ``KeyboardInterrupt`` was uncaught by SIGINT (status -2,
    130 in a shell), but it keeps that in a flag which any ``exec``/``eval`` of a string
    clears, and imports run some (``dataclasses``, ``namedtuple``, ``pyarrow.compute``).
    One of them on the recorder's threads after Ctrl-C, or while the run is closed at exit,
    made the training end with status 1 as if it had failed. Raising a ``KeyboardInterrupt``
    from an ``exec`` of a string sets the flag again; called from ``atexit``, once the run is
    closed. Nothing changes for a process that was not stopped by Ctrl-C."""
    uncaught = _state["uncaught"]
    if uncaught is None or not issubclass(uncaught, KeyboardInterrupt) or sys.implementation.name != "cpython":
        return
    try:
        exec("raise KeyboardInterrupt", {})  # noqa: S102  # sets CPython's "unhandled Ctrl-C" flag again
    except KeyboardInterrupt:
        pass

"""The registry of job kinds: the built-in ones, plus any a program adds with :func:`register`.

A kind added here is a CLI subcommand, a monitor key, a request a live training
accepts and a result the Jobs tab shows, with no other table to edit. Register
it in every process that handles it: the monitor, the CLI, and the training
(the training script imports the module that registers it).
"""

from __future__ import annotations

from tuidiag.job_kinds.builtin import BUILTIN
from tuidiag.job_kinds.kind import JobKind
from tuidiag.monitor_keys import key_name, run_view_bindings

_KINDS: dict[str, JobKind] = {kind.name: kind for kind in BUILTIN}


def register(kind: JobKind) -> JobKind:
    """Add ``kind`` (or replace the kind of that name); its name, command and key must be free.

    Its key must also be one the run view does not bind for itself (its tabs, zoom, cursor, cancel,
    the app's quit and help...: :func:`tuidiag.monitor_keys.run_view_bindings`), else pressing it
    would do that instead and the job could never be started from the monitor."""
    taken = run_view_bindings().get(key_name(kind.key))
    if taken is not None:
        raise ValueError(f"job {kind.name!r}: its key {kind.key!r} is taken by {taken}, bound in the run view; choose another key")
    for other in _KINDS.values():
        if other.name == kind.name:
            continue
        clash = [what for what, a, b in (("command", kind.command, other.command), ("key", kind.key, other.key)) if a == b]
        if clash:
            raise ValueError(f"job {kind.name!r}: its {' and '.join(clash)} is taken by {other.name!r}")
    _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove the kind ``name`` (a no-op when there is none)."""
    _KINDS.pop(name, None)


def kinds() -> tuple[JobKind, ...]:
    """Every kind, built-in ones first, in the order they were registered."""
    return tuple(_KINDS.values())


def names() -> tuple[str, ...]:
    """The name of every kind."""
    return tuple(_KINDS)


def live_names() -> tuple[str, ...]:
    """The names of the kinds a live training runs on request."""
    return tuple(name for name, kind in _KINDS.items() if kind.live)


def get(name: str) -> JobKind:
    """The kind called ``name``; ``KeyError`` when there is none."""
    return _KINDS[name]


def find(name: str) -> JobKind | None:
    """The kind called ``name``, or None."""
    return _KINDS.get(name)


def find_command(command: str) -> JobKind | None:
    """The kind whose CLI subcommand is ``command``, or None."""
    return next((kind for kind in _KINDS.values() if kind.command == command), None)

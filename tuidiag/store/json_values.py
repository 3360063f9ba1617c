"""JSON-safe copies of values that come from user code: configs, event data, job results.

:func:`to_json` never raises and never recurses without bound. Whatever it is given
(a 5,000-level nested dict, a dict that contains itself, tensors, numpy arrays,
sets, keys that are not strings, objects whose ``__repr__`` raises, strings of
gigabytes), it returns a value ``json.dumps(..., allow_nan=False)`` accepts and that
tuidiag's readers can read back, plus one note per part it could not keep as it was:

- mappings become objects; keys that are not strings become ``str(key)``, and a key
  that would then collide with another gets its type added (``"1 (int)"``), so
  distinct keys stay distinct;
- lists, tuples, sets and frozensets become arrays;
- ``None``, ``bool``, ``str`` and finite ``float`` stay; NaN and infinities become
  their ``repr`` (``"nan"``, ``"inf"``); an ``int`` stays up to :data:`MAX_INT_BITS` bits
  (a longer one is noted: its text would not read back);
- an object with ``.item()`` (a numpy scalar, a one-element tensor) becomes its item;
- anything else becomes its ``repr``; a ``repr`` that raises becomes a placeholder naming
  the type and the error.

Limits (:class:`JsonLimits`) end what would not fit: nesting deeper than ``depth``,
a container that contains itself (a cycle), more than ``items`` entries in one
container, strings longer than ``string`` characters, more than ``nodes`` values
in all, or more than ``chars`` characters of strings in all. Each is replaced by a
placeholder (``"<circular reference>"``, ``"<nested deeper than 32 levels>"``, a
``"..."`` entry saying how many items were left out) and noted. The limits for
configs and event data keep ``run.json`` and an event's data well under what the
readers accept (64 levels of nesting, 16 MiB per ``run.json``, 1 MiB per event's data).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_INT_BITS = 13_000
"""Ints up to this many bits (about 3,900 digits) are kept; Python's JSON reader refuses ints of over
4,300 digits by default (``sys.set_int_max_str_digits``), so longer ones are noted, not stored."""
ELLIPSIS_KEY = "..."
"""The key (in a mapping) or the last element (in a list) that says how many items were left out."""


@dataclass(frozen=True)
class JsonLimits:
    """Bounds on one conversion; ``None``: no bound (depth and nodes are always bounded)."""

    depth: int = 64
    items: int | None = None
    string: int | None = None
    nodes: int = 10_000_000
    chars: int | None = None


CONFIG_LIMITS = JsonLimits(depth=32, items=10_000, string=65_536, nodes=100_000, chars=4 << 20)
"""A run's config in ``run.json`` (rewritten at every heartbeat): at most about 4 MiB of text."""
EVENT_DATA_LIMITS = JsonLimits(depth=32, items=10_000, string=65_536, nodes=20_000, chars=256 << 10)
"""The ``data`` of one event: at most about 256 KiB of text."""
UNBOUNDED = JsonLimits()
"""Job results and optimizer settings: only the depth and node count are bounded."""


@dataclass
class JsonValue:
    """The converted value and what was not kept as it was: ``(path, what happened)``, path ``/``-joined."""

    value: Any
    notes: list[tuple[str, str]] = field(default_factory=list)


def to_json(value: Any, limits: JsonLimits = UNBOUNDED) -> JsonValue:
    """A JSON-safe copy of ``value`` within ``limits``; never raises (see the module docstring)."""
    converter = _Converter(limits)
    try:
        result = converter.convert(value, "", 0)
    except Exception as exc:  # RecursionError (a caller already deep in its stack), MemoryError, ...
        converter.note("", f"could not be converted ({type(exc).__name__})")
        result = f"<not recorded: {type(exc).__name__}>"
    return JsonValue(result, converter.notes)


class _Converter:
    def __init__(self, limits: JsonLimits) -> None:
        self.limits = limits
        self.notes: list[tuple[str, str]] = []
        self.nodes = 0
        self.chars = 0
        self.active: set[int] = set()
        """ids of the containers being converted (the current path): one seen again is a cycle."""

    def note(self, path: str, what: str) -> None:
        if len(self.notes) < 1000:
            self.notes.append((path or "<value>", what))

    def convert(self, value: Any, path: str, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > self.limits.nodes:
            if self.nodes == self.limits.nodes + 1:
                self.note(path, f"and what follows it were left out: over {self.limits.nodes:,} values in all")
            return None
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is str:
            return self.text(value, path)
        if kind is int:
            return self.integer(value, path)
        if kind is float:
            return value if math.isfinite(value) else repr(value)
        try:
            if isinstance(value, (Mapping, list, tuple, set, frozenset)):
                return self.container(value, path, depth)
            if isinstance(value, str):  # str subclasses: plain text
                return self.text(str.__str__(value), path)
            if isinstance(value, bool):
                return bool(value)
            if isinstance(value, int):
                return self.integer(int(value), path)
            if isinstance(value, float):
                number = float(value)
                return number if math.isfinite(number) else repr(number)
        except RecursionError:
            raise
        except Exception as exc:  # an isinstance or conversion that a user class made raise
            return self.broken(value, path, exc)
        return self.other(value, path, depth)

    def text(self, value: str, path: str) -> str:
        limit = self.limits.string
        if self.limits.chars is not None:
            room = max(0, self.limits.chars - self.chars)
            limit = room if limit is None else min(limit, room)
        if limit is not None and len(value) > limit:
            self.note(path, f"was cut from {len(value):,} to {limit:,} characters")
            value = value[:limit]
        self.chars += len(value)
        return value

    def integer(self, value: int, path: str) -> int | str:
        bits = value.bit_length()
        if bits <= MAX_INT_BITS:
            return value
        self.note(path, f"is an integer of {bits:,} bits, too long to store")
        return f"<integer of {bits:,} bits>"

    def container(self, value: Any, path: str, depth: int) -> Any:
        if depth >= self.limits.depth:
            self.note(path, f"is nested deeper than {self.limits.depth} levels")
            return f"<nested deeper than {self.limits.depth} levels>"
        if id(value) in self.active:
            self.note(path, "contains itself (a circular reference)")
            return "<circular reference>"
        self.active.add(id(value))
        try:
            if isinstance(value, Mapping):
                return self.mapping(value, path, depth)
            return self.sequence(value, path, depth)
        finally:
            self.active.discard(id(value))

    def mapping(self, value: Mapping[Any, Any], path: str, depth: int) -> dict[str, Any]:
        try:
            items = list(value.items())
        except RecursionError:
            raise
        except Exception as exc:
            self.note(path, f"is a mapping whose items() raised {type(exc).__name__}")
            return {ELLIPSIS_KEY: f"<items() raised {type(exc).__name__}>"}
        items, left_out = self.cut(items)
        out: dict[str, Any] = {}
        ordered = [item for item in items if type(item[0]) is str] + [item for item in items if type(item[0]) is not str]
        for i, (key, child) in enumerate(ordered):  # string keys first: they keep their names
            text = key if type(key) is str else self.key_text(key, i)
            if self.limits.string is not None and len(text) > self.limits.string:
                self.note(_join(path, text), f"has a key of {len(text):,} characters, cut to {self.limits.string:,}")
                text = text[: self.limits.string]
            name, n = text, 2
            while name in out:  # str(1) == "1", or two long keys cut alike: distinct keys stay distinct
                name, n = f"{text} ({type(key).__name__}{'' if n == 2 else f' #{n - 1}'})", n + 1
            self.chars += len(name)
            out[name] = self.convert(child, _join(path, name), depth + 1)
        if left_out:
            self.note(path, f"has {len(items) + left_out:,} items; {left_out:,} were left out")
            out[ELLIPSIS_KEY] = f"{left_out:,} more items not recorded"
        return out

    def key_text(self, key: Any, index: int) -> str:
        if isinstance(key, str):
            return str.__str__(key)
        try:
            text = str(key)
            if type(text) is str:
                return text
        except Exception:  # a __str__ that raises: fall back to repr, then to the type
            pass
        try:
            text = repr(key)
            if type(text) is str:
                return text
        except Exception:
            pass
        return f"<key {index}: {type(key).__name__}>"

    def sequence(self, value: Any, path: str, depth: int) -> list[Any]:
        try:
            items = list(value)
        except RecursionError:
            raise
        except Exception as exc:
            self.note(path, f"could not be iterated ({type(exc).__name__})")
            return [f"<iteration raised {type(exc).__name__}>"]
        items, left_out = self.cut(items)
        out = [self.convert(child, _join(path, str(i)), depth + 1) for i, child in enumerate(items)]
        if left_out:
            self.note(path, f"has {len(items) + left_out:,} items; {left_out:,} were left out")
            out.append(f"{ELLIPSIS_KEY} {left_out:,} more items not recorded")
        return out

    def cut(self, items: list[Any]) -> tuple[list[Any], int]:
        limit = self.limits.items
        if limit is None or len(items) <= limit:
            return items, 0
        return items[:limit], len(items) - limit

    def other(self, value: Any, path: str, depth: int) -> Any:
        item = getattr(value, "item", None)
        if callable(item):
            try:
                inner = item()
            except Exception:  # several elements, a device error: shown by its repr instead
                inner = value
            if inner is not value and type(inner) in (bool, int, float, str):
                return self.convert(inner, path, depth)
        try:
            text = repr(value)
            if not isinstance(text, str):
                raise TypeError(f"__repr__ returned {type(text).__name__}")
        except RecursionError:
            raise
        except Exception as exc:
            return self.broken(value, path, exc)
        return self.text(str.__str__(text), path)

    def broken(self, value: Any, path: str, exc: BaseException) -> str:
        name = type(value).__name__
        self.note(path, f"is a {name} that could not be shown ({type(exc).__name__})")
        return f"<{name}: {type(exc).__name__}>"


def _join(path: str, key: str) -> str:
    key = key if len(key) <= 200 else key[:199] + "\N{HORIZONTAL ELLIPSIS}"
    return f"{path}/{key}" if path else key

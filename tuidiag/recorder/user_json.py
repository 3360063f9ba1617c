"""What ``Recorder(config=...)`` and ``rec.event(...)`` store: the user's values as bounded JSON, text checked.

Nothing here raises. A config or an event's ``data`` of any shape is converted by
:func:`tuidiag.store.json_values.to_json`; the parts it could not keep (a cycle,
nesting deeper than 32 levels, a ``repr`` that raises, a string over 65,536
characters, ...) are replaced by placeholders and come back as notes, which the
recorder counts and reports as rejected values. An event is refused as a whole only
when its kind, severity or message cannot be text (:func:`event_texts`).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from tuidiag.recorder.values import storable_name
from tuidiag.store.json_values import CONFIG_LIMITS, EVENT_DATA_LIMITS, JsonLimits, to_json

MAX_KIND = 1000
"""Characters of an event's kind or severity (names: longer ones are refused, not cut)."""
MAX_MESSAGE = 65_536
"""Characters of an event's message kept (the rest is cut, as a logged string is)."""

Notes = list[tuple[str, str]]


def config_json(config: Any) -> tuple[dict[str, Any], Notes]:
    """``config`` as a JSON object; a value that is not a mapping is kept under ``"value"`` (an
    ``argparse.Namespace`` is read as its attributes)."""
    return _as_object(config, CONFIG_LIMITS, "config")


def event_data(data: Any) -> tuple[dict[str, Any], Notes]:
    """An event's ``data`` as a JSON object; a value that is not a mapping is kept under ``"value"``."""
    return _as_object(data, EVENT_DATA_LIMITS, "data")


def _as_object(value: Any, limits: JsonLimits, what: str) -> tuple[dict[str, Any], Notes]:
    if value is None:
        return {}, []
    notes: Notes = []
    try:
        if isinstance(value, argparse.Namespace):
            value = vars(value)
        mapping = isinstance(value, Mapping)
    except Exception as exc:  # a class whose isinstance checks raise
        return {"value": f"<{type(value).__name__}: {type(exc).__name__}>"}, [("<" + what + ">", f"could not be read ({type(exc).__name__})")]
    if not mapping:
        notes.append(("<" + what + ">", f"is a {type(value).__name__}, not a mapping: stored under 'value'"))
        value = {"value": value}
    converted = to_json(value, limits)
    result = converted.value if isinstance(converted.value, dict) else {"value": converted.value}
    return result, notes + converted.notes


def event_texts(kind: Any, severity: Any, message: Any) -> tuple[str, str, str] | str:
    """``(kind, severity, message)`` as text, or why the event cannot be stored.

    Kind and severity name a class of events: they must be text without lone surrogates
    (which UTF-8 cannot store: two kinds would read back alike) and at most
    :data:`MAX_KIND` characters. The message is cut at :data:`MAX_MESSAGE` characters.
    """
    texts = []
    for label, value in (("kind", kind), ("severity", severity), ("message", message)):
        try:
            text = value if type(value) is str else str(value)
            if type(text) is not str:
                text = str.__str__(text)
        except Exception as exc:
            return f"has a {label} of type {type(value).__name__} that cannot be shown as text ({type(exc).__name__})"
        texts.append(text)
    kind_text, severity_text, message_text = texts
    for label, text in (("kind", kind_text), ("severity", severity_text)):
        if len(text) > MAX_KIND:
            return f"has a {label} of {len(text):,} characters (at most {MAX_KIND:,})"
        if not storable_name(text):
            return f"has a {label} that is not valid Unicode text (it holds a lone surrogate)"
    return kind_text, severity_text, message_text[:MAX_MESSAGE]


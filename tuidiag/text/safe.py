"""Showing text that comes from run files literally: no Rich markup, no terminal escapes.

Run names, metric names, config values and messages are written by other
programs. Before anything shows them, they pass through :func:`clean`, which
removes escape sequences and control characters, and are wrapped in a Rich
``Text`` (never parsed as markup) by :func:`literal`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

_ESCAPES = re.compile(
    r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC
    r"|\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b[@-_]"  # other two-byte escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0/C1 controls, and the Unicode bidirectional controls that reorder how text is shown."""
_ESCAPABLE = re.compile(_CONTROLS.pattern[:-1] + "\\ud800-\\udfff]")
_LINE_BREAKS = re.compile(r"[\t\n\u2028\u2029]")
_SURROGATES = re.compile("[\ud800-\udfff]")
"""Lone surrogates (from ``\\ud800`` in JSON, or undecodable bytes in a file name): no encoding can write them."""


def clean(value: object, max_len: int = 500) -> str:
    """``str(value)`` without escape sequences or control characters, cut to ``max_len``.

    A lone surrogate is shown as its escape (``\\udc80``), so the text can be written in any encoding.
    """
    text = _CONTROLS.sub("\N{REPLACEMENT CHARACTER}", _ESCAPES.sub("", escape_surrogates(str(value))))
    text = _LINE_BREAKS.sub(" ", text)
    return text if len(text) <= max_len else text[: max_len - 1] + "\N{HORIZONTAL ELLIPSIS}"


def escape_surrogates(text: str, backslash: str = "\\") -> str:
    """``text`` with each lone surrogate replaced by its ``\\uXXXX`` escape (valid UTF-8 afterwards).

    ``backslash="\\\\"`` writes the escape's backslash as JSON does, for text inside a JSON string.
    """
    if not _SURROGATES.search(text):
        return text
    return _SURROGATES.sub(lambda m: f"{backslash}u{ord(m.group()):04x}", text)


def escaped(text: str) -> str:
    """``text`` with every control (but tab and newline), bidirectional control and lone surrogate
    written as its Python escape (``\\x1b``, ``\\u202e``, ``\\ud800``): nothing is removed, nothing
    reaches a terminal raw. For machine-readable output (CSV) where :func:`clean` would lose data."""
    return _ESCAPABLE.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), text)


def literal(value: object, style: str = "", max_len: int = 500) -> Text:
    """A Rich ``Text`` that shows ``value`` exactly, whatever brackets it contains."""
    from rich.text import Text  # here: ``tuidiag status`` cleans text without importing Rich

    return Text(clean(value, max_len), style=style)

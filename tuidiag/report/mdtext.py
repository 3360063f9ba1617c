"""Markdown text that is safe for values from run files: escaping, tables, images.

Run names, parameter names, config values and messages are written by other
programs. Everything taken from a run passes through :func:`md` before it is put
into the report: control characters and terminal escapes are removed
(:func:`tuidiag.text.safe.clean`) and every character Markdown could read as
syntax is backslash-escaped, so the text renders exactly as it was recorded.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from tuidiag.text.safe import clean

_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|~#&$!])")
"""Characters with a meaning in CommonMark, GFM tables, strikethrough, math or HTML."""


def md(value: object, max_len: int = 500) -> str:
    """``value`` as literal Markdown text: cleaned of control characters and escaped."""
    return _SPECIAL.sub(r"\\\1", clean(value, max_len))


def code(value: object, max_len: int = 200) -> str:
    """A short identifier (finding code, metric name) as inline code, safe whatever it holds."""
    text = clean(value, max_len)
    if "`" in text or "|" in text:
        return md(text, max_len)
    return f"`{text}`"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Lines of a GFM table; cells must already be Markdown (escaped with :func:`md`)."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(cell.replace("\n", " ") or " " for cell in row) + " |")
    return lines


def image(alt: str, filename: str) -> str:
    """An embedded image; ``alt`` is escaped, ``filename`` is one tuidiag chose."""
    return f"![{md(alt)}]({filename})"

"""The page ``tuidiag watch --web`` serves, made self-contained: nothing is fetched from outside.

textual-serve's page template asks Google Fonts for Roboto Mono, which fails offline and
tells a third party that the monitor was opened. :func:`offline_page` drops every
``<link>``, ``<script>`` or ``@import`` that names another site and loads the same font
from the copy textual-serve ships in its static files; the terminal falls back to the
system's monospace fonts where that copy is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

EXTERNAL = r"(?:https?:)?//"
"""How a URL that leaves the page's own server starts (``https://``, ``http://``, ``//``)."""
_EXTERNAL_TAG = re.compile(rf"<(?:link|script)\b[^>]*\b(?:href|src)\s*=\s*[\"']?{EXTERNAL}[^>]*>(?:\s*</script>)?",
                           re.IGNORECASE | re.DOTALL)
_EXTERNAL_IMPORT = re.compile(rf"@import\s+(?:url\()?[\"']?{EXTERNAL}[^;]*;", re.IGNORECASE)
FONT_FILES = (("RobotoMono-VariableFont_wght.ttf", "normal"), ("RobotoMono-Italic-VariableFont_wght.ttf", "italic"))
"""The Roboto Mono files textual-serve ships under ``static/fonts/`` (the page's terminal asks for that family)."""


def font_faces(static_dir: Path) -> str:
    """``@font-face`` rules for the shipped Roboto Mono files that exist, served from the page's static URL."""
    rules = [f'@font-face {{ font-family: "Roboto Mono"; font-style: {style}; font-weight: 100 700; '
             f'src: url("{{{{ config.static.url }}}}fonts/{name}") format("truetype"); }}'
             for name, style in FONT_FILES if (static_dir / "fonts" / name).is_file()]
    return "<style>\n" + "\n".join(rules) + "\n</style>" if rules else ""


def offline_page(template: str, static_dir: Path) -> str:
    """``template`` (a Jinja page) without anything from another site, with the local fonts instead."""
    page = _EXTERNAL_IMPORT.sub("", _EXTERNAL_TAG.sub("", template))
    faces = font_faces(static_dir)
    return page.replace("</head>", faces + "\n</head>", 1) if faces else page


def offline_template(templates_dir: Path, static_dir: Path, name: str = "app_index.html") -> str:
    """textual-serve's page template ``name``, made self-contained by :func:`offline_page`."""
    return offline_page((templates_dir / name).read_text(encoding="utf-8"), static_dir)

"""The README's screenshots are current: ``docs/screenshots.py`` draws every one again and each SVG equals the committed one.

A UI change that alters a picture fails here until ``python docs/screenshots.py`` is re-run
(and the new PNGs looked at). The pictures are drawn once per test session (two app sessions,
the real monitor on a copy of ``demo_runs/``, a fixed clock).
"""

from __future__ import annotations

import html
import importlib.util
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from tests.conftest import examples, ROOT

SCRIPT = ROOT / "docs" / "screenshots.py"
README = ROOT / "README.md"


def _load_script():
    spec = importlib.util.spec_from_file_location("docs_screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


shots = _load_script()


@pytest.fixture(scope="module")
def drawn() -> dict[str, str]:
    """Every picture's SVG as the script draws it now."""
    return shots.render()


def test_the_script_draws_every_listed_picture_and_each_matches_the_committed_svg(drawn) -> None:
    assert list(drawn) == [shot.name for shot in shots.SHOTS]
    stale = shots.stale(drawn)
    assert not stale, f"screenshots out of date: {stale}: run `python docs/screenshots.py` and look at docs/img/*.png"


def test_stale_names_a_changed_or_missing_picture_and_ignores_terminal_ids(drawn, tmp_path) -> None:
    first, second, third = list(drawn)[:3]
    (tmp_path / f"{first}.svg").write_text(re.sub(r"terminal-\d+", "terminal-123", drawn[first]), encoding="utf-8")
    (tmp_path / f"{second}.svg").write_text(drawn[second].replace("tuidiag", "tuidiaq", 1), encoding="utf-8")
    assert shots.stale({name: drawn[name] for name in (first, second, third)}, tmp_path) == [second, third]


def test_each_picture_is_committed_as_svg_and_png_and_the_readme_shows_exactly_those() -> None:
    readme = README.read_text(encoding="utf-8")
    shown = re.findall(r"!\[[^\]]*\]\((docs/img/[^)]+)\)", readme)
    listed = [f"docs/img/{shot.name}.png" for shot in shots.SHOTS]
    assert sorted(shown) == sorted(listed), "README.md's images are not the script's pictures"
    for shot in shots.SHOTS:
        for suffix in (".svg", ".png"):
            assert (ROOT / "docs" / "img" / f"{shot.name}{suffix}").is_file(), f"{shot.name}{suffix} not committed"


@pytest.mark.skipif(shots.png_converter() is None, reason="no rsvg-convert or cairosvg")
def test_write_makes_a_png_of_the_terminal_size(drawn, tmp_path) -> None:
    name = "run-view-80x24"
    written = shots.write({name: drawn[name]}, tmp_path)
    png = (tmp_path / f"{name}.png").read_bytes()
    assert written == [tmp_path / f"{name}.svg", tmp_path / f"{name}.png"] and png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    columns, rows = shots.NARROW_SIZE
    assert width > columns * 10 and height > rows * 20  # a picture of the whole terminal, not of one line


CHARS = st.sampled_from(list("ab x.-|&<>\"'") + ["\u00a0", "\u2800", "\u28c0", "\u284e", "\u2502", "\u250c", "\u2581",
                                                    "\u6f22", "\u2022", "\u2025"])


@settings(max_examples=examples(40), deadline=None)
@given(text=st.text(CHARS, min_size=1, max_size=30), x=st.integers(0, 1000), cell=st.sampled_from([12.2, 10.0, 7.5]))
def test_for_png_puts_each_glyph_of_a_line_in_its_own_cell(text, x, cell) -> None:
    """A line with glyphs the monospace font may lack (braille, blocks, wide characters) is drawn one
    character per cell; a line of ASCII stays one run; the text is unchanged either way."""
    if not cell_len(text):
        return
    element = (f'<text class="terminal-r1" x="{x}" y="20" textLength="{cell * cell_len(text):g}" '
               f'clip-path="url(#terminal-line-0)">{html.escape(text, quote=False)}</text>')
    out = shots.for_png(f'<svg class="rich-terminal" viewBox="0 0 10 10">{element}</svg>')
    assert out.startswith('<svg xml:space="preserve" ')
    spans = re.findall(r'<tspan x="([0-9.e+-]+)">([^<]*)</tspan>', out)
    if set(text) <= {chr(c) for c in range(32, 127)} | {"\u00a0"}:
        assert element in out and not spans
        return
    assert "".join(html.unescape(char) for _, char in spans) == text
    starts = [x + cell * cell_len(text[:i]) for i in range(len(text))]
    assert [float(at) for at, _ in spans] == pytest.approx(starts)


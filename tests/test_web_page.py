"""``tuidiag watch --web`` serves a page that fetches nothing from another site (it works offline).

The real guarded textual-serve application is served by aiohttp on a loopback port; the
test fetches the page with its token, lists every URL it loads (``href``, ``src``,
``url()``, ``@import``), fetches each of them from the same server, and checks the same
in the CSS it loads. The check is shown to catch textual-serve's own template, which asks
Google Fonts for Roboto Mono.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

pytest.importorskip("textual_serve")

from tuidiag.cli.web_page import offline_page  # noqa: E402
from tuidiag.cli.web_serve import GuardedServer, new_token  # noqa: E402

URL_ATTRIBUTE = re.compile(r"""(?:(?<![.\w])(?:href|src)\s*=\s*["']?|(?<![\w.])(?-i:url)\(\s*["']?|@import\s+["'])([^"')\s>]+)""", re.IGNORECASE)
CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def loaded_urls(text: str) -> list[str]:
    """Every URL a page or style sheet makes the browser load."""
    return URL_ATTRIBUTE.findall(CSS_COMMENT.sub("", text))


def outside(urls: list[str], origin: str) -> list[str]:
    """The URLs that leave ``origin`` (relative ones and data: URLs stay)."""
    return [u for u in urls if re.match(r"(?:[a-z]+:)?//", u, re.IGNORECASE) and not u.startswith(origin + "/")]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_textual_serves_own_template_would_fetch_google_fonts() -> None:
    """The regression: the page asked fonts.googleapis.com; the check sees it, and the offline page has none."""
    import textual_serve

    base = Path(textual_serve.__file__).parent
    template = (base / "templates" / "app_index.html").read_text()
    assert any("fonts.googleapis.com" in u for u in outside(loaded_urls(template), "http://localhost"))
    page = offline_page(template, base / "static")
    assert outside(loaded_urls(page), "http://localhost") == []
    assert "fonts/RobotoMono-VariableFont_wght.ttf" in page


@pytest.mark.parametrize("template", [
    '<head><link rel="stylesheet" href="https://cdn.example/x.css"/></head>',
    "<head><link href=//cdn.example/x.css rel=stylesheet></head>",
    '<head><script src="http://cdn.example/x.js"></script></head>',
    '<head><style>@import url("https://cdn.example/x.css");</style></head>',
    "<head><style>@import 'https://cdn.example/x.css';</style></head>",
])
def test_offline_page_drops_every_outside_fetch(template: str, tmp_path: Path) -> None:
    page = offline_page(template, tmp_path)
    assert outside(loaded_urls(template), "http://localhost") and outside(loaded_urls(page), "http://localhost") == []


async def test_the_served_page_and_its_files_stay_on_the_server() -> None:
    from aiohttp.test_utils import TestClient, TestServer

    port, token = _free_port(), new_token()
    server = GuardedServer.make("true", "localhost", port, token)
    app = await server._make_app()
    app.on_startup.clear()  # nothing to announce, nothing started
    async with TestClient(TestServer(app, host="localhost", port=port)) as client:
        origin = f"http://localhost:{port}"
        response = await client.get(f"/?token={token}")
        page = await response.text()
        assert response.status == 200 and "textual-terminal" in page
        urls = loaded_urls(page)
        assert urls and outside(urls, origin) == []
        for url in urls:
            asset = await client.get(url.removeprefix(origin))
            body = await asset.read()
            assert asset.status == 200 and body, url
            if url.endswith(".css"):
                assert outside(loaded_urls(body.decode()), origin) == [], url
            if url.endswith(".js"):  # the terminal's script names no other site at all
                assert re.findall(rb"(?:https?:)?//[a-z0-9-]+\.[a-z0-9.-]+", body, re.IGNORECASE) == [], url
        assert any(u.endswith(".ttf") for u in urls)  # Roboto Mono from the server itself

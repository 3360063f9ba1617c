"""``tuidiag watch --web``: the monitor in a browser, for its user only (a secret token, same-origin).

textual-serve starts one monitor process per browser connection. Without a guard any
local user, or any web page the user visits, could connect to the port and read the
runs. :class:`GuardedServer` adds, as Jupyter does:

- a **secret token** (:func:`new_token`, 256 bits), printed once in the URL to open
  and never put on a command line (other users can read those); the page's websocket
  URL carries it in its path, ``/ws/<token>``;
- an **Origin check**: a request that names an origin (every browser websocket does)
  must come from the page's own origin; bound to loopback, the ``Host`` must also be
  ``localhost``, ``127.0.0.1`` or ``[::1]`` at the server's port (no DNS rebinding).

Only textual-serve's public static files (scripts, fonts, CSS) are served without the
token. The decision is :func:`access_problem`, a pure function. The page itself asks for
nothing from another site (:mod:`tuidiag.cli.web_page`): it works offline.
"""

from __future__ import annotations

import hmac
import posixpath
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

TOKEN_BYTES = 32
PUBLIC_PREFIX = "/static/"
"""textual-serve's own assets: the same for everyone, no secret in them."""
WEBSOCKET_PREFIX = "/ws/"


def new_token() -> str:
    """A fresh secret for one server (URL-safe)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach."""
    return host.strip("[]").lower() in ("localhost", "::1") or host.startswith("127.")


def _host_port(authority: str) -> tuple[str, int | None]:
    """``("localhost", 8000)`` from ``localhost:8000`` (IPv6 in brackets)."""
    try:
        parts = urlsplit(f"//{authority}")
        return (parts.hostname or "").lower(), parts.port
    except ValueError:
        return "", None


def origin_problem(origin: str | None, host_header: str, port: int, loopback: bool) -> str | None:
    """Why a request with this ``Origin`` and ``Host`` may not be served (None when it may)."""
    host, host_port = _host_port(host_header)
    if loopback and (not is_loopback(host) or (host_port or 80) != port):
        return f"Host {host_header[:100]!r} is not this loopback server"
    if origin is None:
        return None  # not a cross-site browser request (a navigation, or a non-browser client)
    try:
        parts = urlsplit(origin)
        origin_host, origin_port = (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return f"Origin {origin[:100]!r} is malformed"
    if parts.scheme != "http" or origin_host != host or origin_port != (host_port or 80):  # the page is served over http
        return f"Origin {origin[:100]!r} is not this server's page"
    return None


def token_problem(path: str, query_token: str | None, secret: str) -> str | None:
    """Why a request for ``path`` does not prove it knows ``secret`` (None when it does)."""
    if posixpath.normpath(path).startswith(PUBLIC_PREFIX):
        return None
    given = path[len(WEBSOCKET_PREFIX):] if path.startswith(WEBSOCKET_PREFIX) else query_token
    if given is None or not hmac.compare_digest(given.encode(), secret.encode()):
        return "the token is missing or wrong: open the URL tuidiag watch --web printed"
    return None


def access_problem(path: str, query_token: str | None, origin: str | None, host_header: str, secret: str,
                   port: int, loopback: bool) -> str | None:
    """Why a request may not be served (None when it may): the Origin first, then the token."""
    return origin_problem(origin, host_header, port, loopback) or token_problem(path, query_token, secret)


def url(host: str, port: int, token: str) -> str:
    """The address to open: the page with its token."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}/?token={token}"


def serve(command: str, host: str, port: int, token: str) -> None:
    """Run the guarded server until interrupted, printing the URL with its token once (imports textual-serve)."""
    GuardedServer.make(command, host, port, token).serve()


def guard(token: str, port: int, loopback: bool) -> Any:
    """The aiohttp middleware: answers 403 with the reason, or passes the request on."""
    from aiohttp import web

    @web.middleware
    async def check(request: web.Request, handler: Any) -> Any:
        problem = access_problem(request.path, request.query.get("token"), request.headers.get("Origin"),
                                 request.headers.get("Host", ""), token, port, loopback)
        if problem is not None:
            return web.Response(status=403, text=f"tuidiag: forbidden: {problem}\n")
        return await handler(request)

    return check


class GuardedServer:
    """Factory for textual-serve's ``Server`` with the token route and the guard middleware."""

    @staticmethod
    def make(command: str, host: str, port: int, token: str) -> Any:
        """A textual-serve server for ``command`` that only the token's holder can use."""
        import aiohttp_jinja2
        import jinja2
        from aiohttp import web
        from textual_serve.server import Server

        from tuidiag.cli.web_page import offline_template

        class Guarded(Server):  # type: ignore[misc]
            async def _make_app(self) -> web.Application:
                app = await super()._make_app()
                page = offline_template(Path(self.templates_path), Path(self.statics_path))
                aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": page}))
                app.router.add_get(WEBSOCKET_PREFIX + "{token}", self.handle_websocket, name="websocket_token")
                app.middlewares.append(guard(token, port, is_loopback(host)))
                return app

            async def on_startup(self, app: web.Application) -> None:
                print(f"tuidiag watch --web: open {url(host, port, token)}\n"
                      "  (the token in it is a password for this monitor; Ctrl-C stops)", flush=True)

            async def handle_index(self, request: web.Request) -> web.Response:
                context = await Server.handle_index.__wrapped__(self, request)
                context["app_websocket_url"] = context["app_websocket_url"].rstrip("/") + "/" + token
                return aiohttp_jinja2.render_template("app_index.html", request, context)

        return Guarded(command, host=host, port=port, title="tuidiag")


__all__ = ["GuardedServer", "access_problem", "new_token", "origin_problem", "serve", "token_problem"]

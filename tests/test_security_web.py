"""``tuidiag watch --web`` serves only whoever holds its printed token, and only to its own page.

A matrix over every kind of request (path, token, Origin, Host) checks the guard's
decision against an independent statement of the rule. A real server, started from a
working directory full of planted modules, then refuses another local user (uid 65534)
and a page from ``http://evil.example`` and never shows them the name of a run in a 0700
directory, while the token's holder gets the monitor, drawn by tuidiag's own code.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tuidiag
from tests.test_security_shadowing import plant
from tuidiag import self_command
from tuidiag.cli.web_serve import access_problem, new_token

pytest.importorskip("textual_serve")
PORT = 8765
SECRET = "s3cr3t-Token_value"
TOKENS = {"none": None, "wrong": "x" * len(SECRET), "prefix": SECRET[:-1], "longer": SECRET + "a",
          "case": SECRET.upper(), "right": SECRET}
PATHS = ("/", "/ws", "/ws/{token}", "/download/abc", "/static/js/textual.js", "/static/../ws")
HOSTS = ("localhost:8765", "127.0.0.1:8765", "[::1]:8765", "evil.example:8765", "localhost:9999", "localhost")
ORIGINS = (None, "same", "http://evil.example", "null", "http://localhost:9999", "https://evil.example:8765",
           "http://evil.example:8765", "file://", "http://localhost:8765.evil.example")


def _expected(path: str, token_kind: str, origin: str | None, host: str, loopback: bool) -> bool:
    """The rule, stated independently: public assets, or the exact token; a same-page origin; a loopback Host."""
    host_ok = host in ("localhost:8765", "127.0.0.1:8765", "[::1]:8765") if loopback else True
    origin_ok = origin is None or origin in ("same", f"http://{host}")  # the page's own origin
    token_ok = (path.startswith("/static/") and ".." not in path) or token_kind == "right"
    return host_ok and origin_ok and token_ok


@pytest.mark.parametrize("loopback", [True, False])
def test_the_guard_decides_every_request_kind_by_the_rule(loopback: bool) -> None:
    cases = 0
    for path, token_kind, host, origin in itertools.product(PATHS, TOKENS, HOSTS, ORIGINS):
        token = TOKENS[token_kind]
        in_path = path == "/ws/{token}"
        request_path = path.replace("{token}", token or "") if in_path else path
        query_token = None if in_path else token
        origin_header = f"http://{host}" if origin == "same" else origin
        problem = access_problem(request_path, query_token, origin_header, host, SECRET, PORT, loopback)
        assert (problem is None) == _expected(path, token_kind, origin, host, loopback), \
            (path, token_kind, host, origin, problem)
        cases += 1
    assert cases == len(PATHS) * len(TOKENS) * len(HOSTS) * len(ORIGINS)


def test_tokens_are_fresh_and_long() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(len(t) >= 43 and re.fullmatch(r"[A-Za-z0-9_-]+", t) for t in tokens)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _request(port: int, path: str, headers: dict[str, str] | None = None, websocket: bool = False) -> tuple[int, bytes]:
    """(status, body) of one GET, as a browser's websocket handshake when ``websocket``."""
    conn = http.client.HTTPConnection("localhost", port, timeout=10)
    extra = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
             "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} if websocket else {}
    try:
        conn.request("GET", path, headers={**extra, **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read() if response.status != 101 else b""
    finally:
        conn.close()


def _as_nobody(port: int, paths: list[str]) -> list[tuple[int, bytes]]:
    """The requests of another local user (uid 65534), from a forked child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgid(65534)
            os.setuid(65534)
            out = [_request(port, p, websocket=p.startswith("/ws")) for p in paths]
            os.write(write, repr(out).encode())
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(write, repr(exc).encode())
            os._exit(1)
    os.close(write)
    data = b""
    while chunk := os.read(read, 65536):
        data += chunk
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0, data
    import ast

    return ast.literal_eval(data.decode())


async def _monitor_shows(port: int, token: str, origin: str, text: bytes, timeout: float) -> bool:
    """Connect as the page would and read the monitor's output until ``text`` appears."""
    import aiohttp

    seen = b""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(f"ws://localhost:{port}/ws/{token}?width=120&height=40",
                                      headers={"Origin": origin}) as ws:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    message = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
                except asyncio.TimeoutError:
                    break
                if message.type == aiohttp.WSMsgType.BINARY:
                    seen += message.data
                elif message.type == aiohttp.WSMsgType.TEXT:
                    seen += message.data.encode()
                else:
                    break
                if text in seen:
                    return True
    return False


@pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"), reason="acts as uid 65534")
def test_the_web_monitor_serves_only_the_token_holder(tmp_path: Path) -> None:
    """The regression: another local user, and a page from evil.example, got the monitor and a private run's name."""
    private = tmp_path / "runs"
    run_name = "private-run-7f3a"
    with tuidiag.Recorder(private / run_name) as rec:
        rec.step(1.0)
    private.chmod(0o700)
    cwd, marks = tmp_path / "cwd", tmp_path / "marks"
    cwd.mkdir()
    marks.mkdir()
    plant(cwd, marks)
    port = _free_port()
    # started as the ``tuidiag`` console script would be (its directory, not the cwd, on the path), in the
    # directory of planted modules: the app processes it starts per browser must not run them
    command = self_command.command("watch", str(private), "--web", "--port", str(port), cwd=cwd)
    proc = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while "token=" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "the server exited"
        token = re.search(r"token=([A-Za-z0-9_-]+)", line).group(1)
        assert token not in " ".join(Path(f"/proc/{proc.pid}/cmdline").read_text().split("\0"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                _request(port, "/static/js/textual.js")
                break
            except OSError:
                time.sleep(0.2)
        for status, body in _as_nobody(port, ["/", "/ws", f"/?token={token[:-1]}", "/download/x"]):
            assert status == 403 and run_name.encode() not in body
        assert _request(port, f"/?token={token}", {"Origin": "http://evil.example"})[0] == 403
        assert _request(port, f"/ws/{token}", {"Origin": "http://evil.example"}, websocket=True)[0] == 403
        assert _request(port, f"/ws/{token}", {"Origin": f"http://localhost:{port}", "Host": f"evil.example:{port}"},
                        websocket=True)[0] == 403
        status, page = _request(port, f"/?token={token}")
        assert status == 200 and f"/ws/{token}".encode() in page
        shown = asyncio.run(_monitor_shows(port, token, f"http://localhost:{port}", run_name.encode(), 90))
        assert shown, "the token's holder did not get the monitor"
        assert sorted(p.name for p in marks.iterdir()) == []
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

"""Security: captures load with ``weights_only=True``; no code a run names is imported without
confirmation, nor from a directory another user controls; hostile control requests are refused
while training goes on; the monitor listens on no port, and ``--web`` only on loopback.
"""

from __future__ import annotations

import ast
import os
import pty
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tuidiag
from tests.conftest import ROOT
from tuidiag.jobs.factory import search_plan
from tuidiag.store import control_channel as ctl

LISTEN = "0A"
"""TCP state LISTEN in /proc/net/tcp."""


def test_every_torch_load_passes_weights_only_true() -> None:
    calls = []
    for path in (ROOT / "tuidiag").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "load" and \
                    getattr(node.func.value, "id", None) == "torch":
                safe = any(k.arg == "weights_only" and getattr(k.value, "value", None) is True for k in node.keywords)
                calls.append((f"{path.name}:{node.lineno}", safe))
    assert calls and all(safe for _, safe in calls), calls


def test_a_capture_loads_with_weights_only(run_dir) -> None:
    import torch

    from tests.helpers import train

    train(run_dir, steps=12, poison_at=8)
    capture = next((run_dir / "captures").glob("*.pt"))
    loaded = torch.load(capture, weights_only=True)
    assert loaded["step"] == 8 and loaded["model_state"]


def _run_naming_a_factory(tmp_path: Path, marker: Path) -> Path:
    source = f"open({str(marker)!r}, 'w').write('imported')\ndef build():\n    pass\n"
    (tmp_path / "evil_factory_mod.py").write_text(source)
    run_dir = tmp_path / "run"
    with tuidiag.Recorder(run_dir, factory="evil_factory_mod:build") as rec:
        rec.step(1.0)
    return run_dir


def test_the_factory_a_run_names_is_not_imported_without_confirmation(tmp_path: Path, python: str,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The first command as a user runs it, a process of its own; the others through the same ``main``
    in this process (each process of its own would import torch again), from the same directory."""
    from tuidiag.cli.main import main

    marker = tmp_path / "imported"
    run_dir = _run_naming_a_factory(tmp_path, marker)
    done = subprocess.run([python, "-m", "tuidiag", "lr-find", str(run_dir)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert done.returncode == 2 and "not confirmed" in done.stderr, done.stderr
    monkeypatch.chdir(tmp_path)
    with open(os.devnull) as no_terminal:
        monkeypatch.setattr(sys, "stdin", no_terminal)
        for command in (["overfit-batch", str(run_dir)], ["sharpness", str(run_dir)]):
            assert main(command) == 2
            assert "not confirmed" in capsys.readouterr().err
    assert not marker.exists() and "evil_factory_mod" not in sys.modules


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory owned by another user needs root")
def test_a_script_directory_of_another_user_is_not_searched(tmp_path: Path) -> None:
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    for directory in (mine, theirs):
        directory.mkdir()
        (directory / "train.py").write_text("")
    os.chown(theirs, 12345, 12345)
    assert mine in search_plan({"command": [str(mine / "train.py")]}, cwd=tmp_path).paths
    assert theirs not in search_plan({"command": [str(theirs / "train.py")]}, cwd=tmp_path).paths
    theirs.chmod(0o777)
    os.chown(theirs, os.geteuid(), os.getegid())
    assert theirs not in search_plan({"command": [str(theirs / "train.py")]}, cwd=tmp_path).paths  # world-writable


def test_hostile_control_requests_are_refused_and_training_goes_on(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    outside = tmp_path / "outside.json"
    outside.write_text('{"job": "lr_find", "args": {}}')
    with tuidiag.Recorder(run_dir, flush_interval=30.0) as rec:
        directory = ctl.control_dir(run_dir)
        directory.mkdir(mode=0o700)
        (directory / f"link{ctl.REQUEST_SUFFIX}").symlink_to(outside)
        os.mkfifo(directory / f"fifo{ctl.REQUEST_SUFFIX}", 0o600)
        (directory / f"garbage{ctl.REQUEST_SUFFIX}").write_bytes(b"\xff{[" * 1000)
        (directory / f"garbage{ctl.REQUEST_SUFFIX}").chmod(0o600)
        (directory / f"job{ctl.REQUEST_SUFFIX}").write_text('{"job": "rm -rf /", "args": {}}')
        (directory / f"job{ctl.REQUEST_SUFFIX}").chmod(0o600)
        rec.flush()
        for step in range(5):
            rec.step(1.0 / (step + 1))
        rec.flush()
    run = tuidiag.open_run(run_dir)
    assert run.status == "finished" and len(run.series("train/loss")) == 5
    for name in ("link", "fifo", "garbage", "job"):
        status = ctl.read_status(run_dir, name)
        assert status is None or status["state"] == "refused", (name, status)
    assert not list((run_dir / "jobs").glob("*.json")) if (run_dir / "jobs").exists() else True


def _tree(pid: int) -> set[int]:
    """``pid`` and all its descendants (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, grew = {pid}, True
    while grew:
        children = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= children
        grew = bool(children)
    return tree


def listening_addresses(pid: int) -> list[str]:
    """Local addresses of TCP sockets in LISTEN state owned by ``pid`` or its descendants."""
    inodes = set()
    for p in _tree(pid):
        try:
            for fd in (Path("/proc") / str(p) / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                found.append(_address(fields[1]))
    return found


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, raw[::-1])}:{int(port, 16)}"
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return f"[{socket.inet_ntop(socket.AF_INET6, words)}]:{int(port, 16)}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_monitor_opens_no_listening_socket(tmp_path: Path, python: str) -> None:
    with tuidiag.Recorder(tmp_path / "runs" / "a") as rec:
        rec.step(1.0)
    leader, follower = pty.openpty()
    env = os.environ | {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen([python, "-m", "tuidiag", "watch", str(tmp_path / "runs")], stdin=follower,
                            stdout=follower, stderr=follower, env=env, cwd=tmp_path)
    try:
        drawn = b""
        deadline = time.monotonic() + 60
        while b"\x1b[" not in drawn[200:] and time.monotonic() < deadline and proc.poll() is None:
            drawn += os.read(leader, 65536)  # the monitor has started drawing
        time.sleep(1.0)
        assert proc.poll() is None, drawn[-500:]
        assert listening_addresses(proc.pid) == []
    finally:
        proc.kill()
        proc.wait()
        os.close(leader)
        os.close(follower)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_web_mode_listens_on_loopback_only_by_default(tmp_path: Path, python: str) -> None:
    pytest.importorskip("textual_serve")
    port = _free_port()
    proc = subprocess.Popen([python, "-m", "tuidiag", "watch", str(tmp_path), "--web", "--port", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=os.environ | {"PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    try:
        addresses: list[str] = []
        deadline = time.monotonic() + 60
        while not addresses and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            addresses = listening_addresses(proc.pid)
        assert addresses, "the web server never listened"
        assert all(a in (f"127.0.0.1:{port}", f"[::1]:{port}") for a in addresses), addresses
    finally:
        proc.kill()
        proc.wait()

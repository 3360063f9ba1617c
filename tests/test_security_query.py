"""``tuidiag query`` reads the runs under ``--root`` and nothing else: it writes no file and reaches no network.

A matrix of statements that write (``COPY ... TO`` in every format, over a new file, a
shard or ``run.json``; ``EXPORT DATABASE``; ``ATTACH`` of a new or existing file), read
outside the runs (``read_csv('/etc/passwd')``, ``read_text``, ``read_blob``, ``glob``,
a ``read_parquet`` of a shard the views left out), reach the network (a local listener
must see no connection), load extensions, or try to switch the protection off first:
each exits 2 and leaves every file as it was. ``--allow-writes`` gives the access back.
"""

from __future__ import annotations

import hashlib
import socket
import threading
from pathlib import Path

import pytest

import tuidiag
from tuidiag.cli.main import main

pytest.importorskip("duckdb")

UNLOCKS = ("", "SET enable_external_access = true; ", "SET lock_configuration = false; SET enable_external_access = true; ",
           "RESET enable_external_access; ", "SET allowed_directories = ['/']; ")
"""Prefixes that try to switch the protection off before the statement."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A root of two runs, a file outside it, and a listening socket for network attempts."""
    base = tmp_path_factory.mktemp("query")
    root = base / "runs"
    for name in ("a", "b"):
        with tuidiag.Recorder(root / name) as rec:
            for step in range(10):
                rec.log({"train/loss": 1.0 / (step + 1)}, step=step)
    (base / "outside.csv").write_text("x,y\n1,2\n")
    return {"base": base, "root": root, "shard": next((root / "a" / "metrics").glob("*.parquet")),
            "manifest": root / "a" / "run.json"}


def _snapshot(base: Path) -> dict[str, str]:
    return {p.relative_to(base).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in base.rglob("*") if p.is_file()}


class Listener:
    """A TCP listener on loopback counting the connections it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def _statements(world: dict[str, Path], port: int) -> list[str]:
    base, shard, manifest = world["base"], world["shard"], world["manifest"]
    new = base / "written"
    writes = [f"COPY (SELECT * FROM metrics) TO '{new}.{fmt}' (FORMAT {fmt})" for fmt in ("csv", "parquet", "json")]
    writes += [f"COPY (SELECT 1 AS a) TO '{shard}' (FORMAT parquet, USE_TMP_FILE false)",
               f"COPY (SELECT 1 AS a) TO '{manifest}' (FORMAT csv)",
               f"COPY runs TO '{new}-runs.csv'",
               f"EXPORT DATABASE '{new}-export'",
               f"ATTACH '{new}.duckdb' AS w; CREATE TABLE w.t AS SELECT 1",
               f"ATTACH '{shard}' AS s"]
    reads = ["SELECT * FROM read_csv('/etc/passwd')", f"SELECT * FROM read_csv('{base}/outside.csv')",
             f"SELECT * FROM read_text('{manifest}')", f"SELECT * FROM read_blob('{shard}')",
             "SELECT * FROM glob('/*')", f"SELECT * FROM read_parquet('{shard}')"]
    network = [f"SELECT * FROM read_csv('http://127.0.0.1:{port}/x.csv')",
               f"SELECT * FROM read_parquet('http://127.0.0.1:{port}/x.parquet')",
               "INSTALL httpfs", "LOAD httpfs"]
    return [unlock + statement for statement in writes + reads + network for unlock in UNLOCKS]


def test_no_statement_writes_reads_outside_or_reaches_the_network(world: dict[str, Path],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    listener = Listener()
    try:
        before = _snapshot(world["base"])
        statements = _statements(world, listener.port)
        assert len(statements) == 19 * len(UNLOCKS)
        for sql in statements:
            assert main(["query", "--root", str(world["root"]), sql]) == 2, sql
            err = capsys.readouterr().err
            assert "tuidiag query:" in err, (sql, err)
            assert _snapshot(world["base"]) == before, sql
        assert listener.connections == 0
    finally:
        listener.close()


def test_reading_the_runs_still_works(world: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    sql = "SELECT run, count(*) AS n, min(value) AS best FROM metrics GROUP BY run ORDER BY run"
    assert main(["query", "--root", str(world["root"]), "--csv", sql]) == 0
    assert capsys.readouterr().out.splitlines() == ["run,n,best", "a,10,0.1", "b,10,0.1"]
    assert main(["query", "--root", str(world["root"])]) == 0
    assert "metric VARCHAR" in capsys.readouterr().out


def test_allow_writes_gives_the_access_back(world: dict[str, Path], tmp_path: Path) -> None:
    """The regression (``COPY ... TO`` and ``ATTACH`` wrote files) is now opt-in."""
    out = tmp_path / "export.csv"
    sql = f"COPY (SELECT * FROM metrics) TO '{out}' (FORMAT csv)"
    assert main(["query", "--root", str(world["root"]), sql]) == 2 and not out.exists()
    assert main(["query", "--root", str(world["root"]), "--allow-writes", sql]) == 0
    assert len(out.read_text().splitlines()) == 21

"""One bad run never hides the others: each run is read on its own (``tuidiag.viewmodel.model``).

A hypothesis test mixes healthy runs with damaged ones of every kind (``run.json``
nested too deeply, garbage, a directory or a FIFO; a shard truncated, flipped, or
whose footer claims 10^12 rows; files the reader may not open; a disk that hangs)
and checks that one refresh within its time budget lists every healthy run as it is
and every damaged one with its reason. A Pilot test shows the same in the monitor:
the healthy run in the first refresh, the bad ones as ``unreadable: <reason>``,
Enter on one says why instead of opening it, and a hung run appears once its read ends.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.widgets import DataTable

import tuidiag
from tests.app_helpers import fixed_clock, wait_for
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.overview import OverviewScreen
from tuidiag.viewmodel import model as model_module
from tuidiag.viewmodel.model import RunsModel
from tuidiag.store import decode, reader

HEALTHY_STEPS = 20


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def forge_row_count(path: Path, claim: int) -> None:
    """Rewrite a shard's Thrift footer so that it claims ``claim`` rows (file, row group, column chunks)."""
    data = path.read_bytes()
    length = struct.unpack("<I", data[-8:-4])[0]
    footer = data[-8 - length : -8]
    rows = pq.ParquetFile(path).metadata.num_rows
    old, new = b"\x16" + _varint(2 * rows), b"\x16" + _varint(2 * claim)  # field delta 1, type i64, zigzag varint
    assert old in footer
    footer = footer.replace(old, new)
    path.write_bytes(data[: -8 - length] + footer + struct.pack("<I", len(footer)) + b"PAR1")
    assert pq.ParquetFile(path).metadata.num_rows == claim


def _record(path: Path, steps: int = HEALTHY_STEPS) -> None:
    with tuidiag.Recorder(path, flush_interval=3600, control=False) as rec:
        for _ in range(steps):
            rec.step(1.0)


def _shards(path: Path) -> list[Path]:
    return sorted((path / "metrics").glob("r*.parquet"))


# ---- kinds of damage: each makes one run directory and returns a word its reason contains ----------
def deep_json(path: Path, depth: int) -> str:
    path.mkdir()
    (path / "run.json").write_text("[" * depth + "]" * depth)
    return "nests more than"


def garbage_json(path: Path, junk: bytes) -> str:
    path.mkdir()
    (path / "run.json").write_bytes(b"\xff" + junk)
    return "run.json"


def json_dir(path: Path, _: object) -> str:
    (path / "run.json").mkdir(parents=True)
    return "not a regular file"


def json_fifo(path: Path, _: object) -> str:
    path.mkdir()
    os.mkfifo(path / "run.json")
    return "not a regular file"


def truncated_shard(path: Path, cut: int) -> str:
    _record(path)
    (path / "run.json").unlink()
    shard = _shards(path)[0]
    shard.write_bytes(shard.read_bytes()[: cut % shard.stat().st_size])
    return "parquet"


def forged_footer(path: Path, claim: int) -> str | None:
    _record(path)
    shard = _shards(path)[0]
    shutil.copy(shard, shard.with_name("r0-000000900-000000900.parquet"))  # a second shard: the reader plans a long read
    forge_row_count(shard, claim)
    return None  # what gives way (memory, a size limit), if anything, depends on the reader and the machine


def denied(path: Path, _: object) -> str:
    _record(path)
    for file in [path / "run.json", *_shards(path), *sorted((path / "events").glob("*.parquet"))]:
        file.chmod(0)
    return "permission denied"


DAMAGE: dict[str, tuple[Callable[[Path, object], str | None], st.SearchStrategy]] = {
    "deep json": (deep_json, st.integers(10_000, 200_000)),
    "garbage json": (garbage_json, st.binary(max_size=64)),
    "json dir": (json_dir, st.none()),
    "json fifo": (json_fifo, st.none()),
    "truncated shard": (truncated_shard, st.integers(0, 10**6)),
    "forged footer": (forged_footer, st.integers(10**12, 10**15)),  # terabytes: never reserved for real
    "denied": (denied, st.none()),
}


@pytest.fixture
def as_unprivileged(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Files without read permission refuse to open, also when the tests run as root (who may read anything)."""
    if os.geteuid() != 0:
        yield
        return

    def check(path: object) -> None:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return
        if stat.S_ISREG(mode) and not mode & 0o444:
            raise PermissionError(13, "Permission denied", str(path))

    read_manifest, parquet_file = reader.read_manifest, decode.pq.ParquetFile

    def manifest(run_dir: Path) -> dict:
        check(Path(run_dir) / "run.json")
        return read_manifest(run_dir)

    def parquet(path: object, *args: object, **kwargs: object) -> object:
        check(path)
        return parquet_file(path, *args, **kwargs)

    monkeypatch.setattr(reader, "read_manifest", manifest)
    monkeypatch.setattr(model_module, "read_manifest", manifest)  # the overview reads run.json alone first
    monkeypatch.setattr(decode.pq, "ParquetFile", parquet)
    yield


class Hang:
    """A disk that hangs on one run until released (a network filesystem gone away)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: set[str] = set()
        self.release = threading.Event()
        real, real_manifest = model_module.open_source, model_module.read_manifest

        def opening(path: Path, kind: str) -> object:
            if Path(path).name in self.names:
                self.release.wait(60)
            return real(path, kind)

        def manifest(path: Path) -> object:  # the overview's first read of a run: its run.json
            if Path(path).name in self.names:
                self.release.wait(60)
            return real_manifest(path)

        monkeypatch.setattr(model_module, "open_source", opening)
        monkeypatch.setattr(model_module, "read_manifest", manifest)


@pytest.fixture(scope="module")
def healthy_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "healthy"
    _record(path)
    return path


@settings(max_examples=int(os.environ.get("TUIDIAG_FUZZ_EXAMPLES", 30)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data(), healthy=st.integers(1, 3),
       kinds=st.lists(st.sampled_from(sorted(DAMAGE) + ["hang"]), min_size=1, max_size=5))
def test_every_healthy_run_is_listed_beside_any_damaged_ones(tmp_path_factory: pytest.TempPathFactory, healthy_template: Path,
                                                              as_unprivileged: None, monkeypatch: pytest.MonkeyPatch,
                                                              data: st.DataObject, healthy: int, kinds: list[str]) -> None:
    drawn = [(kind, None if kind == "hang" else data.draw(DAMAGE[kind][1], label=kind)) for kind in kinds]
    root = tmp_path_factory.mktemp("root")
    expected: dict[str, str | None] = {}
    hung: set[str] = set()
    for i, (kind, argument) in enumerate(drawn):
        name = f"bad-{i}-{kind.replace(' ', '-')}"
        if kind == "hang":
            shutil.copytree(healthy_template, root / name)
            hung.add(name)
        else:
            expected[name] = DAMAGE[kind][0](root / name, argument)
    for i in range(healthy):
        shutil.copytree(healthy_template, root / f"healthy-{i}")
    hang = Hang(monkeypatch)  # after every draw: an example hypothesis gives up on never leaves a hang behind
    hang.names |= hung
    model = RunsModel(root)
    try:
        model.discover()
        model.refresh(wait=0.5)
        others_done = lambda: all(s.status != "reading" and (s.health != "-" or s.status == "unreadable")  # read, and diagnosed:
                                  for s in model.summaries() if Path(s.key).name not in hang.names)  # all said then
        deadline = time.monotonic() + 30
        while not others_done() and time.monotonic() < deadline:
            time.sleep(0.05)
        summaries = {Path(s.key).name: s for s in model.summaries()}  # the hung runs still hang
    finally:
        hang.release.set()
    for i in range(healthy):
        good = summaries[f"healthy-{i}"]
        assert good.status == "finished" and good.step == HEALTHY_STEPS - 1 and good.problem == "", good
    for name, word in expected.items():
        bad = summaries[name]
        if word is None:  # a forged row count is harmless when the reader can reserve it: then the run reads whole
            assert bad.status == "unreadable" or bad.problem or bad.step == HEALTHY_STEPS - 1, bad
            continue
        assert bad.status == "unreadable" or bad.problem, bad  # said, never hidden
        assert word.lower() in bad.problem.lower(), (word, bad.problem)
    for name in hang.names:
        assert summaries[name].status == "reading"
    if hang.names:  # released: the hung runs are read at the next refresh like any other
        assert all(s.status == "finished" for s in model.refresh() if Path(s.key).name in hang.names)


class RecordingApp(TuidiagApp):
    """The monitor, keeping every overview it was sent."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.refreshes: list[dict[str, object]] = []

    def on_tuidiag_app_runs_refreshed(self, message: TuidiagApp.RunsRefreshed) -> None:
        self.refreshes.append({Path(s.key).name: s for s in message.summaries})
        super().on_tuidiag_app_runs_refreshed(message)


def _status_cells(app: TuidiagApp) -> dict[str, str]:
    screen = next(s for s in app.screen_stack if isinstance(s, OverviewScreen))
    table = screen.query_one("#runs", DataTable)
    return {Path(str(key.value)).name: table.get_row(key)[2].plain for key in table.rows}


async def test_the_monitor_lists_the_healthy_run_at_once_and_says_why_the_others_are_unreadable(
        tmp_path: Path, healthy_template: Path, as_unprivileged: None, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(healthy_template, tmp_path / "healthy")
    deep_json(tmp_path / "deep", 100_000)
    forged_footer(tmp_path / "forged", 10**12)
    truncated_shard(tmp_path / "truncated", 100)
    json_dir(tmp_path / "jsondir", None)
    denied(tmp_path / "denied", None)
    shutil.copytree(healthy_template, tmp_path / "hung")
    hang = Hang(monkeypatch)
    hang.names.add("hung")
    app = RecordingApp(tmp_path, poll=True, clock=fixed_clock)
    try:
        async with app.run_test(size=(160, 30)) as pilot:
            # the first refresh in which every run but the hung one is read (the very first, unless the machine is so
            # loaded that a read outlasts READ_WAIT): the hung run, whose read never ends until released, holds none of them
            unreadable = ("deep", "truncated", "jsondir", "denied")

            def settled(refresh: dict) -> bool:
                return refresh["healthy"].status == "finished" and all(refresh[n].status == "unreadable" for n in unreadable)

            assert await wait_for(pilot, lambda: any(settled(r) for r in app.refreshes), timeout=30)
            first = next(r for r in app.refreshes if settled(r))
            assert first["healthy"].step == HEALTHY_STEPS - 1
            assert first["hung"].status == "reading"
            cells = _status_cells(app)
            assert cells["healthy"].startswith("finished") and "unreadable" not in cells["healthy"]
            for name, word in zip(unreadable, ("nests more than", "parquet", "not a regular file", "permission denied")):
                assert first[name].status == "unreadable" and word in first[name].problem.lower(), first[name]
                assert cells[name].startswith("unreadable: " + first[name].problem[:40]), (name, cells[name])
            forged = first["forged"]
            assert "unreadable" in cells["forged"] or forged.step == HEALTHY_STEPS - 1
            table = app.screen.query_one("#runs", DataTable)
            table.move_cursor(row=table.get_row_index("%s" % (tmp_path / "deep")))
            await pilot.press("enter")
            assert isinstance(app.screen, OverviewScreen)  # not opened: the reason is told instead
            assert any("nests more than" in str(n.message).lower() for n in app._notifications)
            hang.release.set()
            assert await wait_for(pilot, lambda: app.summaries and
                                  next(s for s in app.summaries if Path(s.key).name == "hung").status == "finished", timeout=15)
    finally:
        hang.release.set()


def test_ls_lists_the_healthy_run_beside_one_it_cannot_open(tmp_path: Path, healthy_template: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from tuidiag.cli.main import main

    shutil.copytree(healthy_template, tmp_path / "healthy")
    deep_json(tmp_path / "deep", 100_000)
    assert main(["ls", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("healthy") and "finished" in line and line.split()[2] == str(HEALTHY_STEPS - 1)  # its last step
               for line in lines)
    assert any(line.startswith("deep") for line in lines)  # listed, read without its manifest (its status unknown) ...
    flat = "".join(out.split())  # the warning is wrapped at the terminal's width
    assert "deep:run.jsonisunreadable" in flat and "nestsmorethan64levels" in flat  # ... and why

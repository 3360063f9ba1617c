"""``tuidiag watch`` on other trackers' logs, live: the real writers in a subprocess while the app watches.

One writer process (``tests/foreign_writers.py``) holds torch's ``SummaryWriter``, wandb in
offline mode, Lightning's ``CSVLogger`` and a Keras-format CSV log for the whole module
(torch, Lightning and wandb are imported once, while the snapshot tests, which need no writer, run). Each test asks it to log a step and waits, with a
bound, until the app (Textual pilot, real watchdog) shows that step's loss.
"""

from __future__ import annotations

import math
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from textual.widgets import DataTable

import tuidiag
from tests.app_helpers import settled, wait_for
from tests.conftest import ROOT
from tuidiag.app.app import TuidiagApp
from tuidiag.app.screens.overview import SOURCE_COLUMN, OverviewScreen
from tuidiag.format import LOSS
from tuidiag.text.numbers import fmt

KINDS = ("tensorboard", "wandb", "lightning", "keras")
SOURCE_OF = {"tensorboard": "tensorboard", "wandb": "wandb", "lightning": "csv", "keras": "csv"}
WAIT = 30.0
"""Bound on any wait for the app (seconds): the machine may be loaded; a pass takes well under 2 s."""


class Writers:
    """The writer process: ``log(kind, step, loss)`` returns once the writer flushed."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root = root
        self.paths = {"tensorboard": root / "tb" / "run1", "wandb": root, "lightning": root,
                      "keras": root / "keras" / "training.log"}
        env = dict(os.environ, PYTHONPATH=str(ROOT), WANDB_MODE="offline", WANDB_SILENT="true",
                   WANDB_CACHE_DIR=str(home / "cache"), WANDB_CONFIG_DIR=str(home / "config"),
                   WANDB_DATA_DIR=str(home / "data"), OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.foreign_writers", *(f"{k}={p}" for k, p in self.paths.items())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                     cwd=ROOT, env=env)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.steps = {kind: 0 for kind in KINDS}

    def _pump(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.put(line.strip())

    def expect(self, prefix: str, timeout: float = 120.0) -> str:
        line = self.lines.get(timeout=timeout)
        assert line.startswith(prefix), line
        return line

    def log(self, kind: str, loss: float, val: float | None = None) -> tuple[int, float]:
        """Log the next step of ``kind``; (step, wall time the flush returned)."""
        self.steps[kind] += 1
        step = self.steps[kind]
        self.proc.stdin.write(f"{kind} {step} {loss!r}{'' if val is None else f' {val!r}'}\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        return step, float(self.expect(f"flushed {kind}", 30).split()[2])

    def key(self, kind: str) -> Path:
        """The run key the monitor lists the writer's run under."""
        if kind == "wandb":
            return next((self.root / "wandb").glob("offline-run-*"))
        if kind == "lightning":
            return self.root / "lightning_logs" / "version_0"
        return self.paths[kind]

    def close(self) -> None:
        """Ask the writers to close; a process slow to exit (wandb's service shutting down) is killed:
        nothing is read from its files after the module."""
        try:
            self.proc.stdin.write("quit\n")  # type: ignore[union-attr]
            self.proc.stdin.close()  # type: ignore[union-attr]
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture(scope="module", autouse=True)
def writer_process(tmp_path_factory: pytest.TempPathFactory) -> Writers:
    """The writer process, started with the module so its imports (torch, Lightning, wandb) overlap the tests
    that need no writer (the snapshots, first in the file); a tuidiag run is recorded beside it."""
    root = tmp_path_factory.mktemp("mixed")
    with tuidiag.Recorder(root / "own" / "recorded", flush_interval=0.1) as rec:
        for i in range(5):
            rec.step(1.0 / (i + 1))
    handle = Writers(root, tmp_path_factory.mktemp("wandb-home"))
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture(scope="module")
def writers(writer_process: Writers) -> Writers:
    """All four writers on one mixed root (a tuidiag run beside them), each with step 0 logged."""
    writer_process.expect("ready")
    for kind in KINDS:
        writer_process.steps[kind] = -1
        writer_process.log(kind, 1.0)
    return writer_process


OLD = 1_700_000_000.0
"""Wall and modification times of the snapshot root's logs: fixed, so every age and status on screen is too."""


@pytest.fixture(scope="module")
def static_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo tuidiag run beside a TensorBoard log (tensorboard's own writer), a Lightning CSV log and a Keras CSV log."""
    import shutil

    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from tests.app_helpers import DEMO_RUNS

    root = tmp_path_factory.mktemp("static") / "logs"
    shutil.copytree(DEMO_RUNS / "healthy", root / "own" / "healthy")
    writer = EventFileWriter(str(root / "tb" / "exp1"))
    for step in range(200):
        values = [Summary.Value(tag="Loss/train", simple_value=2.0 / (1 + step / 20)),
                  Summary.Value(tag="learning_rate", simple_value=0.01)]
        writer.add_event(Event(wall_time=OLD - 200 + step, step=step, summary=Summary(value=values)))
    writer.close()
    lightning = root / "lightning_logs" / "version_0"
    lightning.mkdir(parents=True)
    (lightning / "metrics.csv").write_text("epoch,step,train_loss,val_loss\n" + "".join(
        f"0,{s},{1.0 / (s + 1):.4f},{'' if s % 10 else f'{1.5 / (s + 1):.4f}'}\n" for s in range(50)))
    (lightning / "hparams.yaml").write_text("lr: 0.01\nbatch_size: 32\n")
    (root / "keras").mkdir()
    (root / "keras" / "training.log").write_text("epoch,loss,val_loss\n" + "".join(
        f"{e},{0.9 ** e:.4f},{0.95 ** e:.4f}\n" for e in range(12)))
    for path in root.rglob("*"):
        if path.is_file() and "own" not in path.parts:
            os.utime(path, (OLD, OLD))
    return root


def _loaded(app: TuidiagApp, tab: str | None = None):
    app.animation_level = "none"

    async def run_before(pilot) -> None:
        assert await wait_for(pilot, lambda: settled(app, 4), 60)
        if tab is not None:
            assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None, 60)
            await pilot.press(tab)
        await pilot.pause(0.5)
        await pilot.wait_for_scheduled_animations()

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_mixed_overview_snapshot(snap_compare, static_root: Path, monkeypatch, size: tuple[int, int]) -> None:
    from tests.app_helpers import fixed_clock

    monkeypatch.chdir(static_root.parent)
    app = TuidiagApp(Path("logs"), clock=fixed_clock)
    assert snap_compare(app, terminal_size=size, run_before=_loaded(app))


def test_foreign_run_layers_tab_snapshot(snap_compare, static_root: Path, monkeypatch) -> None:
    """A TensorBoard run's Layers tab says the per-layer view needs the recorder; the diagnosis has its note."""
    from tests.app_helpers import fixed_clock

    monkeypatch.chdir(static_root.parent)
    app = TuidiagApp(Path("logs"), clock=fixed_clock)

    async def run_before(pilot) -> None:
        assert await wait_for(pilot, lambda: len(app.summaries) == 4, 60)
        app.open_run(str(Path("logs") / "tb" / "exp1"))
        await _loaded(app, tab="5")(pilot)
        assert "needs tuidiag's recorder" in str(app.screen.query_one("#layer-grid").render())

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def _summary(app: TuidiagApp, key: Path):
    return next((s for s in app.summaries if s.key == str(key)), None)


def _row_text(app: TuidiagApp, key: Path) -> str:
    screen = next(s for s in app.screen_stack if isinstance(s, OverviewScreen))
    table = screen.query_one("#runs", DataTable)
    return " ".join(str(cell) for cell in table.get_row(str(key)))


@pytest.mark.parametrize("kind", KINDS)
async def test_a_flush_of_the_writer_shows_on_screen(writers: Writers, kind: str) -> None:
    app = TuidiagApp(writers.root)
    async with app.run_test(size=(160, 30)) as pilot:
        key = writers.key(kind)
        assert await wait_for(pilot, lambda: (s := _summary(app, key)) is not None and s.step is not None, WAIT)
        loss = 0.5 / (writers.steps[kind] + 2) + 0.0123
        step, _ = writers.log(kind, loss)

        def shown() -> bool:
            s = _summary(app, key)
            return s is not None and s.step == step and s.last_loss is not None and math.isclose(s.last_loss, loss, rel_tol=1e-6)

        assert await wait_for(pilot, shown, WAIT), _summary(app, key)
        summary = _summary(app, key)
        assert summary.source == SOURCE_OF[kind] and summary.status == "running"
        assert await wait_for(pilot, lambda: fmt(loss) in _row_text(app, key), WAIT)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_metric_first_logged_mid_run_is_read_and_no_row_twice(writers: Writers, kind: str) -> None:
    """Lightning rewrites metrics.csv under a new header when ``val_loss`` first appears: read again, not doubled."""
    app = TuidiagApp(writers.root)
    async with app.run_test(size=(120, 30)) as pilot:
        key = writers.key(kind)
        assert await wait_for(pilot, lambda: _summary(app, key) is not None and _summary(app, key).step is not None, WAIT)
        step, _ = writers.log(kind, 0.25, val=0.75)
        assert await wait_for(pilot, lambda: (s := _summary(app, key)) is not None and s.step == step, WAIT)
        run = app.model.runs[key]
        val = run.series("val/loss")
        assert list(val.steps)[-1] == step and math.isclose(float(val.values[-1]), 0.75, rel_tol=1e-6)
        steps = list(run.series(LOSS).steps)
        assert steps == sorted(set(steps)) and steps[-1] == step


async def test_mixed_root_lists_every_kind_with_its_source(writers: Writers) -> None:
    app = TuidiagApp(writers.root)
    async with app.run_test(size=(160, 30)) as pilot:
        expected = {str(writers.root / "own" / "recorded"): "tuidiag", **{str(writers.key(k)): SOURCE_OF[k] for k in KINDS}}
        assert await wait_for(pilot, lambda: {s.key: s.source for s in app.summaries} == expected, WAIT)
        table = app.screen.query_one("#runs", DataTable)
        assert [str(c.label) for c in table.columns.values()][2] == SOURCE_COLUMN
        for key, source in expected.items():
            assert source in _row_text(app, Path(key))
        wandb_run = app.model.runs[writers.key("wandb")]
        assert wandb_run.manifest["config"]["model"] == {"width": 8}  # the config wandb.init was given
        assert any(name.startswith("sys/") for name in wandb_run.metric_names)  # wandb's system metrics


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root``: (size, mtime in ns)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            stat = os.lstat(os.path.join(dirpath, name))
            found[os.path.relpath(os.path.join(dirpath, name), root)] = (stat.st_size, stat.st_mtime_ns)
    return found


async def test_watching_writes_nothing_into_foreign_runs(writers: Writers, tmp_path: Path, monkeypatch) -> None:
    """Each foreign run (copied as it stands after a flush) is listed, opened and diagnosed; not a byte or mtime changes."""
    import shutil

    root = tmp_path / "logs"
    for kind in KINDS:
        source = writers.key(kind)
        target = root / kind / source.name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.log", "files", "tmp"))  # W&B's own debug logs
        else:
            target.parent.mkdir(parents=True)
            shutil.copy2(source, target)
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    before = _listing(root)
    app = TuidiagApp(root)
    async with app.run_test(size=(120, 30)) as pilot:
        assert await wait_for(pilot, lambda: len(app.summaries) == 4 and all(s.step is not None for s in app.summaries), WAIT)
        for summary in list(app.summaries):
            app.open_run(summary.key)
            assert await wait_for(pilot, lambda: getattr(app.screen, "detail", None) is not None, WAIT)
            await pilot.press("escape")
        app.request_refresh(None)
        await pilot.pause(0.3)
    assert _listing(root) == before
    assert not cache.exists()
